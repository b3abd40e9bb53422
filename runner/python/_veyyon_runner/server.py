"""The main loop: reading host lines, running requests, the runtime module, fds and start-up."""

import _queue
import _signal
import builtins
import os
import sys
import threading
import time
import types
import warnings


from . import definitions, egress, protocol, shield, state
from .baseline import baseline
from .state import _on_sigint, _redeliver_loop, _state, _user_call
from .protocol import (
    PROTOCOL_ERROR,
    Request,
    RestorePiece,
    SnapshotRequest,
    _StreamBuffer,
    _defer_started,
    _diagnose,
    _introspection_failed,
    _json_string,
    _send,
    _send_raw,
    _send_started,
    _send_with_started,
    _wake_ticker,
    _write_line,
    classify_line,
    encode_bundle_frame,
)
from .output import (
    _Capture,
    _emit_display,
    _FdPump,
    _OutStream,
    _fd2_pump,
    _fd_pump,
    _flush_all_output,
    _flush_streams,
    _stderr,
    _stdout,
    watch_fd_writers,
)
from .display import _flush_figures, _shown_figures, display, emit_status, mime_bundle
from .bridge import (
    _bridge_calls,
    _bridge_close,
    _bridge_open,
    _bridge_status,
    _resolve_bridge,
    cancel_bridge_calls,
    end_bridge,
)
from . import hostinput
from .transform import transform
from .execution import (
    _BASE_NAMES,
    _NO_VALUE,
    _TLA_FLAG,
    _execute,
    _register_source,
    _run_code,
    _run_coroutine,
    error_fields,
)


def _protocol_error(request_id, text):
    _send({"type": "error", "id": request_id, "ename": PROTOCOL_ERROR, "evalue": text,
           "traceback": ["%s: %s" % (PROTOCOL_ERROR, text)]})


def _shutdown(status):
    protocol._frame_lock.acquire(timeout=1.0)
    os._exit(status)


_END_OF_INPUT = object()
_EXIT = object()
_EXECUTE = object()
_PARENT_POLL_SECONDS = 1.0


class _RequestReader:
    """Host lines from the request fd, routed as they arrive. While no cell runs the main thread reads
    them itself, so a cell reaches it with no hand-off between threads; while a cell runs past its
    started deadline or waits on the bridge, a reader thread reads them beside it (exit, bridge
    results, complete and inspect requests; execute requests queue). An exit request ends the input
    as its end does: the requests before it still run, every line after it is left unread, and
    bridge calls fail at once, for no host will answer them. Reads are non-blocking and
    serialized by a lock; the reader thread only reads while a cell runs, the main thread only while
    none does, so a line is never left unread while the main thread waits for one."""

    def __init__(self, fd):
        os.set_blocking(fd, False)
        self.fd = fd
        self.requests = _queue.SimpleQueue()
        self.lock = threading.Lock()
        self.pending = []
        self.eof = False
        self.wanted = threading.Event()
        # Execute requests routed and taken: more routed than taken means one waits (a snapshot yields to it).
        # Each has one writer at a time (routed: under the lock; taken: the main thread).
        self.executes_routed = 0
        self.executes_taken = 0

    def drain(self, in_cell):
        """Route every complete line readable now: in_cell, only while a cell runs (the reader thread)."""
        with self.lock:
            if in_cell and not _state.cell_active:
                return
            while not self.eof:
                try:
                    data = os.read(self.fd, 65536)
                except BlockingIOError:
                    return
                if data:
                    # A long line (a restore piece) comes in many reads: its parts are joined once, at its end.
                    self.pending.append(data)
                    if b"\n" not in data:
                        continue
                    lines = b"".join(self.pending).split(b"\n")
                    tail = lines.pop()
                    self.pending = [tail] if tail else []
                else:
                    self.eof = True
                    lines, self.pending = [b"".join(self.pending)], []
                for line in lines:
                    if line.strip():
                        try:
                            routed = _route_line(line, self.requests)
                            if routed is _EXECUTE:
                                self.executes_routed += 1
                            elif routed is _EXIT:
                                self.eof = True
                                break
                        except Exception as exc:
                            _diagnose("could not handle a host line: %s: %s" % (type(exc).__name__, exc))
                if self.eof:
                    end_bridge()
                    self.requests.put(_END_OF_INPUT)

    def next_request(self):
        """Main thread: the next queued request, reading host lines until one comes (_END_OF_INPUT at the end)."""
        import select

        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        while True:
            try:
                return self._taken(self.requests.get_nowait())
            except _queue.Empty:
                pass
            if self.eof:
                return _END_OF_INPUT
            self.drain(False)
            try:
                return self._taken(self.requests.get_nowait())
            except _queue.Empty:
                poller.poll()

    def _taken(self, item):
        if isinstance(item, Request):
            self.executes_taken += 1
        return item

    def execute_waiting(self):
        """Main thread, between cells: whether an execute request has arrived (reading what the host sent)."""
        self.drain(False)
        return self.executes_routed > self.executes_taken

    def wake(self):
        """Have the reader thread read beside the running cell."""
        if not self.wanted.is_set():
            self.wanted.set()

    def run(self):
        """Reader thread: while wanted, wait for host lines and route them as long as a cell runs."""
        import select

        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        while not self.eof:
            self.wanted.wait()
            poller.poll()
            if not _state.cell_active:
                self.wanted.clear()
                if _state.cell_active:
                    self.wanted.set()
                continue
            self.drain(True)


def _route_line(line, requests):
    """Act on one host line; _EXIT for an exit request, which ends the input like its end does."""
    kind, payload = classify_line(line)
    if kind == "execute":
        requests.put(payload)
        return _EXECUTE
    elif kind in ("snapshot", "restore"):
        requests.put(payload)
    elif kind == "exit":
        return _EXIT
    elif kind == "bridge_result":
        _resolve_bridge(payload)
    elif kind in ("complete", "inspect"):
        _introspect(kind, payload)
    else:
        request_id, text = payload
        if request_id is None:
            _protocol_error(None, text)
        else:
            requests.put(("invalid", request_id, text))


def _introspect(kind, payload):
    """Start answering a complete or inspect request (loading its code the first time; answered with why it failed)."""
    try:
        _load_magics()
        from .introspect import _start_introspection
    except Exception as exc:
        _introspection_failed(kind, payload[0], "%s: %s" % (type(exc).__name__, exc))
        return
    _start_introspection(kind, payload)


def _apply_context(request):
    added = None
    if request.cwd is not None:
        os.chdir(request.cwd)
        cwd = os.getcwd()
        if cwd not in sys.path:
            sys.path.insert(0, cwd)
            added = cwd
    if request.env:
        for key, value in request.env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if added is not None or request.env:
        baseline.host_applied(request.env, added)


# boot.py's code cache (load(name, key, build)), set by boot.py before main(); None when run from source.
_boot_load = None
_RUNNER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cached_prelude_code(source, filename):
    """The code of source from boot.py's cache when it is the prelude.py beside the runner, else None."""
    if _boot_load is None:
        return None
    try:
        with open(os.path.join(_RUNNER_DIR, "prelude.py"), encoding="utf-8", newline="") as file:
            if file.read() != source:
                return None
    except (OSError, ValueError):
        return None
    key = ("%s\0%s" % (filename, source)).encode("utf-8", "surrogatepass")
    return _boot_load("prelude", key, lambda: compile(transform(source), filename, "exec", _TLA_FLAG, dont_inherit=True))


def _run_cell(request, filename):
    ns = _state.namespace
    ns["__veyyon__"] = _runtime
    code = _cached_prelude_code(request.code, filename) if request.silent else None
    if code is not None:
        _register_source(filename, request.code)
        _run_code(code, ns, None)
        return
    value = _execute(request.code, filename, ns)
    if value is _NO_VALUE or value is None or request.silent:
        return
    if request.store_history:
        ns["_"] = value
    _flush_streams()
    bundle = mime_bundle(value)
    if any(mime.startswith("image/") for mime in bundle):
        _shown_figures.add(id(value))
    _send_with_started(None, encode_bundle_frame("result", request.id, bundle))


def cell_filename(request):
    """``<cell-N>`` for a cell that gets execution count N; ``<hidden-K>`` (K counts all requests) for the rest."""
    if not request.silent and request.store_history:
        return "<cell-%d>" % _state.execution_count
    return "<hidden-%d>" % _state.cell_seq


def _record_protected(before, ns):
    protected = _state.protected
    for name in list(protected):
        if name not in ns:
            del protected[name]
    for name, value in ns.items():
        if name not in _BASE_NAMES and (name not in before or before[name] is not value):
            protected[name] = value


def _handle_request(request):
    st = _state
    st.current_id = request.id
    st.cell_seq += 1
    if not request.silent and request.store_history:
        st.execution_count += 1
        st.history[st.execution_count] = request.code
    failure = None
    before = dict(st.namespace) if request.silent else None
    st.pending = False
    st.interrupted = False
    st.entered = False
    st.generation += 1
    st.cell_active = True
    try:
        _defer_started(request.id)
        filename = cell_filename(request)
        try:
            _apply_context(request)
            if request.code.strip():
                _user_call(_run_cell, request, filename)
        except BaseException as exc:
            failure = exc
        if not request.silent and request.code.strip():
            try:
                definitions.note_cell(request.code, filename, st.namespace)
            except Exception as exc:
                _diagnose("recording the definitions of %r failed: %s: %s" % (request.id, type(exc).__name__, exc))
        if request.code.strip() and "matplotlib.pyplot" in sys.modules:
            try:
                _user_call(_flush_figures)
            except BaseException as exc:
                failure = failure or exc
    finally:
        st.cell_active = False
        protocol._reader_due = None
    _finish_request(request, failure, before)


def _finish_request(request, failure, before):
    st = _state
    try:
        if before is not None:
            _record_protected(before, st.namespace)
        _flush_all_output()
        if failure is not None:
            frame = {"type": "error", "id": request.id}
            frame.update(error_fields(failure))
            if not request.silent:
                st.last_traceback = frame["traceback"]
            if st.xmode == "Minimal":
                frame["traceback"] = frame["traceback"][-1:]
            _send(frame)
    except Exception as exc:
        _diagnose("finishing request %r failed: %s: %s" % (request.id, type(exc).__name__, exc))
    finally:
        if _bridge_calls:
            cancel_bridge_calls(request.id)
        _send_raw('{"type":"done","id":%s,"status":"%s","executionCount":%d,"cancelled":%s}\n' % (
            _json_string(request.id), "error" if failure is not None else "ok", st.execution_count,
            "true" if failure is not None and st.interrupted else "false"))


def _watch_parent(parent):
    """Ends the process when the host that started it is gone (its children are re-parented)."""
    while True:
        time.sleep(_PARENT_POLL_SECONDS)
        if os.getppid() != parent:
            _shutdown(0)


def _serve(reader):
    while True:
        item = reader.next_request()
        if item is _END_OF_INPUT:
            _shutdown(0)
        try:
            if isinstance(item, tuple):
                _, request_id, text = item
                _protocol_error(request_id, text)
                _send({"type": "done", "id": request_id, "status": "error",
                       "executionCount": _state.execution_count, "cancelled": False})
            elif isinstance(item, SnapshotRequest):
                from . import snapshot

                snapshot.serve(item, _state.namespace, _state.protected, _state, reader.execute_waiting, _send,
                               protocol._send_parts)
            elif isinstance(item, RestorePiece):
                from . import restore

                restore.serve(item, _state.namespace, _state, _send)
            else:
                _handle_request(item)
        except BaseException as exc:
            _state.cell_active = False
            _diagnose("internal error: %s: %s" % (type(exc).__name__, exc))
            if isinstance(item, Request):
                _send({"type": "done", "id": item.id, "status": "error",
                       "executionCount": _state.execution_count, "cancelled": False})
            elif isinstance(item, SnapshotRequest):
                _send({"type": "snapshot_done", "id": item.id, "status": "failed", "names": [], "skipped": [],
                       "error": "internal error: %s: %s" % (type(exc).__name__, exc)})
            elif isinstance(item, RestorePiece) and not item.more:
                _send({"type": "restore_done", "id": item.id, "restored": [], "skipped": [],
                       "error": "internal error: %s: %s" % (type(exc).__name__, exc)})


# ---------------------------------------------------------------------------
# Start-up


_RUNTIME_EXPORTS = (
    "emit_status", "bridge_call", "cancel_bridge_calls", "BridgeError", "display", "mime_bundle", "current_request_id",
    "execution_count", "user_namespace", "user_names", "protected_names", "register_line_magic",
    "register_cell_magic", "run_process", "system", "getoutput", "transform", "SList", "CapturedIO",
    "CapturedOutput", "UsageError", "TimeitResult", "line_magic", "cell_magic", "misplaced_cell_magic",
    "expand", "format_duration", "STATUS_MIME", "pretty", "PrettyPrinter", "register_formatter",
)


def current_request_id():
    """Id of the request being served (or the last one)."""
    return _state.current_id


def execution_count():
    """The kernel's execution counter."""
    return _state.execution_count


def user_namespace():
    """The dict user cells run in (globals of module __main__)."""
    return _state.namespace


def protected_names():
    """Names (and values) that silent requests such as the prelude defined; %reset restores them."""
    return dict(_state.protected)


# The exports the magics define: bound when the magics are first loaded (a magic, a completion, or one of these read).
_MAGICS_EXPORTS = (
    "user_names", "register_line_magic", "register_cell_magic", "run_process", "system", "getoutput", "SList",
    "UsageError", "TimeitResult", "line_magic", "cell_magic", "misplaced_cell_magic", "expand", "format_duration",
)


def _build_runtime():
    module = types.ModuleType("veyyon_runtime", "Kernel services for the prelude and the magics.")
    sources = [globals()] + [vars(sys.modules["%s.%s" % (__package__, part)])
                             for part in ("protocol", "output", "display", "bridge", "transform")]
    for name in _RUNTIME_EXPORTS:
        if name not in _MAGICS_EXPORTS:
            setattr(module, name, next(source[name] for source in sources if name in source))
    exported = set(vars(module)) | set(_MAGICS_EXPORTS)
    module.__getattr__ = _magics_export
    module.__dir__ = lambda: sorted(exported)
    return module


def _magics_export(name):
    """A runtime export the magics define, loading them when it is first read."""
    if name not in _MAGICS_EXPORTS:
        raise AttributeError("module 'veyyon_runtime' has no attribute %r" % name)
    return getattr(_load_magics(), name)


def _load_magics():
    """The magics module, loaded once: its exports bound on the runtime, its process stopper made critical."""
    magics = sys.modules.get(__package__ + ".magics")
    if magics is None or _MAGICS_EXPORTS[-1] not in vars(_runtime):
        from . import magics

        state._CRITICAL_CODES = state._CRITICAL_CODES | frozenset([magics._stop_process.__code__])
        for name in _MAGICS_EXPORTS:
            setattr(_runtime, name, getattr(magics, name))
    return magics


_runtime = _state.runtime = _build_runtime()


def _pipe_fd(fd, pump):
    """Point fd at a new pipe whose read end pump drains (so the cell's writes to fd become its frames)."""
    read_end, write_end = os.pipe()
    os.dup2(write_end, fd)
    os.close(write_end)
    os.set_blocking(read_end, False)
    pump.fd = read_end


def _install_fds():
    """Frames go to a copy of fd 1; fd 1 and 2 become pipes into the pumps; runner diagnostics and
    fatal-error tracebacks (faulthandler) go to a copy of the original fd 2; fd 0 reads /dev/null."""
    protocol._frame_fd = os.dup(1)
    protocol._diagnostic_fd = os.dup(2)
    _pipe_fd(1, _fd_pump)
    _pipe_fd(2, _fd2_pump)
    try:
        import faulthandler

        faulthandler.enable(protocol._diagnostic_fd)
    except (ImportError, OSError, ValueError, RuntimeError):
        pass
    request_fd = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    wake_read, state._redeliver_wake = os.pipe()
    os.set_blocking(state._redeliver_wake, False)
    return request_fd, wake_read


def _install_namespace():
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    module.__dict__["__veyyon__"] = _runtime
    sys.modules["__main__"] = module
    _state.namespace = module.__dict__
    sys.modules["veyyon_runtime"] = _runtime
    builtins.display = display
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _RUNNER_DIR]


def main():
    """Serve the NDJSON protocol on stdin/stdout until an exit request, EOF, or the host's death."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    warnings.filterwarnings("ignore", message=".*non-interactive, and thus cannot be shown")
    request_fd, wake_read = _install_fds()
    protocol.settle_heap()
    watch_fd_writers()
    _install_namespace()
    baseline.capture()
    shield.install(sys.path)
    sys.stdout = _stdout
    sys.stderr = _stderr
    hostinput.install()
    # Installed once: between cells the handler ignores SIGINT (nothing is active), so no cell pays
    # for switching it on and off.
    _signal.signal(_signal.SIGINT, _on_sigint)
    reader = _RequestReader(request_fd)
    protocol._wake_reader = reader.wake
    threading.Thread(target=_fd_pump.run, name="veyyon-stdout", daemon=True).start()
    threading.Thread(target=_fd2_pump.run, name="veyyon-stderr", daemon=True).start()
    threading.Thread(target=_redeliver_loop, args=(wake_read,), name="veyyon-sigint", daemon=True).start()
    threading.Thread(target=reader.run, name="veyyon-stdin", daemon=True).start()
    threading.Thread(target=_watch_parent, args=(os.getppid(),), name="veyyon-parent", daemon=True).start()
    egress.start(os.environ, protocol._diagnose)
    _serve(reader)


state._BOUNDARY_CODE = _user_call.__code__
state._PLUMBING_CODES = frozenset(fn.__code__ for fn in (_user_call, _run_cell, _execute, _run_code, _run_coroutine,
                                                 _cached_prelude_code))
state._CRITICAL_CODES = state._CRITICAL_CODES | frozenset(fn.__code__ for fn in (
    _write_line, _send, _send_raw, _send_with_started, _OutStream.write, _OutStream.flush, _FdPump.pump, _emit_display,
    emit_status, _bridge_open, _bridge_close, _bridge_status, _Capture.__enter__,
    _Capture.__exit__, _defer_started, _send_started, _StreamBuffer.add, _StreamBuffer.flush,
    _StreamBuffer._send_queued, _FdPump.pump_if_ready, _wake_ticker, _flush_streams, _flush_all_output,
    encode_bundle_frame,
))
