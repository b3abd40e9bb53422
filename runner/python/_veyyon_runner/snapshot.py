"""Saving the session's user state for a ``snapshot`` request (PROTOCOL.md, Snapshots and restores).

What is saved: every user name (not the runtime's, not the prelude's, whose values the silent
requests left in ``_state.protected``): modules by their import name, the functions and classes
cells defined by their source (``definitions``), every other value through ONE pickler (one
memo, so ``b = a`` comes back as one object; the highest protocol, large contiguous buffers
such as numpy arrays' out of band); beside them the kernel state: the working directory (and
``%cd -``'s), the environment variables that differ from the environment the host set, the
``sys.path`` additions, ``random``'s state and numpy's legacy global RNG state when loaded.

A function cells made without a def statement (a lambda, no closure) travels as its marshalled
code, which only the same CPython loads (its bytecode magic is checked); elsewhere it is named.

Each value is first pickled alone to a counting sink, up to ``TRIAL_BYTES``: a value that cannot
be pickled, or is over a budget, is named with a reason and left out before anything of it reaches
the shared pickler, so no memo entry of a discarded partial dump can be referred to later. A value
bigger than that is pickled once, in the shared pass, after all the others, within the room left;
should it fail there, it is dropped (when it is the last) or the shared pass starts again without it.
Sizes are written in binary units (``human_size``: ``830 B``, ``12 KiB``, ``1.2 GiB``, ``256 MiB``); a
size found by stopping a pickle is a lower bound (``at least 3 MiB, over the 2 MiB per-value budget``).

Not carried (named in ``skipped`` where it is a name): open files, sockets, locks, generators and
other unpicklable objects; functions with a closure or defined inside a function; classes made
outside a cell's top-level statements (except ``Name = call(...)``, replayed from the history);
instances of a class redefined since; pandas options, pyplot's current figure, threads, patched
modules, and the bodies of cell magics (``%%time``) as definitions.

The work yields to a cell: ``should_yield`` (the request reader's "an execute request is
queued") is asked between values, on each 64 KiB frame the pickler writes (so inside a big
value too), and between chunks, at most every ``YIELD_CHECK_SECONDS``.

Payload (format ``FORMAT``): ``MAGIC``, an 8-byte big-endian header length, the header (UTF-8
JSON: format, interpreter, pickle protocol, modules, definitions, value segments, buffer
lengths, kernel state), an 8-byte big-endian stream length, the pickle stream (one ``dump`` per
value, offsets in the header), then the out-of-band buffers, back to back. A restore takes a
payload of this format only (``restore.read_payload``).
"""

import os
import re
import struct
import sys
import time
import types

from .baseline import baseline
from .execution import _BASE_NAMES
from . import definitions


MAGIC = b"VEYYON-PYTHON-SNAPSHOT\n"
FORMAT = 1
CHUNK_BYTES = 4 * 1024 * 1024
# A buffer at least this big goes out of band (kept as it is, not copied into the pickle stream).
OUT_OF_BAND_BYTES = 64 * 1024
YIELD_CHECK_SECONDS = 0.002
# A value is first pickled alone up to this many bytes: a smaller one is then known to pickle, and its size; a
# bigger one is pickled once, in the shared pass (pickling it twice would double a big namespace's cost).
TRIAL_BYTES = 1 << 20
# Runtime-set names that are not the user's values: the last result and the last shell status.
_RUNTIME_NAMES = frozenset(["_", "__", "___", "_exit_code"])


class Yielded(BaseException):
    """A cell is waiting: stop saving now."""


class _TooBig(Exception):
    def __init__(self, size):
        Exception.__init__(self, size)
        self.size = size


# ---------------------------------------------------------------------------
# Names


def user_state_names(namespace, protected):
    """The names a snapshot saves, in the namespace's order: not the runtime's, not the prelude's."""
    names = []
    for name, value in namespace.items():
        if name in _BASE_NAMES or name in _RUNTIME_NAMES or (name.startswith("__") and name.endswith("__")):
            continue
        if name in protected and protected[name] is value:
            continue
        names.append(name)
    return names


def human_size(count):
    """count bytes in binary units: 830 B, 12 KiB, 1.2 GiB, 2 MiB (one decimal below 10, none when it is 0)."""
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024.0
    if unit == "B":
        return "%d B" % count
    text = "%.1f" % size if size < 10 else "%.0f" % size
    return "%s %s" % (text[:-2] if text.endswith(".0") else text, unit)


_CANNOT_PICKLE = re.compile(r"cannot pickle '([^']+)' object")
_FRIENDLY_KINDS = {
    "_io.TextIOWrapper": "open file", "_io.BufferedReader": "open file", "_io.BufferedWriter": "open file",
    "_io.BufferedRandom": "open file", "_io.FileIO": "open file", "_thread.lock": "lock", "_thread.RLock": "lock",
    "_thread._local": "thread-local", "sqlite3.Connection": "sqlite3 connection", "sqlite3.Cursor": "sqlite3 cursor",
}


def unpicklable_reason(value, exc):
    """Why value cannot be saved, in words a person can act on."""
    text = str(exc)
    match = _CANNOT_PICKLE.search(text)
    if match:
        kind = match.group(1)
        friendly = _FRIENDLY_KINDS.get(kind, kind)
        cls = type(value)
        if kind in (cls.__name__, "%s.%s" % (cls.__module__, cls.__qualname__)):
            return "%s objects cannot be saved" % friendly
        return "it holds a %s object, which cannot be saved" % friendly
    if "<lambda>" in text:
        return "lambda functions cannot be saved (define it with def)"
    if "local object" in text or "<locals>" in text:
        return "functions and classes defined inside a function cannot be saved"
    match = re.search(r"it's not the same object as __main__\.(\w+)", text)
    if match:
        return "its class or function %s was redefined or deleted after it was made" % match.group(1)
    match = re.search(r"attribute lookup (\S+) on __main__ failed", text)
    if match:
        return "it refers to %s, which is no longer defined" % match.group(1)
    if isinstance(exc, RecursionError):
        return "it is nested too deeply to save"
    text = " ".join(text.split())
    if len(text) > 200:
        text = text[:197] + "..."
    return "it cannot be saved: %s: %s" % (type(exc).__name__, text) if text else \
        "it cannot be saved: %s" % type(exc).__name__


# ---------------------------------------------------------------------------
# Functions without a recorded definition (lambdas): their code, for the same CPython only


def _code_magic():
    try:
        from importlib.util import MAGIC_NUMBER
    except ImportError:
        return None
    return "%s:%s" % (sys.implementation.name, MAGIC_NUMBER.hex())


def function_from_code(magic, code, name, qualname, defaults, kwdefaults, doc):
    """A function of module __main__ from its marshalled code (what a pickled _CodeFunction calls)."""
    import marshal

    if magic is None or magic != _code_magic():
        raise ValueError("it was saved by another Python version, whose code cannot be loaded here")
    function = types.FunctionType(marshal.loads(code), sys.modules["__main__"].__dict__, name, defaults)
    function.__kwdefaults__ = kwdefaults
    function.__qualname__ = qualname
    function.__doc__ = doc
    return function


class _CodeFunction:
    """Stands for a function of __main__ that pickle cannot find by name (a lambda): pickled as its code."""

    def __init__(self, function):
        self.function = function

    def __reduce__(self):
        import marshal

        f = self.function
        return (function_from_code, (_code_magic(), marshal.dumps(f.__code__), f.__name__, f.__qualname__,
                                     f.__defaults__, f.__kwdefaults__, f.__doc__))


def _by_code(value, namespace, recorded):
    """Whether value is a function of the cells with no recorded definition to replay (a lambda, a def run by
    exec or %run) that can travel as its code (no closure). A second name of a recorded one goes by reference."""
    if type(value) is not types.FunctionType or value.__module__ != "__main__" or value.__closure__ is not None:
        return False
    return not (value.__qualname__ in recorded and namespace.get(value.__qualname__) is value)


def _unrecorded_class(value, namespace, recorded):
    """Why value, a class of the cells with no recorded definition, cannot come back (None otherwise)."""
    if not isinstance(value, type) or getattr(value, "__module__", None) != "__main__":
        return None
    qualname = getattr(value, "__qualname__", "?")
    if qualname in recorded and namespace.get(qualname) is value:
        return None
    return "class %s was not defined by a class statement at the top level of a cell, so it cannot be recreated" \
        % qualname


# ---------------------------------------------------------------------------
# Pickling


def _over_value_budget(size, value_budget):
    return "at least %s, over the %s per-value budget" % (human_size(size), human_size(value_budget))


def _over_budget(size, budget, at_least):
    return "%s%s would take the snapshot over its %s budget" % (
        "at least " if at_least else "", human_size(size), human_size(budget))


def _failure_reason(value, exc, value_budget, budget):
    """Why a value failed in the shared pass: over a budget, or it cannot be pickled."""
    if isinstance(exc, _TooBig):
        if exc.size > value_budget:
            return _over_value_budget(exc.size, value_budget)
        return _over_budget(exc.size, budget, True)
    return unpicklable_reason(value, exc)


class _Checker:
    """Calls should_yield at most every YIELD_CHECK_SECONDS; raises Yielded when it says so."""

    def __init__(self, should_yield):
        self.should_yield = should_yield
        self.last = time.monotonic()

    def __call__(self):
        if self.should_yield is None:
            return
        now = time.monotonic()
        if now - self.last >= YIELD_CHECK_SECONDS:
            self.last = now
            if self.should_yield():
                raise Yielded()


class _CountingSink:
    """A file the trial pickler writes to: counts bytes, stops past limit, checks for a waiting cell."""

    def __init__(self, limit, check):
        self.count = 0
        self.limit = limit
        self.check = check

    def add(self, size):
        self.count += size
        if self.count > self.limit:
            raise _TooBig(self.count)

    def write(self, data):
        self.add(data.nbytes if isinstance(data, memoryview) else len(data))
        self.check()
        return len(data)


class _Sink:
    """A file the shared pickler writes to: keeps the pieces."""

    def __init__(self, check):
        self.parts = []
        self.count = 0
        self.check = check

    def write(self, data):
        if type(data) is not bytes:
            data = bytes(data)
        self.parts.append(data)
        self.count += len(data)
        self.check()
        return len(data)


def _buffer_bytes(buffer):
    with buffer.raw() as view:
        return view.nbytes


def trial_size(value, limit, check, protocol):
    """The pickled size of value alone (its out-of-band buffers included); _TooBig past limit."""
    import pickle

    sink = _CountingSink(limit, check)

    def callback(buffer):
        size = _buffer_bytes(buffer)
        if size < OUT_OF_BAND_BYTES:
            return True
        sink.add(size)
        return False

    pickler = pickle.Pickler(sink, protocol, buffer_callback=callback) if protocol >= 5 else \
        pickle.Pickler(sink, protocol)
    pickler.dump(value)
    return sink.count


class _Retry(Exception):
    def __init__(self, name, exc):
        Exception.__init__(self, name)
        self.name = name
        self.exc = exc


def dump_values(items, check, protocol, room):
    """Pickle items (name, value, size bound or None) through one pickler, in order: (stream parts, segments
    [name, start, end, first buffer, buffer count], buffers, failures [(name, exception)]). A value of unknown
    size (None: its trial stopped at TRIAL_BYTES) may take at most room(bytes used so far) bytes. A value that
    fails raises _Retry (its partial dump left memo entries that later values could refer to), unless it is the
    last: then its bytes are dropped and it is returned among the failures."""
    import pickle

    sink = _Sink(check)
    buffers = []
    state = {"extra": 0, "limit": None}

    def callback(buffer):
        size = _buffer_bytes(buffer)
        if size < OUT_OF_BAND_BYTES:
            return True
        buffers.append(buffer)
        state["extra"] += size
        if state["limit"] is not None and sink.count + state["extra"] > state["limit"]:
            raise _TooBig(sink.count + state["extra"] - state["base"])
        return False

    def write(data):
        _Sink.write(sink, data)
        if state["limit"] is not None and sink.count + state["extra"] > state["limit"]:
            raise _TooBig(sink.count + state["extra"] - state["base"])

    sink_file = types.SimpleNamespace(write=write)
    pickler = pickle.Pickler(sink_file, protocol, buffer_callback=callback) if protocol >= 5 else \
        pickle.Pickler(sink_file, protocol)
    segments, failures = [], []
    for index, (name, value, bound) in enumerate(items):
        start, first, part = sink.count, len(buffers), len(sink.parts)
        state["base"] = sink.count + state["extra"]
        state["limit"] = None if bound is not None else state["base"] + room(state["base"])
        try:
            pickler.dump(value)
        except Yielded:
            raise
        except BaseException as exc:
            if index < len(items) - 1:
                raise _Retry(name, exc)
            del sink.parts[part:]
            sink.count = start
            state["extra"] -= sum(_buffer_bytes(buffer) for buffer in buffers[first:])
            del buffers[first:]
            failures.append((name, exc))
            break
        segments.append([name, start, sink.count, first, len(buffers) - first])
        check()
    return sink.parts, segments, buffers, failures


# ---------------------------------------------------------------------------
# Kernel state


def _ints_to_base64(ints):
    import array
    import base64

    typecode = "I" if array.array("I").itemsize == 4 else "L"
    packed = array.array(typecode, ints)
    if sys.byteorder == "big":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def capture_state(kernel_state):
    """The kernel state a snapshot carries beside the names (JSON-ready)."""
    state = {}
    try:
        state["cwd"] = os.getcwd()
    except OSError:
        pass
    state["previousDir"] = kernel_state.previous_dir
    state["dirStack"] = list(kernel_state.dir_stack)
    state["env"], state["envUnset"] = baseline.env_changes()
    front, back = [], []
    seen_base = False
    for entry in sys.path:
        if not isinstance(entry, str):
            continue
        if entry in baseline.path:
            seen_base = True
        elif entry not in front and entry not in back:
            (back if seen_base else front).append(entry)
    state["sysPath"] = {"front": front, "back": back}
    rnd = sys.modules.get("random")
    if rnd is not None:
        try:
            version, internal, gauss = rnd.getstate()
            state["random"] = {"version": version, "state": _ints_to_base64(internal), "gauss": gauss}
        except Exception:
            pass
    nprandom = sys.modules.get("numpy.random")
    if nprandom is not None:
        try:
            kind, keys, pos, has_gauss, cached = nprandom.get_state()
            if kind == "MT19937":
                state["numpyRandom"] = {"keys": _ints_to_base64(keys.tolist()), "pos": int(pos),
                                        "hasGauss": int(has_gauss), "gauss": float(cached)}
        except Exception:
            pass
    return state


# ---------------------------------------------------------------------------
# The snapshot


class Snapshot:
    """The outcome of build(): status "saved" with parts, or "failed" with error; names and skipped either way."""

    def __init__(self):
        self.status = "saved"
        self.parts = []
        self.names = []
        self.skipped = []
        self.error = None
        self.size = 0

    def digest(self, check=None):
        """The payload's SHA-256 (hex), checking for a waiting cell between 4 MiB pieces when check is given."""
        import hashlib

        sha = hashlib.sha256()
        for part in self.parts:
            view = memoryview(part)
            for start in range(0, view.nbytes, CHUNK_BYTES):
                sha.update(view[start:start + CHUNK_BYTES])
                if check is not None:
                    check()
        return sha.hexdigest()


_MAX_SUBMODULES = 200
# module name -> (len(sys.modules) when computed, its loaded public submodules)
_submodules = {}


def _loaded_submodules(module_name):
    """The public submodules of module_name loaded now (``import xml.etree.ElementTree`` binds only ``xml``): a
    restore imports those the package does not import itself. Recomputed only when sys.modules grew."""
    count = len(sys.modules)
    cached = _submodules.get(module_name)
    if cached is not None and cached[0] == count:
        return cached[1]
    prefix = module_name + "."
    subs = sorted(m for m in list(sys.modules)
                  if m.startswith(prefix) and sys.modules.get(m) is not None
                  and not any(part.startswith("_") or part in ("tests", "testing") for part in m[len(prefix):].split(".")))
    subs = subs[:_MAX_SUBMODULES]
    _submodules[module_name] = (count, subs)
    return subs


_IMPORTABLE_KINDS = (type, types.FunctionType, types.BuiltinFunctionType)


def _import_entry(name, value):
    """[name, module, qualified name] for a class or function of an importable module (``from collections import
    namedtuple``), else None. Such names come back with the modules, before the definitions that may need them
    (a decorator, a base class) and the values."""
    if not isinstance(value, _IMPORTABLE_KINDS):
        return None
    module_name = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if not isinstance(module_name, str) or not isinstance(qualname, str) or module_name == "__main__" \
            or "<" in qualname:
        return None
    found = sys.modules.get(module_name)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return [name, module_name, qualname] if found is value else None


def _module_entry(name, module):
    """[name, import name, loaded submodules] for a module bound to name, or a reason it cannot come back."""
    module_name = getattr(module, "__name__", None)
    if not isinstance(module_name, str) or sys.modules.get(module_name) is not module:
        return None, "module %s was not imported by name, so it cannot be imported again" % (module_name or name)
    return [name, module_name, _loaded_submodules(module_name)], None


def without_gc(function):
    """function, run with the cyclic garbage collector paused: pickling and unpickling millions of objects
    otherwise set off collections that walk all of them again and again (restoring 45 MB of dicts and lists
    took twice as long)."""
    import functools
    import gc

    @functools.wraps(function)
    def paused(*args, **kwargs):
        enabled = gc.isenabled()
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return paused


@without_gc
def build(namespace, protected, kernel_state, budget, value_budget, should_yield=None):
    """Save the user state of namespace; raises Yielded when should_yield says a cell waits."""
    import json
    import pickle

    check = _Checker(should_yield)
    protocol = pickle.HIGHEST_PROTOCOL
    result = Snapshot()
    names = user_state_names(namespace, protected)
    history = getattr(kernel_state, "history", None) or {}
    for name in names:
        value = namespace[name]
        if _unrecorded_class(value, namespace, definitions._records) is not None and value.__qualname__ == name:
            definitions.find_assignment(name, value, history)
    recorded = definitions.current(namespace)
    modules, imports, defs, candidates = [], [], [], []
    for name in names:
        value = namespace[name]
        if isinstance(value, types.ModuleType):
            entry, reason = _module_entry(name, value)
            if entry is None:
                result.skipped.append({"name": name, "reason": reason})
            else:
                modules.append(entry)
        elif name in recorded:
            filename, start, source = recorded[name]
            defs.append([name, filename, start, source])
        else:
            entry = _import_entry(name, value)
            if entry is not None:
                imports.append(entry)
            else:
                candidates.append(name)
    state = capture_state(kernel_state)
    # What the payload holds beside the values' bytes (the header, a segment entry per value) counts against the
    # budget too, so the whole payload stays within it.
    fixed = len(MAGIC) + 16 + 256 + len(json.dumps([modules, imports, defs, state], ensure_ascii=True)) + \
        sum(len(name) + 48 for name in candidates)
    used = fixed
    small, large, bounds = [], [], {}
    coded, wrappers = {}, {}
    for name in candidates:
        check()
        value = namespace[name]
        reason = _unrecorded_class(value, namespace, recorded)
        if reason is not None:
            result.skipped.append({"name": name, "reason": reason})
            continue
        if _by_code(value, namespace, recorded):
            # One wrapper per function, so two names of one lambda come back as one function.
            value = coded[name] = wrappers.setdefault(id(value), _CodeFunction(value))
        try:
            size = trial_size(value, min(value_budget, budget - used, TRIAL_BYTES), check, protocol)
        except Yielded:
            raise
        except _TooBig as big:
            if big.size > value_budget:
                result.skipped.append({"name": name, "reason": _over_value_budget(big.size, value_budget)})
            elif big.size > budget - used:
                result.skipped.append({"name": name, "reason": _over_budget(big.size, budget, True)})
            else:
                # Bigger than a trial goes: pickled once, in the shared pass, within the room left then.
                large.append(name)
            continue
        except BaseException as exc:
            result.skipped.append({"name": name, "reason": unpicklable_reason(value, exc)})
            continue
        used += size
        bounds[name] = size
        small.append(name)
    # The large values go last: one that fails or is over a budget when it is the last one is only dropped.
    accepted = small + large
    while True:
        try:
            parts, segments, buffers, failures = dump_values(
                [(n, coded.get(n, namespace[n]), bounds.get(n)) for n in accepted], check, protocol,
                lambda so_far: min(value_budget, budget - fixed - so_far))
            break
        except _Retry as retry:
            accepted.remove(retry.name)
            result.skipped.append({"name": retry.name, "reason": _failure_reason(namespace[retry.name], retry.exc,
                                                                                 value_budget, budget)})
    for name, exc in failures:
        accepted.remove(name)
        result.skipped.append({"name": name, "reason": _failure_reason(namespace[name], exc, value_budget, budget)})
    check()
    raws = [buffer.raw() for buffer in buffers]
    header = {
        "format": FORMAT,
        "python": list(sys.version_info[:3]),
        "implementation": sys.implementation.name,
        "pickleProtocol": protocol,
        "modules": modules,
        "imports": imports,
        "definitions": defs,
        "values": segments,
        "buffers": [raw.nbytes for raw in raws],
        "state": state,
    }
    data = json.dumps(header, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    # The stream stays in the pieces the pickler wrote: joining them would copy it whole, without a yield check.
    stream_size = sum(len(part) for part in parts)
    result.parts = [MAGIC, struct.pack(">Q", len(data)), data, struct.pack(">Q", stream_size)] + parts + raws
    result.size = sum(len(part) if not isinstance(part, memoryview) else part.nbytes for part in result.parts)
    result.names = [entry[0] for entry in modules + imports + defs] + accepted
    return result


def chunks(parts, size=CHUNK_BYTES):
    """The bytes of parts (bytes or memoryviews), regrouped into pieces of at most size bytes."""
    pending, pending_size = [], 0
    for part in parts:
        view = memoryview(part).cast("B") if not isinstance(part, bytes) else memoryview(part)
        offset = 0
        while offset < len(view):
            take = min(size - pending_size, len(view) - offset)
            pending.append(view[offset:offset + take])
            pending_size += take
            offset += take
            if pending_size == size:
                yield b"".join(pending)
                pending, pending_size = [], 0
    if pending:
        yield b"".join(pending)


def serve(request, namespace, protected, kernel_state, should_yield, send, send_parts=None):
    """Answer a snapshot request: chunks then snapshot_done, or only snapshot_done (unchanged, yielded,
    failed). send(frame, line) writes a frame (or an encoded line); send_parts(parts) one line given in parts."""
    import binascii
    import json
    # Imported before the work starts, so the first snapshot of a kernel does not count their loading (about 20 ms
    # here, once) as work to yield over: a cell that follows at once waits for them, then for a snapshot that is
    # quick, instead of the first snapshot giving way to it and the session having none.
    import hashlib  # noqa: F401
    import pickle  # noqa: F401

    if send_parts is None:
        send_parts = lambda parts: send(None, b"".join(parts))  # noqa: E731

    def done(status, **fields):
        frame = {"type": "snapshot_done", "id": request.id, "status": status, "names": [], "skipped": []}
        frame.update(fields)
        send(frame, None)

    try:
        snap = build(namespace, protected, kernel_state, request.budget, request.value_budget, should_yield)
        digest = snap.digest(_Checker(should_yield))
    except Yielded:
        return done("yielded")
    except BaseException as exc:
        return done("failed", error="the snapshot could not be made: %s: %s" % (type(exc).__name__, exc))
    fields = {"digest": digest, "bytes": snap.size, "names": snap.names, "skipped": snap.skipped}
    if request.known is not None and request.known == digest:
        return done("unchanged", **fields)
    prefix = ('{"type":"snapshot_chunk","id":%s,"data":"' % json.dumps(request.id)).encode("utf-8")
    check = _Checker(should_yield)
    try:
        for chunk in chunks(snap.parts):
            check()
            send_parts((prefix, binascii.b2a_base64(chunk, newline=False), b'"}\n'))
    except Yielded:
        return done("yielded")
    done("saved", **fields)
