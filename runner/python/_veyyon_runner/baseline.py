"""What the host set (the environment, the sys.path entries), so a snapshot saves only what the user changed.

Captured as the runner starts, before any request, and kept apart from ``snapshot`` so the runner
records it without loading the snapshot's code until a snapshot is asked for.
"""

import os
import sys


def _raw_environ():
    """The environment as the OS holds it: os.environ's own dict of encoded names and values where there is one
    (comparing it costs a few microseconds; going through os.environ decodes every entry)."""
    data = getattr(os.environ, "_data", None)
    return data if isinstance(data, dict) else dict(os.environ)


def _decoder(name):
    return getattr(os.environ, name, None) if isinstance(getattr(os.environ, "_data", None), dict) else None


class _Baseline:
    def __init__(self):
        self.env = None
        self.path = set()

    def capture(self):
        """The environment and sys.path as the runner starts (before any request)."""
        self.env = dict(_raw_environ())
        self.path = set(sys.path)

    def host_applied(self, env, path_entry):
        """An execute request's env and cwd came from the host (already applied): they are part of the baseline."""
        if self.env is None:
            return
        raw = _raw_environ()
        encode = _decoder("encodekey") or (lambda key: key)
        for key in env or ():
            try:
                encoded = encode(key)
            except Exception:
                continue
            if encoded in raw:
                self.env[encoded] = raw[encoded]
            else:
                self.env.pop(encoded, None)
        if path_entry is not None:
            self.path.add(path_entry)

    def env_changes(self):
        """({name: value} the user set or changed, [names the user unset]) since the baseline."""
        if self.env is None:
            return {}, []
        raw = _raw_environ()
        if raw == self.env:
            return {}, []
        key_of = _decoder("decodekey") or (lambda key: key)
        value_of = _decoder("decodevalue") or (lambda value: value)
        base = self.env
        changed = {key_of(k): value_of(v) for k, v in raw.items() if base.get(k) != v}
        unset = sorted(key_of(k) for k in base if k not in raw)
        return changed, unset


baseline = _Baseline()
