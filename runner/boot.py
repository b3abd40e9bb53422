"""veyyon runner boot: runs runner.py beside this file as ``__main__`` from a cached code object.

Standard library only, Python 3.8+. Spawned as ``python3 -u boot.py`` from the host's cache
directory. A script is compiled from source at every start (and PYTHONDONTWRITEBYTECODE
is beside the point: ``__main__`` is never cached), so this keeps the compiled runner in
``runner.<cache_tag>.pyc`` beside it. A cache file holds the magic number, the optimize
level, the source's path and its full text, then the marshalled code; anything else
(another interpreter, an edited runner, a moved directory, a torn file) recompiles and
rewrites it through a temp file and ``os.replace``. Write failures (a read-only directory)
only cost the cache. The runner gets ``load`` as ``__veyyon_boot_load__`` to cache the
prelude's code the same way.
"""

import marshal
import os
import sys

try:
    from importlib._bootstrap_external import MAGIC_NUMBER
except ImportError:
    from importlib.util import MAGIC_NUMBER

_DIR = os.path.dirname(os.path.abspath(__file__))


def load(name, key, build):
    """build()'s code object, cached in <dir>/<name>.<cache_tag>.pyc under the interpreter's magic and key (bytes)."""
    tag = sys.implementation.cache_tag
    if tag is None:
        return build()
    path = os.path.join(_DIR, "%s.%s.pyc" % (name, tag))
    header = MAGIC_NUMBER + b"%d\0%d\0" % (sys.flags.optimize, len(key)) + key
    try:
        with open(path, "rb") as file:
            data = file.read()
        if data.startswith(header):
            return marshal.loads(data[len(header):])
    except Exception:
        pass
    code = build()
    temp = "%s.%d.tmp" % (path, os.getpid())
    try:
        with open(temp, "wb") as file:
            file.write(header + marshal.dumps(code))
        os.replace(temp, path)
    except BaseException as exc:
        try:
            os.unlink(temp)
        except OSError:
            pass
        if not isinstance(exc, OSError):
            raise
    return code


def main():
    """Run runner.py's (cached) code as module __main__, as if it had been started directly."""
    path = os.path.join(_DIR, "runner.py")
    with open(path, "rb") as file:
        source = file.read()
    code = load("runner", path.encode("utf-8", "surrogateescape") + b"\0" + source,
                lambda: compile(source, path, "exec", dont_inherit=True))
    module = type(sys)("__main__")
    module.__file__ = path
    module.__builtins__ = __builtins__
    module.__veyyon_boot_load__ = load
    sys.modules["__main__"] = module
    sys.argv[0] = path
    exec(code, module.__dict__)


if __name__ == "__main__":
    main()
