"""veyyon kernel runner: one Python process serving code cells as NDJSON on stdin/stdout.

Standard library only, Python 3.8+. Start it as ``python3 -u runner.py``; importing it
does not start the server. The host spawns ``boot.py`` beside it instead, which runs this
file from a cached code object (and caches the prelude's, see ``_cached_prelude_code``).

Host -> runner, one JSON object per line:
    {"id": str, "code": str, "silent": bool, "storeHistory": bool, "cwd"?: str, "env"?: {str: str|null}}
    {"type": "exit"}
    {"type": "bridge_result", "callId": str, "ok": true, "value": any}
    {"type": "bridge_result", "callId": str, "ok": false, "error": {"name": str, "message": str}}
    {"type": "complete", "id": str, "code": str, "cursorPos": int}
    {"type": "inspect", "id": str, "code": str, "cursorPos": int, "detailLevel": 0|1}
        (answered beside a running cell, never counted as a cell; cursorPos in code points)

Runner -> host, one JSON object per line (and nothing else ever reaches the real stdout):
    {"type": "started", "id"}        (sent once a SIGINT would interrupt the cell: with its first
                                      frame, or about 1 ms after it began if none came)
    {"type": "stdout"|"stderr", "id", "data": str}   (lines coalesced up to CHUNK_CHARS; sent within
                                      about 10 ms, and before any other frame)
    {"type": "display"|"result", "id", "bundle": {mime: value}}
    {"type": "error", "id", "ename", "evalue", "traceback": [line, ...]}   (join with "\\n")
    {"type": "done", "id", "status": "ok"|"error", "executionCount": int, "cancelled": bool}
    {"type": "bridge", "id", "callId", "method", "params"}
    {"type": "complete_reply", "id", "matches": [str], "cursorStart": int, "cursorEnd": int, "error"?: str}
    {"type": "inspect_reply", "id", "found": bool, "bundle": {mime: value}, "error"?: str}

A malformed line yields an ``error`` frame with ename "ProtocolError" (id null when none
can be read; otherwise followed by a ``done`` with status "error"). Status events are
``display`` frames whose bundle is {"application/x-veyyon-status": {"op": ..., ...}}.

Runtime module for the prelude (``import veyyon_runtime``; also ``__veyyon__`` in the
user namespace, which the magic transformer targets):
    emit_status(op, **fields) -> None            send a status event
    bridge_call(method, params=None, request_id=None) -> value
                                                 ask the host; raises BridgeError (BridgeCancelled
                                                 when request_id's cell has ended)
    BridgeError(name, message)                   str() is "name: message"
    display(*objs, raw=False, **ignored) -> None display objects (raw: objs are bundles)
    mime_bundle(obj) -> dict                     the bundle display() would send
    current_request_id() -> str | None
    execution_count() -> int
    user_namespace() -> dict                     the cells' globals (module __main__)
    user_names() -> list                         user-defined names, runtime/prelude excluded
    protected_names() -> dict                    names the silent requests defined
    register_line_magic(name, fn)                fn(args: str) -> value
    register_cell_magic(name, fn)                fn(line: str, body: str) -> value
    run_process(argv) -> int                     run argv, streaming its output live
    system(cmd) -> None, getoutput(cmd) -> SList shell helpers behind !cmd / var = !cmd
    transform(source) -> str                     the magic source transformer
    SList, CapturedIO, UsageError
"""

import ast
import base64
import builtins
import codecs
import io
import itertools
import json
import linecache
import os
import queue
import re
import signal
import sys
import threading
import time
import traceback
import types
import warnings

try:
    from _signal import SIG_IGN as _SIG_IGN, SIGINT as _SIGINT, signal as _set_signal
except ImportError:
    _SIG_IGN, _SIGINT, _set_signal = signal.SIG_IGN, signal.SIGINT, signal.signal

STATUS_MIME = "application/x-veyyon-status"
CHUNK_CHARS = 64 * 1024
MAX_PLAIN_CHARS = 1000000
PROTOCOL_ERROR = "ProtocolError"

_TLA_FLAG = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
_CO_COROUTINE = 0x0080
_CO_NEWLOCALS = 0x0002
_NO_VALUE = object()
_RUNNER_FILES = frozenset({__file__, os.path.abspath(__file__)})
_STDLIB_DIR = os.path.dirname(os.__file__)
_PLUMBING_FILES = frozenset([os.path.join(_STDLIB_DIR, name) for name in ("runpy.py", "timeit.py")]
                            + ["<frozen runpy>"])
_PLUMBING_DIRS = (os.path.join(_STDLIB_DIR, "asyncio") + os.sep,)
_BASE_NAMES = ("__name__", "__doc__", "__package__", "__loader__", "__spec__", "__builtins__", "__veyyon__")
_PLAIN_TYPES = frozenset({int, float, complex, str, bytes, bool, list, tuple, dict, set, frozenset, type(None)})
_REPR_METHODS = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("application/json", "_repr_json_"),
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("image/svg+xml", "_repr_svg_"),
    ("text/latex", "_repr_latex_"),
)


# ---------------------------------------------------------------------------
# Frames


_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_JSON_ASCII = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":"))


def _jsonable(value, depth=0):
    """A copy of value that the strict JSON encoder accepts (NaN -> null, odd objects -> repr)."""
    if depth > 64:
        return repr(value)
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    try:
        return repr(value)
    except Exception:
        return "<unrepresentable %s>" % type(value).__name__


def encode_frame(frame):
    """One frame as a UTF-8 JSON line; lone surrogates are escaped, NaN and odd values sanitized."""
    try:
        text = _JSON.encode(frame)
    except (TypeError, ValueError):
        frame = _jsonable(frame)
        text = _JSON.encode(frame)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (_JSON_ASCII.encode(frame) + "\n").encode("ascii")


_frame_fd = None
_frame_lock = threading.Lock()
_started_line = None
_started_at = 0.0
_monotonic = time.monotonic


def _write_line(data):
    global _started_line
    with _frame_lock:
        if _started_line is not None:
            data = _started_line + data
            _started_line = None
        if not data:
            return
        written = os.write(_frame_fd, data)
        if written < len(data):
            view = memoryview(data)[written:]
            while view:
                view = view[os.write(_frame_fd, view):]


def _send(frame):
    if _frame_fd is None:
        raise RuntimeError("the runner is not serving; frames have nowhere to go")
    if _out.parts:
        _out.flush()
    try:
        _write_line(encode_frame(frame))
    except BrokenPipeError:
        os._exit(0)


def _send_raw(line):
    if _out.parts:
        _out.flush()
    try:
        _write_line(line.encode("ascii"))
    except BrokenPipeError:
        os._exit(0)


_json_string = json.encoder.encode_basestring_ascii
_json_text = json.encoder.encode_basestring


def _defer_started(request_id):
    """Queue request_id's started frame: it leaves with the next frame, or by the timer if none comes soon."""
    global _started_line, _started_at
    _started_at = _monotonic()
    _started_line = ('{"type":"started","id":%s}\n' % _json_string(request_id)).encode("ascii")
    if not _ticker_awake:
        _wake_ticker()


def _send_started():
    """Write a queued started frame now."""
    if _started_line is not None:
        try:
            _write_line(b"")
        except BrokenPipeError:
            os._exit(0)


def _stream_line(kind, request_id, text):
    """One stdout/stderr frame as bytes; lone surrogates are escaped."""
    rid = "null" if request_id is None else _json_string(request_id)
    try:
        return ('{"type":"%s","id":%s,"data":%s}\n' % (kind, rid, _json_text(text))).encode("utf-8")
    except UnicodeEncodeError:
        return ('{"type":"%s","id":%s,"data":%s}\n' % (kind, rid, _json_string(text))).encode("ascii")


# ---------------------------------------------------------------------------
# Kernel state and SIGINT


class _KernelState:
    def __init__(self):
        self.current_id = None
        self.execution_count = 0
        self.cell_seq = 0
        self.cell_active = False
        self.entered = False
        self.pending = False
        self.interrupted = False
        self.redelivered = False
        self.generation = 0
        self.namespace = {"__name__": "__main__", "__builtins__": builtins}
        self.protected = {}
        self.previous_dir = None
        self.dir_stack = []
        self.history = {}
        self.last_traceback = None
        self.xmode = "Context"
        self.float_format = None
        self.pretty_printing = True
        self.extensions = {}


_state = _KernelState()
_main_ident = threading.main_thread().ident
_redeliver_wake = None


def _on_sigint(signum, frame):
    st = _state
    if st.redelivered:
        st.redelivered = False
        if not st.pending:
            return
    if not st.cell_active:
        return
    if frame is not None and frame.f_code not in _PLUMBING_CODES and _interrupt_allowed(frame):
        st.pending = False
        st.interrupted = True
        raise KeyboardInterrupt
    st.pending = True
    if _redeliver_wake is not None:
        try:
            os.write(_redeliver_wake, b"!")
        except OSError:
            pass


def _interrupt_allowed(frame):
    """Whether a SIGINT landing in frame may raise: inside user code and outside runner bookkeeping."""
    while frame is not None:
        code = frame.f_code
        if code in _CRITICAL_CODES:
            return False
        if code is _BOUNDARY_CODE:
            return _state.entered
        frame = frame.f_back
    return False


def _deliver_pending():
    """Raise a deferred SIGINT now if the critical function calling this returns into user code."""
    st = _state
    if st.pending and st.cell_active and threading.get_ident() == _main_ident:
        if _interrupt_allowed(sys._getframe(2)):
            st.pending = False
            st.interrupted = True
            raise KeyboardInterrupt


def _user_call(fn, *args):
    st = _state
    st.entered = True
    try:
        if st.pending:
            st.pending = False
            st.interrupted = True
            raise KeyboardInterrupt
        return fn(*args)
    finally:
        st.entered = False


def _redeliver_loop(wake_fd):
    """Re-send a deferred SIGINT until it lands in user code or the cell ends."""
    while True:
        try:
            os.read(wake_fd, 256)
        except OSError:
            return
        while _state.pending and _state.cell_active:
            generation = _state.generation
            time.sleep(0.01)
            if _state.pending and _state.cell_active and _state.generation == generation:
                _state.redelivered = True
                signal.pthread_kill(_main_ident, signal.SIGINT)


# ---------------------------------------------------------------------------
# Output routing: proxies for sys.stdout/sys.stderr, fd 1 pump, %%capture


class _Router:
    def __init__(self):
        self.capture = None

    def stdout(self, text):
        target = self.capture
        if target is not None and target.stdout:
            target.result._out.append(text)
        else:
            _out.add("stdout", text)

    def stderr(self, text):
        target = self.capture
        if target is not None and target.stderr:
            target.result._err.append(text)
        else:
            _out.add("stderr", text)

    def display(self, bundle):
        target = self.capture
        if target is not None and target.display:
            target.result.outputs.append(CapturedOutput(bundle))
        else:
            _send({"type": "display", "id": _state.current_id, "bundle": bundle})


_router = _Router()
_FLUSH_SECONDS = 0.01
_STARTED_SECONDS = 0.001
_TICK_SECONDS = 0.002
_IDLE_TICKS = 100


class _StreamBuffer:
    """stdout/stderr text not sent yet, of one stream and request at a time (so order is kept)."""

    def __init__(self):
        self.lock = threading.RLock()
        self.kind = "stdout"
        self.request_id = None
        self.parts = []
        self.size = 0
        self.since = 0.0
        self.eager = False

    def add(self, kind, text):
        """Queue text, first sending what is queued for another stream or request; send whole chunks at once."""
        request_id = _state.current_id
        with self.lock:
            if self.parts and (kind != self.kind or request_id != self.request_id):
                self._send_queued(False)
            if not self.parts:
                self.kind = kind
                self.request_id = request_id
                self.since = _monotonic()
            self.parts.append(text)
            self.size += len(text)
            if self.size >= CHUNK_CHARS:
                self._send_queued(not self.eager)
            elif self.eager and text.endswith("\n"):
                self._send_queued(False)
        if not _ticker_awake:
            _wake_ticker()

    def flush(self):
        """Send everything queued now."""
        if self.parts:
            with self.lock:
                if self.parts:
                    self._send_queued(False)

    def _send_queued(self, whole_chunks_only):
        """Write the queued text as frames of CHUNK_CHARS; with whole_chunks_only, keep a shorter tail queued."""
        parts = self.parts
        self.parts = []
        self.size = 0
        data = parts[0] if len(parts) == 1 else "".join(parts)
        end = len(data)
        if whole_chunks_only:
            end -= end % CHUNK_CHARS
        kind, request_id = self.kind, self.request_id
        try:
            for start in range(0, end, CHUNK_CHARS):
                _write_line(_stream_line(kind, request_id, data[start:start + CHUNK_CHARS]))
        except BrokenPipeError:
            os._exit(0)
        if end < len(data):
            self.parts = [data[end:]]
            self.size = len(data) - end
            self.since = _monotonic()


_out = _StreamBuffer()
_ticker_awake = False
_ticker_event = threading.Event()
_ticker_thread = None


def _wake_ticker():
    """Make the timer thread tick again (starting it on first use)."""
    global _ticker_awake, _ticker_thread
    _ticker_awake = True
    if _ticker_thread is None:
        _ticker_thread = threading.Thread(target=_tick_loop, name="veyyon-timer", daemon=True)
        _ticker_thread.start()
    _ticker_event.set()


def _tick(now):
    """Send a started frame or queued output that is due; seconds to the next deadline, None if nothing waits."""
    delay = None
    if _started_line is not None:
        wait = _started_at + _STARTED_SECONDS - now
        if wait <= 0:
            _send_started()
        else:
            delay = wait
    if _out.parts:
        wait = _out.since + _FLUSH_SECONDS - now
        if wait <= 0:
            _out.flush()
        elif delay is None or wait < delay:
            delay = wait
    return delay


def _tick_loop():
    """Timer thread body: tick while there is work, sleep after _IDLE_TICKS ticks without any."""
    global _ticker_awake
    idle = 0
    while True:
        _ticker_event.wait()
        try:
            delay = _tick(_monotonic())
        except Exception as exc:
            _diagnose("timer tick failed: %s: %s" % (type(exc).__name__, exc))
            delay = None
        if delay is not None:
            idle = 0
            time.sleep(min(max(delay, 0.0002), _TICK_SECONDS))
            continue
        time.sleep(_TICK_SECONDS)
        idle += 1
        if idle >= _IDLE_TICKS:
            idle = 0
            _ticker_awake = False
            _ticker_event.clear()
            if _started_line is not None or _out.parts:
                _wake_ticker()


class _FdPump:
    """Turns bytes written to fd 1 or 2 (child processes, os.write, C code) into stdout or stderr frames."""

    def __init__(self, fd, emit):
        self.fd = fd
        self.emit = emit
        self.lock = threading.RLock()
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.eof = False
        self.poller = None
        self.seen = False

    def pump(self, final=False):
        """Emit everything readable now; with final, also flush a trailing partial character."""
        if self.fd is None:
            return
        with self.lock:
            while not self.eof:
                try:
                    data = os.read(self.fd, 65536)
                except BlockingIOError:
                    break
                if not data:
                    self.eof = True
                    break
                self.seen = True
                text = self.decoder.decode(data)
                if text:
                    self.emit(text)
                if len(data) < 65536:
                    break
            if final:
                tail = self.decoder.decode(b"", True)
                if tail:
                    self.emit(tail)

    def pump_if_ready(self, final=False):
        """pump() only when the fd has data now (a poll instead of a read that fails); final as for pump()."""
        if self.fd is None:
            return
        with self.lock:
            poller = self.poller
            if poller is None:
                import select

                poller = self.poller = select.poll()
                poller.register(self.fd, select.POLLIN)
            if not self.eof and poller.poll(0):
                self.pump(final)
            elif final:
                tail = self.decoder.decode(b"", True)
                if tail:
                    self.emit(tail)

    def run(self):
        """Thread body: wait for data on the pipe and pump it."""
        import select

        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        while not self.eof:
            poller.poll()
            self.seen = True
            self.pump()


_fd_pump = _FdPump(None, lambda text: _router.stdout(text))
_fd2_pump = _FdPump(None, lambda text: _router.stderr(text))
_diagnostic_fd = 2


def _after_fork_in_child():
    """In a forked child: fresh locks, nothing queued, no timer, and output sent per line (it may _exit any time)."""
    global _frame_lock, _started_line, _ticker_awake, _ticker_thread, _ticker_event
    _frame_lock = threading.Lock()
    _started_line = None
    _out.lock = threading.RLock()
    _out.parts = []
    _out.size = 0
    _out.eager = True
    _fd_pump.lock = threading.RLock()
    _fd2_pump.lock = threading.RLock()
    _ticker_awake = True
    _ticker_thread = None
    _ticker_event = threading.Event()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_out.flush, after_in_child=_after_fork_in_child)


def _emit_stdout(text):
    _router.stdout(text)


def _emit_stderr(text):
    _router.stderr(text)


class _OutStream(io.TextIOBase):
    """Replacement for sys.stdout/sys.stderr: writes become frames, coalesced across lines and bounded."""

    def __init__(self, name, emit, fileno):
        super().__init__()
        self._name = name
        self._emit = emit
        self._fileno = fileno
        self.buffer = _BinaryOut(self)

    @property
    def name(self):
        return "<%s>" % self._name

    @property
    def encoding(self):
        return "utf-8"

    @property
    def errors(self):
        return "strict"

    @property
    def closed(self):
        return False

    @property
    def line_buffering(self):
        return True

    def close(self):
        """Ignored: the kernel's streams stay open."""

    def readable(self):
        return False

    def writable(self):
        return True

    def seekable(self):
        return False

    def isatty(self):
        return False

    def fileno(self):
        return self._fileno

    def write(self, text):
        """Queue text; it is sent by size, after a short delay, before any other frame, or on flush()."""
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not %s" % type(text).__name__)
        if text:
            if _fd_pump.seen:
                _fd_pump.pump_if_ready()
            if _fd2_pump.seen:
                _fd2_pump.pump_if_ready()
            if _router.capture is None:
                _out.add(self._name, text)
            else:
                self._emit(text)
            if _state.pending:
                _deliver_pending()
        return len(text)

    def flush(self):
        """Send all queued output now."""
        _flush_streams()
        if _state.pending:
            _deliver_pending()


class _BinaryOut:
    """The ``buffer`` of an output proxy: bytes are decoded as UTF-8 (invalid bytes replaced)."""

    def __init__(self, stream):
        self._stream = stream
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def write(self, data):
        """Decode and forward data to the text stream."""
        text = self._decoder.decode(bytes(data))
        if text:
            self._stream.write(text)
        return len(data)

    def flush(self):
        """Flush the text stream."""
        self._stream.flush()

    def writable(self):
        return True

    def fileno(self):
        return self._stream.fileno()


class _BlockingStdin(io.TextIOBase):
    """sys.stdin replacement: stdin carries requests, so reads block until the cell is interrupted."""

    def __init__(self):
        super().__init__()
        self._never = threading.Event()

    @property
    def encoding(self):
        return "utf-8"

    @property
    def closed(self):
        return False

    def close(self):
        """Ignored."""

    def readable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        return 0

    def _block(self):
        self._never.wait()
        return ""

    def read(self, size=-1):
        """Block until interrupted."""
        return self._block()

    def readline(self, size=-1):
        """Block until interrupted."""
        return self._block()

    def readlines(self, hint=-1):
        """Block until interrupted."""
        self._block()
        return []

    def __next__(self):
        self._block()
        raise StopIteration


_stdout = _OutStream("stdout", _emit_stdout, 1)
_stderr = _OutStream("stderr", _emit_stderr, 2)


def _flush_streams():
    _fd_pump.pump_if_ready()
    _fd2_pump.pump_if_ready()
    _out.flush()


def _flush_all_output():
    try:
        if sys.__stdout__ is not None:
            sys.__stdout__.flush()
    except Exception:
        pass
    try:
        if sys.__stderr__ is not None:
            sys.__stderr__.flush()
    except Exception:
        pass
    for pump in (_fd_pump, _fd2_pump):
        pump.pump_if_ready(final=True)
        pump.seen = False
    _out.flush()


class _CaptureTarget:
    def __init__(self, result, stdout, stderr, display):
        self.result = result
        self.stdout = stdout
        self.stderr = stderr
        self.display = display


class CapturedOutput:
    """One display captured by %%capture; display() shows it again."""

    def __init__(self, data):
        self.data = data

    def _repr_mimebundle_(self, include=None, exclude=None):
        return dict(self.data)

    def __repr__(self):
        return "CapturedOutput(%s)" % ", ".join(sorted(self.data))


class CapturedIO:
    """What %%capture collected: .stdout, .stderr, .outputs (display bundles); .show() replays it."""

    def __init__(self):
        self._out = []
        self._err = []
        self.outputs = []

    @property
    def stdout(self):
        """Everything the body wrote to stdout."""
        return "".join(self._out)

    @property
    def stderr(self):
        """Everything the body wrote to stderr."""
        return "".join(self._err)

    def show(self):
        """Send the captured output to the current cell."""
        if self._out:
            sys.stdout.write(self.stdout)
            sys.stdout.flush()
        if self._err:
            sys.stderr.write(self.stderr)
            sys.stderr.flush()
        for output in self.outputs:
            _emit_display(output.data)

    __call__ = show

    def __str__(self):
        return self.stdout

    def __repr__(self):
        return "<CapturedIO stdout=%d chars, stderr=%d chars, %d outputs>" % (
            len(self.stdout), len(self.stderr), len(self.outputs))


class _Capture:
    def __init__(self, result, stdout=True, stderr=True, display=True):
        self.target = _CaptureTarget(result, stdout, stderr, display)
        self.previous = None

    def __enter__(self):
        _flush_streams()
        self.previous = _router.capture
        _router.capture = self.target
        return self.target.result

    def __exit__(self, *exc):
        try:
            _flush_streams()
        finally:
            _router.capture = self.previous
        return False


# ---------------------------------------------------------------------------
# Pretty printer: the text/plain of results and displays, as IPython's ``pretty`` writes it
#
# The same line-breaking algorithm as IPython.lib.pretty (BSD-3-Clause, the IPython
# Development Team): text and breakables are buffered per group; when the buffered line
# would pass max_width, the outermost group with breakables breaks all of them. The type
# printers give IPython's output for builtins, types, functions, containers, exceptions
# and the collections types; objects may define ``_repr_pretty_(p, cycle)`` as in IPython.

PRETTY_WIDTH = 79
PRETTY_MAX_SEQ = 1000


class _PrettyText:
    __slots__ = ("parts", "width")

    def __init__(self):
        self.parts = []
        self.width = 0

    def output(self, out, width):
        out.extend(self.parts)
        return width + self.width


class _PrettyBreakable:
    __slots__ = ("sep", "width", "printer", "indentation", "group")

    def __init__(self, sep, printer):
        self.sep = sep
        self.width = len(sep)
        self.printer = printer
        self.indentation = printer.indentation
        self.group = printer.group_stack[-1]
        self.group.breakables.append(self)

    def output(self, out, width):
        self.group.breakables.popleft()
        if self.group.want_break:
            out.append("\n" + " " * self.indentation)
            return self.indentation
        if not self.group.breakables:
            self.printer.queue_remove(self.group)
        out.append(self.sep)
        return width + self.width


class _PrettyGroup:
    __slots__ = ("depth", "breakables", "want_break")

    def __init__(self, depth):
        import collections

        self.depth = depth
        self.breakables = collections.deque()
        self.want_break = False


class PrettyPrinter:
    """IPython's RepresentationPrinter API: text, breakable, break_, begin_group/end_group, group, indent, pretty."""

    def __init__(self, max_width=PRETTY_WIDTH, max_seq_length=PRETTY_MAX_SEQ):
        import collections

        self.out = []
        self.max_width = max_width
        self.max_seq_length = max_seq_length
        self.output_width = 0
        self.buffer_width = 0
        self.buffer = collections.deque()
        root = _PrettyGroup(0)
        self.group_stack = [root]
        self.group_queue = [[root]]
        self.indentation = 0
        self.stack = []
        self.verbose = False

    # line breaking

    def queue_remove(self, group):
        try:
            self.group_queue[group.depth].remove(group)
        except (ValueError, IndexError):
            pass

    def _dequeue(self):
        for stack in self.group_queue:
            for index, group in enumerate(reversed(stack)):
                if group.breakables:
                    del stack[index]
                    group.want_break = True
                    return group
            for group in stack:
                group.want_break = True
            del stack[:]
        return None

    def _break_one_group(self, group):
        while group.breakables:
            item = self.buffer.popleft()
            self.output_width = item.output(self.out, self.output_width)
            self.buffer_width -= item.width
        while self.buffer and isinstance(self.buffer[0], _PrettyText):
            item = self.buffer.popleft()
            self.output_width = item.output(self.out, self.output_width)
            self.buffer_width -= item.width

    def _break_outer_groups(self):
        while self.max_width < self.output_width + self.buffer_width:
            group = self._dequeue()
            if not group:
                return
            self._break_one_group(group)

    def text(self, obj):
        """Add literal text."""
        width = len(obj)
        if self.buffer:
            text = self.buffer[-1]
            if not isinstance(text, _PrettyText):
                text = _PrettyText()
                self.buffer.append(text)
            text.parts.append(obj)
            text.width += width
            self.buffer_width += width
            self._break_outer_groups()
        else:
            self.out.append(obj)
            self.output_width += width

    def _newline(self):
        self.flush()
        self.out.append("\n" + " " * self.indentation)
        self.output_width = self.indentation
        self.buffer_width = 0

    def breakable(self, sep=" "):
        """A place the line may break (else sep is written)."""
        if self.group_stack[-1].want_break:
            self._newline()
        else:
            self.buffer.append(_PrettyBreakable(sep, self))
            self.buffer_width += len(sep)
            self._break_outer_groups()

    def break_(self):
        """A forced line break, keeping the indentation."""
        group = self._dequeue()
        if group:
            self._break_one_group(group)
        self._newline()

    def begin_group(self, indent=0, open=""):
        """Start a group (indent: for its continuation lines; open: text before it)."""
        if open:
            self.text(open)
        group = _PrettyGroup(self.group_stack[-1].depth + 1)
        self.group_stack.append(group)
        while group.depth > len(self.group_queue) - 1:
            self.group_queue.append([])
        self.group_queue[group.depth].append(group)
        self.indentation += indent

    def end_group(self, dedent=0, close=""):
        """End the group begun last."""
        self.indentation -= dedent
        group = self.group_stack.pop()
        if not group.breakables:
            self.queue_remove(group)
        if close:
            self.text(close)

    def group(self, indent=0, open="", close=""):
        """begin_group/end_group as a context manager."""
        import contextlib

        @contextlib.contextmanager
        def scope():
            self.begin_group(indent, open)
            try:
                yield
            finally:
                self.end_group(indent, close)
        return scope()

    def indent(self, indent):
        """Extra indentation as a context manager."""
        import contextlib

        @contextlib.contextmanager
        def scope():
            self.indentation += indent
            try:
                yield
            finally:
                self.indentation -= indent
        return scope()

    def flush(self):
        """Write out what is buffered."""
        for item in self.buffer:
            self.output_width += item.output(self.out, self.output_width)
        self.buffer.clear()
        self.buffer_width = 0

    def _enumerate(self, seq):
        for index, item in enumerate(seq):
            if self.max_seq_length and index >= self.max_seq_length:
                self.text(",")
                self.breakable()
                self.text("...")
                return
            yield index, item

    # objects

    def pretty(self, obj):
        """Write obj's pretty representation."""
        obj_id = id(obj)
        cycle = obj_id in self.stack
        self.stack.append(obj_id)
        self.begin_group()
        try:
            if obj is None or obj is True or obj is False or obj is Ellipsis or obj is NotImplemented:
                return _pretty_repr(obj, self, cycle)
            cls = _safe_getattr(obj, "__class__", None) or type(obj)
            for klass in getattr(cls, "__mro__", (cls,)):
                printer = _PRETTY_TYPES.get(klass)
                if printer is None:
                    printer = _PRETTY_BY_NAME.get((_safe_getattr(klass, "__module__"), _safe_getattr(klass, "__name__")))
                if printer is not None:
                    return printer(obj, self, cycle)
                method = klass.__dict__.get("_repr_pretty_") if hasattr(klass, "__dict__") else None
                if method is not None and callable(getattr(klass, "_repr_pretty_", None)):
                    return klass._repr_pretty_(obj, self, cycle)
                if klass is not object and callable(klass.__dict__.get("__repr__")):
                    return _pretty_repr(obj, self, cycle)
            return _pretty_default(obj, self, cycle)
        finally:
            self.end_group()
            self.stack.pop()

    def getvalue(self):
        """Everything written so far."""
        self.flush()
        return "".join(self.out)


def _safe_getattr(obj, name, default=None):
    try:
        return getattr(obj, name, default)
    except Exception:
        return default


_PRETTY_SCALARS = frozenset({int, str, bytes, bool, type(None)})


def _pretty_is_repr(obj, max_width):
    """Whether obj's pretty text is plainly its repr (a scalar, or a short list/tuple of scalars): the fast path."""
    kind = type(obj)
    if kind in _PRETTY_SCALARS:
        return True
    if kind in (list, tuple) and len(obj) < 64 and all(type(item) in _PRETTY_SCALARS for item in obj):
        return len(repr(obj)) <= max_width
    return False


def pretty(obj, max_width=PRETTY_WIDTH, max_seq_length=PRETTY_MAX_SEQ):
    """obj's text as IPython's pretty printer writes it."""
    if _pretty_is_repr(obj, max_width):
        return repr(obj)
    printer = PrettyPrinter(max_width, max_seq_length)
    printer.pretty(obj)
    return printer.getvalue()


def _pretty_repr(obj, p, cycle):
    p.begin_group()
    for index, line in enumerate(repr(obj).splitlines()):
        if index:
            p.break_()
        p.text(line)
    p.end_group()


def _pretty_default(obj, p, cycle):
    cls = _safe_getattr(obj, "__class__", None) or type(obj)
    if _safe_getattr(cls, "__repr__", None) is not object.__repr__:
        return _pretty_repr(obj, p, cycle)
    p.begin_group(1, "<")
    p.pretty(cls)
    p.text(" at 0x%x" % id(obj))
    if cycle:
        p.text(" ...")
    p.end_group(1, ">")


def _pretty_sequence(start, end):
    def printer(obj, p, cycle):
        if cycle:
            return p.text(start + "..." + end)
        p.begin_group(len(start), start)
        for index, item in p._enumerate(obj):
            if index:
                p.text(",")
                p.breakable()
            p.pretty(item)
        if len(obj) == 1 and isinstance(obj, tuple):
            p.text(",")
        p.end_group(len(start), end)
    return printer


def _sorted_for_pretty(items):
    items = list(items)
    for key in (None, str):
        try:
            return sorted(items, key=key)
        except Exception:
            pass
    return items


def _pretty_set(start, end):
    def printer(obj, p, cycle):
        if cycle:
            return p.text(start + "..." + end)
        if not obj:
            return p.text(type(obj).__name__ + "()")
        p.begin_group(len(start), start)
        items = obj if p.max_seq_length and len(obj) >= p.max_seq_length else _sorted_for_pretty(obj)
        for index, item in p._enumerate(items):
            if index:
                p.text(",")
                p.breakable()
            p.pretty(item)
        p.end_group(len(start), end)
    return printer


def _pretty_dict(start, end):
    def printer(obj, p, cycle):
        if cycle:
            return p.text("{...}")
        p.begin_group(len(start), start)
        for index, key in p._enumerate(obj.keys()):
            if index:
                p.text(",")
                p.breakable()
            p.pretty(key)
            p.text(": ")
            p.pretty(obj[key])
        p.end_group(len(start), end)
    return printer


def _pretty_call(p, name, args, kwargs=()):
    """name(arg, ..., key=value, ...) with IPython's wrapping."""
    prefix = name + "("
    with p.group(len(prefix), prefix, ")"):
        first = True
        for key, value in [(None, a) for a in args] + list(kwargs):
            if not first:
                p.text(",")
                p.breakable()
            first = False
            if key is None:
                p.pretty(value)
            else:
                with p.group(len(key) + 1, key + "="):
                    p.pretty(value)


class _PrettyRaw:
    def __init__(self, text):
        self.text = text

    def _repr_pretty_(self, p, cycle):
        p.text(self.text)


def _pretty_type(obj, p, cycle):
    if [m for m in type(obj).__mro__ if "__repr__" in vars(m)][:1] != [type]:
        return _pretty_repr(obj, p, cycle)
    module = _safe_getattr(obj, "__module__")
    name = _safe_getattr(obj, "__qualname__")
    if not isinstance(name, str):
        name = _safe_getattr(obj, "__name__")
        if not isinstance(name, str):
            name = "<unknown type>"
    p.text(name if module in (None, "__builtin__", "builtins", "exceptions") else "%s.%s" % (module, name))


def _pretty_function(obj, p, cycle):
    import inspect

    name = _safe_getattr(obj, "__qualname__", obj.__name__)
    module = obj.__module__
    if module and module not in ("__builtin__", "builtins", "exceptions"):
        name = module + "." + name
    try:
        name += str(inspect.signature(obj))
    except ValueError:
        pass
    p.text("<function %s>" % name)


def _pretty_exception(obj, p, cycle):
    cls = obj.__class__
    name = getattr(cls, "__qualname__", cls.__name__)
    if cls.__module__ not in ("exceptions", "builtins"):
        name = "%s.%s" % (cls.__module__, name)
    _pretty_call(p, name, getattr(obj, "args", ()))


def _pretty_super(obj, p, cycle):
    p.begin_group(8, "<super: ")
    p.pretty(obj.__thisclass__)
    p.text(",")
    p.breakable()
    p.pretty(obj.__self__)
    p.end_group(8, ">")


def _pretty_pattern(obj, p, cycle):
    pattern = repr(obj.pattern)
    args = [_PrettyRaw("r" + pattern.replace("\\\\", "\\"))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        flags = [name for name in ("TEMPLATE", "IGNORECASE", "LOCALE", "MULTILINE", "DOTALL", "UNICODE", "VERBOSE",
                                   "DEBUG") if hasattr(re, name) and obj.flags & getattr(re, name)]
    if flags:
        args.append(_PrettyRaw("|".join("re." + name for name in flags)))
    _pretty_call(p, "re.compile", args)


def _pretty_namespace(obj, p, cycle):
    if cycle:
        return _pretty_call(p, "namespace", [_PrettyRaw("...")])
    _pretty_call(p, "namespace", (), list(obj.__dict__.items()))


def _pretty_constructor(contents):
    """A printer writing ClassName(<contents(obj)>), as IPython shows the collections types."""
    def printer(obj, p, cycle):
        name = obj.__class__.__name__
        if cycle:
            return _pretty_call(p, name, [_PrettyRaw("...")])
        args, kwargs = contents(obj)
        _pretty_call(p, name, args, kwargs)
    return printer


def _deque_contents(obj):
    return [list(obj)], ([] if obj.maxlen is None else [("maxlen", obj.maxlen)])


_PRETTY_TYPES = {
    int: _pretty_repr, float: _pretty_repr, str: _pretty_repr, bytes: _pretty_repr, range: _pretty_repr,
    slice: _pretty_repr, types.MethodType: _pretty_repr,
    tuple: _pretty_sequence("(", ")"), list: _pretty_sequence("[", "]"),
    dict: _pretty_dict("{", "}"), types.MappingProxyType: _pretty_dict("mappingproxy({", "})"),
    set: _pretty_set("{", "}"), frozenset: _pretty_set("frozenset({", "})"),
    super: _pretty_super, type(re.compile("")): _pretty_pattern, type: _pretty_type,
    types.FunctionType: _pretty_function, types.BuiltinFunctionType: _pretty_function,
    types.SimpleNamespace: _pretty_namespace, BaseException: _pretty_exception,
}
if type(os.environ) is not dict:
    _PRETTY_TYPES[type(os.environ)] = _pretty_dict("environ{", "}")
_PRETTY_BY_NAME = {
    ("datetime", "datetime"): _pretty_repr,
    ("datetime", "timedelta"): _pretty_repr,
    ("collections", "defaultdict"): _pretty_constructor(lambda o: ([o.default_factory, dict(o)], [])),
    ("collections", "OrderedDict"): _pretty_constructor(lambda o: ([list(o.items())] if len(o) else [], [])),
    ("collections", "deque"): _pretty_constructor(_deque_contents),
    ("collections", "Counter"): _pretty_constructor(lambda o: ([dict(o)] if len(o) else [], [])),
    ("collections", "UserList"): _pretty_constructor(lambda o: ([o.data], [])),
}


# ---------------------------------------------------------------------------
# Rich display


def _call_repr(obj, name, *args, **kwargs):
    try:
        method = getattr(obj, name, None)
        if method is None or not callable(method):
            return None
        return method(*args, **kwargs)
    except Exception:
        return None


def _normalize_mime(mime, value):
    if value is None:
        return None
    if mime in ("image/png", "image/jpeg"):
        if isinstance(value, (bytes, bytearray, memoryview)):
            return base64.b64encode(bytes(value)).decode("ascii")
        return value if isinstance(value, str) else None
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, (dict, list, int, float, bool)):
        return value
    return None


def _plain_text(obj):
    try:
        text = pretty(obj) if _state.pretty_printing else repr(obj)
    except Exception:
        try:
            text = repr(obj)
        except Exception as exc:
            text = "<%s object; repr() raised %s>" % (type(obj).__name__, type(exc).__name__)
    if not isinstance(text, str):
        text = str(text)
    if len(text) > MAX_PLAIN_CHARS:
        omitted = len(text) - MAX_PLAIN_CHARS
        text = "%s… [%d characters omitted]" % (text[:MAX_PLAIN_CHARS], omitted)
    return text


# Formatters by type, as IPython's display formatters hold them: (module, qualname) of a class in
# the object's MRO -> {mime: fn(obj) -> value or None}. They win over the object's _repr_*_ methods.
_FORMATTERS = {}
_figure_formats = ["png"]


def register_formatter(mime, cls, fn):
    """Render instances of cls (a class, or "module.QualName") as mime with fn(obj) -> str | bytes | None."""
    if isinstance(cls, str):
        module, _, name = cls.rpartition(".")
        key = (module, name)
    else:
        key = (cls.__module__, cls.__qualname__)
    _FORMATTERS.setdefault(key, {})[mime] = fn


def _formatted(obj):
    """The bundle the registered formatters give obj (empty when none applies)."""
    for cls in getattr(type(obj), "__mro__", ()):
        table = _FORMATTERS.get((_safe_getattr(cls, "__module__"), _safe_getattr(cls, "__qualname__")))
        if table is not None:
            bundle = {}
            for mime, fn in table.items():
                value = _normalize_mime(mime, fn(obj))
                if value is not None:
                    bundle[mime] = value
            return bundle
    return {}


def _figure_image(figure, fmt):
    """A figure as the inline backend renders it (IPython's print_figure); None for a figure with nothing drawn."""
    if not figure.axes and not figure.lines:
        return None
    dpi = figure.dpi * (2 if fmt == "retina" else 1)
    buffer = io.BytesIO()
    if figure.canvas is None:
        from matplotlib.backend_bases import FigureCanvasBase

        FigureCanvasBase(figure)
    figure.canvas.print_figure(buffer, format="png" if fmt == "retina" else fmt, facecolor=figure.get_facecolor(),
                               edgecolor=figure.get_edgecolor(), dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def _figure_png(figure):
    fmt = "retina" if "retina" in _figure_formats else "png" if "png" in _figure_formats else None
    return None if fmt is None else _figure_image(figure, fmt)


def _figure_svg(figure):
    return _figure_image(figure, "svg") if "svg" in _figure_formats else None


def _figure_pdf(figure):
    data = _figure_image(figure, "pdf") if "pdf" in _figure_formats else None
    return None if data is None else base64.b64encode(data).decode("ascii")


register_formatter("image/png", "matplotlib.figure.Figure", _figure_png)
register_formatter("image/svg+xml", "matplotlib.figure.Figure", _figure_svg)
register_formatter("application/pdf", "matplotlib.figure.Figure", _figure_pdf)


def mime_bundle(obj):
    """MIME bundle for obj: registered formatters, _repr_mimebundle_, the _repr_*_ methods; always with text/plain."""
    bundle = {}
    if type(obj) not in _PLAIN_TYPES and not isinstance(obj, type):
        bundle.update(_formatted(obj))
        data = _call_repr(obj, "_repr_mimebundle_", include=None, exclude=None)
        if isinstance(data, tuple) and data:
            data = data[0]
        if isinstance(data, dict):
            for mime, value in data.items():
                value = _normalize_mime(mime, value)
                if isinstance(mime, str) and value is not None and mime not in bundle:
                    bundle[mime] = value
        for mime, name in _REPR_METHODS:
            if mime in bundle:
                continue
            value = _call_repr(obj, name)
            if isinstance(value, tuple) and len(value) == 2:
                value = value[0]
            value = _normalize_mime(mime, value)
            if value is not None:
                bundle[mime] = value
    if not isinstance(bundle.get("text/plain"), str):
        bundle["text/plain"] = _plain_text(obj)
    return bundle


def _emit_display(bundle):
    _flush_streams()
    _router.display(bundle)
    if _state.pending:
        _deliver_pending()


def display(*objs, raw=False, **ignored):
    """Show each object as a display frame (raw=True: each object already is a MIME bundle)."""
    for obj in objs:
        if raw and isinstance(obj, dict):
            _emit_display(dict(obj))
        else:
            _emit_display(mime_bundle(obj))


def emit_status(op, **fields):
    """Send a status event: a display frame with an application/x-veyyon-status bundle."""
    event = {"op": op}
    event.update(fields)
    _send({"type": "display", "id": _state.current_id, "bundle": {STATUS_MIME: event}})
    if _state.pending:
        _deliver_pending()


_shown_figures = set()


def _flush_figures():
    """Show and close the figures open at the end of a cell (one the cell returned was shown already)."""
    shown = set(_shown_figures)
    _shown_figures.clear()
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    try:
        numbers = list(pyplot.get_fignums())
    except Exception:
        return
    for number in numbers:
        figure = pyplot.figure(number)
        try:
            if id(figure) not in shown:
                _emit_display(mime_bundle(figure))
        except Exception as exc:
            sys.stderr.write("could not render figure %s: %s: %s\n" % (number, type(exc).__name__, exc))
        finally:
            pyplot.close(figure)


# ---------------------------------------------------------------------------
# Host bridge


class BridgeError(Exception):
    """A bridge call the host answered with an error; str() is "name: message"."""

    def __init__(self, name, message):
        super().__init__(name, message)
        self.name = name
        self.message = message

    def __str__(self):
        return "%s: %s" % (self.name, self.message)


class _BridgeCall:
    def __init__(self, call_id, request_id):
        self.call_id = call_id
        self.request_id = request_id
        self.event = threading.Event()
        self.ok = False
        self.value = None
        self.error = None
        self.resumed = False


_bridge_calls = {}
_bridge_lock = threading.Lock()
_bridge_ids = itertools.count(1)


def _bridge_status(call, action):
    _send({"type": "display", "id": call.request_id,
           "bundle": {STATUS_MIME: {"op": "timeout", "action": action}}})


def _bridge_open(request_id=None):
    call = _BridgeCall("c%d" % next(_bridge_ids), _state.current_id)
    with _bridge_lock:
        if request_id is not None and (request_id != call.request_id or not _state.cell_active):
            raise BridgeError("BridgeCancelled", "the cell that made this call has ended")
        _bridge_calls[call.call_id] = call
        _bridge_status(call, "pause")
    return call


def _bridge_close(call):
    with _bridge_lock:
        _bridge_calls.pop(call.call_id, None)
        resume = not call.resumed
        call.resumed = True
    if resume:
        _bridge_status(call, "resume")


def bridge_call(method, params=None, request_id=None):
    """Ask the host to run method(params); block (interruptibly) for its answer and return the value.

    With request_id (e.g. captured by a helper thread's starter), the call is refused with
    BridgeError("BridgeCancelled", ...) unless that request's cell is still running.
    """
    if not isinstance(method, str):
        raise TypeError("bridge method must be a str, not %s" % type(method).__name__)
    payload = {} if params is None else params
    _JSON.encode(payload)
    call = _bridge_open(request_id)
    try:
        _send({"type": "bridge", "id": call.request_id, "callId": call.call_id,
               "method": method, "params": payload})
        call.event.wait()
    finally:
        _bridge_close(call)
    if call.ok:
        return call.value
    name, message = call.error
    raise BridgeError(name, message)


def _resolve_bridge(message):
    with _bridge_lock:
        call = _bridge_calls.get(message.get("callId"))
    if call is None:
        _diagnose("bridge_result for unknown callId %r ignored" % (message.get("callId"),))
        return
    if message.get("ok") is True:
        call.ok = True
        call.value = message.get("value")
    else:
        error = message.get("error")
        if isinstance(error, dict):
            call.error = (str(error.get("name", "Error")), str(error.get("message", "")))
        else:
            call.error = (PROTOCOL_ERROR, "malformed bridge_result: %r" % (error,))
    call.event.set()


def cancel_bridge_calls(request_id, reason="the cell ended before the host answered"):
    """Resume and fail request_id's open bridge calls with BridgeCancelled(reason), so pauses stay balanced."""
    with _bridge_lock:
        calls = [c for c in _bridge_calls.values() if c.request_id == request_id and not c.resumed]
        for call in calls:
            call.resumed = True
            del _bridge_calls[call.call_id]
    for call in calls:
        _bridge_status(call, "resume")
        call.error = ("BridgeCancelled", reason)
        call.event.set()


# ---------------------------------------------------------------------------
# Magic source transformer


_CODE_SPECIAL = re.compile(r"""[#'"()\[\]{}\\]""")
_FEXPR_SPECIAL = re.compile(r"""[#'"()\[\]{}\\:]""")
_FSPEC_SPECIAL = re.compile(r"[{}]")
_STRING_SPECIAL = {
    (quote, fmt): re.compile("[\\\\%s%s]" % (quote, "{}" if fmt else ""))
    for quote in ("'", '"') for fmt in (False, True)
}
_PREFIX_CHARS = frozenset("rbuftRBUFT")
_MAGIC_NAME = re.compile(r"([A-Za-z_]\w*)(.*)\Z", re.S)
_ASSIGN_MAGIC = re.compile(
    r"((?:[^\W\d][\w.]*(?:\[[^\]]*\])*)(?:\s*,\s*[^\W\d][\w.]*(?:\[[^\]]*\])*)*)\s*=\s*([!%])(.*)\Z", re.S)
_DOLLAR_NAME = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*")
_NO_EXPAND_MAGICS = frozenset({"time", "timeit"})
_PYTHON_BODY_MAGICS = frozenset({"time", "timeit", "capture"})


class _Scanner:
    """Follows strings, brackets and continuations across physical lines of Python source."""

    def __init__(self):
        self.stack = []
        self.depth = 0
        self.continued = False

    def at_statement_start(self):
        """Whether the next physical line begins a logical line outside any string or bracket."""
        return not self.stack and self.depth == 0 and not self.continued

    def feed(self, line):
        """Advance the state over one physical line (without its newline)."""
        line = line.rstrip("\r")
        stack = self.stack
        pos = 0
        end = len(line)
        escaped_eol = False
        trailing_backslash = False
        while pos < end:
            top = stack[-1] if stack else None
            kind = top[0] if top else "c"
            if kind == "s":
                match = _STRING_SPECIAL[(top[1], top[3])].search(line, pos)
                if match is None:
                    break
                pos = match.start()
                char = line[pos]
                if char == "\\":
                    if pos + 1 >= end:
                        escaped_eol = True
                    pos += 2
                elif char == top[1]:
                    if top[2]:
                        if line.startswith(top[1] * 3, pos):
                            stack.pop()
                            pos += 3
                        else:
                            pos += 1
                    else:
                        stack.pop()
                        pos += 1
                elif char == "{":
                    if line.startswith("{{", pos):
                        pos += 2
                    else:
                        stack.append(["e", 0])
                        pos += 1
                else:
                    pos += 2 if line.startswith("}}", pos) else 1
                continue
            if kind == "p":
                match = _FSPEC_SPECIAL.search(line, pos)
                if match is None:
                    break
                pos = match.start() + 1
                if match.group() == "{":
                    stack.append(["e", 0])
                else:
                    stack.pop()
                    if stack and stack[-1][0] == "e":
                        stack.pop()
                continue
            pattern = _FEXPR_SPECIAL if kind == "e" else _CODE_SPECIAL
            match = pattern.search(line, pos)
            if match is None:
                break
            pos = match.start()
            char = line[pos]
            if char == "#":
                break
            if char in "'\"":
                fmt = self._is_fstring(line, pos)
                triple = line.startswith(char * 3, pos)
                stack.append(["s", char, triple, fmt])
                pos += 3 if triple else 1
            elif char in "([{":
                if kind == "e":
                    top[1] += 1
                else:
                    self.depth += 1
                pos += 1
            elif char in ")]}":
                if kind == "e":
                    if char == "}" and top[1] == 0:
                        stack.pop()
                    else:
                        top[1] = max(0, top[1] - 1)
                else:
                    self.depth = max(0, self.depth - 1)
                pos += 1
            elif char == ":":
                if top[1] == 0:
                    stack.append(["p"])
                pos += 1
            else:
                if pos + 1 >= end:
                    trailing_backslash = True
                pos += 2
        if not escaped_eol:
            for index, entry in enumerate(stack):
                if entry[0] == "s" and not entry[2]:
                    del stack[index:]
                    break
        self.continued = trailing_backslash and not stack

    @staticmethod
    def _is_fstring(line, pos):
        start = pos
        while start > 0 and pos - start < 2 and line[start - 1] in _PREFIX_CHARS:
            start -= 1
        if start > 0 and (line[start - 1].isalnum() or line[start - 1] == "_"):
            return False
        prefix = line[start:pos].lower()
        return "f" in prefix or "t" in prefix


def _matching_brace(text, start):
    depth = 0
    for index in range(start, len(text)):
        char = text[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
    return -1


def _split_field(inner):
    depth = 0
    quote = None
    for index, char in enumerate(inner):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif depth == 0 and char == "!" and not inner.startswith("!=", index):
            rest = inner[index + 1:]
            conversion, _, spec = rest.partition(":")
            return inner[:index], conversion, spec
        elif depth == 0 and char == ":":
            return inner[:index], "", inner[index + 1:]
    return inner, "", ""


def _valid_field(expr):
    if not expr.strip():
        return False
    try:
        compile("lambda: (%s)" % expr, "<field>", "eval", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def split_interpolation(text):
    """Split shell text into literal strings and (expr, raw, conversion, spec) fields, IPython style.

    ``$name`` / ``$a.b`` (not inside single quotes) and ``{expr}`` are fields; ``$$``, ``{{``
    and ``}}`` stand for ``$``, ``{`` and ``}``; braces holding no valid expression stay literal.
    """
    parts = []
    literal = []
    in_single = in_double = False
    index = 0
    size = len(text)

    def flush():
        if literal:
            parts.append("".join(literal))
            del literal[:]

    while index < size:
        char = text[index]
        if char == "\\" and not in_single:
            literal.append(text[index:index + 2])
            index += 2
        elif char == "'" and not in_double:
            in_single = not in_single
            literal.append(char)
            index += 1
        elif char == '"' and not in_single:
            in_double = not in_double
            literal.append(char)
            index += 1
        elif char == "$" and not in_single:
            if text.startswith("$$", index):
                literal.append("$")
                index += 2
                continue
            match = _DOLLAR_NAME.match(text, index + 1)
            if match:
                flush()
                parts.append((match.group(), "$" + match.group(), "", ""))
                index = match.end()
            else:
                literal.append(char)
                index += 1
        elif char == "{":
            if text.startswith("{{", index):
                literal.append("{")
                index += 2
                continue
            close = _matching_brace(text, index)
            if close != -1:
                expr, conversion, spec = _split_field(text[index + 1:close])
                if conversion in ("", "r", "s", "a") and _valid_field(expr):
                    flush()
                    parts.append((expr, text[index:close + 1], conversion, spec))
                    index = close + 1
                    continue
            literal.append(char)
            index += 1
        elif char == "}" and text.startswith("}}", index):
            literal.append("}")
            index += 2
        else:
            literal.append(char)
            index += 1
    flush()
    return parts


def _interpolation_code(text):
    parts = split_interpolation(text)
    if all(isinstance(part, str) for part in parts):
        return repr("".join(parts))
    items = []
    for part in parts:
        if isinstance(part, str):
            items.append(repr(part))
        else:
            expr, raw, conversion, spec = part
            items.append("(lambda: (%s), %r, %r, %r)" % (expr, raw, conversion, spec))
    return "__veyyon__.expand((%s,))" % ", ".join(items)


def _line_magic_code(text):
    match = _MAGIC_NAME.match(text)
    if match is None:
        return "__veyyon__.line_magic(%r, '')" % text.strip()
    name, args = match.group(1), match.group(2).strip()
    if name in _NO_EXPAND_MAGICS:
        return "__veyyon__.line_magic(%r, %r)" % (name, args)
    return "__veyyon__.line_magic(%r, %s)" % (name, _interpolation_code(args))


def _magic_text(lines, index, stripped):
    """The magic's text with backslash continuations joined, and how many lines it spans."""
    pieces = []
    text = stripped
    consumed = 1
    while text.endswith("\\") and index + consumed < len(lines):
        pieces.append(text[:-1])
        text = lines[index + consumed].rstrip("\r")
        consumed += 1
    pieces.append(text)
    return "".join(pieces), consumed


def _rewrite_magic_line(lines, index):
    raw = lines[index].rstrip("\r")
    stripped = raw.lstrip()
    if not stripped:
        return None, 0
    first = stripped[0]
    assign = None
    if first not in "%!":
        if "=" not in stripped or not ("!" in stripped or "%" in stripped):
            return None, 0
        assign = _ASSIGN_MAGIC.match(stripped)
        if assign is None:
            return None, 0
    indent = raw[:len(raw) - len(stripped)]
    text, consumed = _magic_text(lines, index, stripped)
    if assign is not None:
        target_end = len(assign.group(1))
        rest = text[text.index(assign.group(2), target_end) + 1:]
        if assign.group(2) == "!":
            value = "__veyyon__.getoutput(%s)" % _interpolation_code(rest.strip())
        else:
            value = _line_magic_code(rest)
        return "%s%s = %s" % (indent, assign.group(1), value), consumed
    if text.startswith("%%"):
        name = _MAGIC_NAME.match(text[2:])
        return "%s__veyyon__.misplaced_cell_magic(%r)" % (indent, name.group(1) if name else ""), consumed
    if first == "%":
        return indent + _line_magic_code(text[1:]), consumed
    if text.startswith("!!"):
        return "%s__veyyon__.getoutput(%s)" % (indent, _interpolation_code(text[2:].strip())), consumed
    return "%s__veyyon__.system(%s)" % (indent, _interpolation_code(text[1:].strip())), consumed


def _cell_magic_code(lines):
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("%%"):
            return None
        match = _MAGIC_NAME.match(stripped[2:])
        name = match.group(1) if match else ""
        args = match.group(2).strip() if match else stripped[2:]
        if stripped.startswith("%%!"):
            name, args = "!", stripped[3:].strip()
        body = "\n".join(lines[index + 1:])
        line_code = repr(args) if name in _NO_EXPAND_MAGICS else _interpolation_code(args)
        call = "__veyyon__.cell_magic(%r, %s, %r)" % (name, line_code, body)
        return "\n".join([""] * index + [call] + [""] * (len(lines) - index - 1))
    return None


def transform(source):
    """Rewrite IPython-style magics in a cell into plain Python calls, keeping line numbers."""
    if "%" not in source and "!" not in source:
        return source
    lines = source.split("\n")
    cell = _cell_magic_code(lines)
    if cell is not None:
        return cell
    out = []
    scanner = _Scanner()
    index = 0
    while index < len(lines):
        if scanner.at_statement_start():
            rewritten, consumed = _rewrite_magic_line(lines, index)
            if rewritten is not None:
                out.append(rewritten)
                out.extend([""] * (consumed - 1))
                index += consumed
                continue
        scanner.feed(lines[index])
        out.append(lines[index])
        index += 1
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Execution


def _register_source(filename, source):
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def _ends_with_semicolon(lines, node):
    line = lines[node.end_lineno - 1].encode("utf-8")[node.end_col_offset:].decode("utf-8", "replace")
    rest = "\n".join([line] + lines[node.end_lineno:])
    index = 0
    while index < len(rest):
        char = rest[index]
        if char == ";":
            return True
        if char == "#":
            newline = rest.find("\n", index)
            if newline == -1:
                return False
            index = newline
        elif not (char.isspace() or char == "\\"):
            return False
        index += 1
    return False


_loop = None


def _event_loop():
    global _loop
    import asyncio

    if _loop is None or _loop.is_closed():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                loop = asyncio.get_event_loop_policy().get_event_loop()
            except RuntimeError:
                loop = None
        if loop is None or loop.is_closed():
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
        _loop = loop
    return _loop


def _run_coroutine(coro):
    loop = _event_loop()
    if loop.is_running():
        coro.close()
        raise RuntimeError("top-level await cannot run here: the kernel's event loop is already running")
    task = loop.create_task(coro)
    try:
        return loop.run_until_complete(task)
    except BaseException:
        if not task.done():
            task.cancel()
            try:
                loop.run_until_complete(task)
            except BaseException:
                pass
        raise


def _run_code(code, globals_, locals_):
    if code.co_flags & _CO_COROUTINE:
        return _run_coroutine(eval(code, globals_, locals_))
    return eval(code, globals_, locals_)


def _execute(source, filename, globals_, locals_=None, line_offset=0, register=True, want_value=True):
    """Run a cell's source (magics included); return its last expression's value or _NO_VALUE."""
    code_text = transform(source)
    if register:
        _register_source(filename, source)
    try:
        tree = compile(code_text, filename, "exec", ast.PyCF_ONLY_AST | _TLA_FLAG, dont_inherit=True)
    except SyntaxError as exc:
        if line_offset and exc.lineno is not None:
            exc.lineno += line_offset
            exc.text = linecache.getline(filename, exc.lineno) or exc.text
        raise
    body = tree.body
    keep_value = (want_value and bool(body) and isinstance(body[-1], ast.Expr)
                  and not _ends_with_semicolon(code_text.split("\n"), body[-1]))
    if line_offset:
        ast.increment_lineno(tree, line_offset)
    last = body.pop() if keep_value else None
    if body:
        module = ast.Module(body=body, type_ignores=[])
        _run_code(compile(module, filename, "exec", _TLA_FLAG, dont_inherit=True), globals_, locals_)
    if last is None:
        return _NO_VALUE
    expression = ast.Expression(body=last.value)
    return _run_code(compile(expression, filename, "eval", _TLA_FLAG, dont_inherit=True), globals_, locals_)


def _is_plumbing(filename):
    return filename in _PLUMBING_FILES or filename.startswith(_PLUMBING_DIRS)


def _strip_runner_frames(stack):
    kept = []
    dropping = True
    for frame in stack:
        if frame.filename in _RUNNER_FILES:
            dropping = True
            continue
        if dropping and _is_plumbing(frame.filename):
            continue
        dropping = False
        kept.append(frame)
    return traceback.StackSummary.from_list(kept)


def _clean_traceback(te, seen=None):
    seen = set() if seen is None else seen
    if id(te) in seen:
        return
    seen.add(id(te))
    te.stack = _strip_runner_frames(te.stack)
    for linked in (te.__cause__, te.__context__):
        if linked is not None:
            _clean_traceback(linked, seen)
    for nested in getattr(te, "exceptions", None) or ():
        _clean_traceback(nested, seen)


def error_fields(exc):
    """ename, evalue and traceback lines for exc, with the runner's own frames left out."""
    ename = type(exc).__name__
    try:
        evalue = str(exc)
    except Exception:
        evalue = "<exception str() failed>"
    try:
        te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
        _clean_traceback(te)
        lines = "".join(te.format()).rstrip("\n").split("\n")
    except Exception:
        lines = ["%s: %s" % (ename, evalue)]
    return {"ename": ename, "evalue": evalue, "traceback": lines}


# ---------------------------------------------------------------------------
# Magics: runtime


class UsageError(Exception):
    """A magic was called with arguments it cannot use."""


class _MagicContext:
    def __init__(self, frame):
        self.frame = frame
        self.globals = frame.f_globals
        self.filename = frame.f_code.co_filename
        self.lineno = frame.f_lineno

    @property
    def locals(self):
        return self.frame.f_locals


_LINE_MAGICS = {}
_CELL_MAGICS = {}


def register_line_magic(name, fn):
    """Make %name call fn(args: str); its return value is the magic's value."""
    _LINE_MAGICS[name] = lambda args, ctx: fn(args)


def register_cell_magic(name, fn):
    """Make %%name call fn(line: str, body: str); its return value is the cell's value."""
    _CELL_MAGICS[name] = lambda line, body, ctx: fn(line, body)


def line_magic(name, args=""):
    """Run the line magic %name for the calling frame (what the transformer emits)."""
    handler = _LINE_MAGICS.get(name)
    if handler is None:
        raise NameError("UsageError: Line magic function `%%%s` not found." % name)
    return handler(args, _MagicContext(sys._getframe(1)))


def cell_magic(name, line, body):
    """Run the cell magic %%name for the calling frame (what the transformer emits)."""
    handler = _CELL_MAGICS.get(name)
    if handler is None:
        raise NameError("UsageError: Cell magic `%%%%%s` not found." % name)
    return handler(line, body, _MagicContext(sys._getframe(1)))


def misplaced_cell_magic(name):
    """Raise the error for a %%name that is not on the first line of its cell."""
    raise UsageError("Cell magic `%%%%%s` must be on the first line of the cell." % name)


def expand(parts):
    """Join literal parts and evaluated fields; a field that fails to evaluate stays as written."""
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        fn, raw, conversion, spec = part
        try:
            value = fn()
            if conversion == "r":
                value = repr(value)
            elif conversion == "a":
                value = ascii(value)
            elif conversion == "s":
                value = str(value)
            out.append(format(value, spec))
        except Exception:
            out.append(raw)
    return "".join(out)


def _split_args(args):
    import shlex

    try:
        return shlex.split(args)
    except ValueError as exc:
        raise UsageError("cannot parse arguments %r: %s" % (args, exc))


def _single_path(args):
    import shlex

    try:
        parts = shlex.split(args)
    except ValueError:
        return args.strip()
    if len(parts) == 1:
        return parts[0]
    return args.strip() if parts else ""


class SList(list):
    """Lines of command output with IPython-style helpers: .n, .s, .l, .p, .grep(), .fields()."""

    @property
    def l(self):
        """The lines as a list (this object)."""
        return self

    @property
    def n(self):
        """The lines joined by newlines."""
        return "\n".join(self)

    @property
    def s(self):
        """The lines joined by spaces."""
        return " ".join(self)

    @property
    def p(self):
        """The lines that name existing paths, as pathlib.Path objects."""
        import pathlib

        return [pathlib.Path(line) for line in self if os.path.exists(line)]

    def grep(self, pattern, prune=False, field=None):
        """Lines matching pattern (a regex or a predicate); prune=True keeps the others instead."""
        if callable(pattern):
            test = pattern
        else:
            test = re.compile(pattern).search

        def subject(line):
            if field is None:
                return line
            fields = line.split()
            return fields[field] if -len(fields) <= field < len(fields) else ""

        return SList(line for line in self if bool(test(subject(line))) != bool(prune))

    def fields(self, *indices):
        """Whitespace-separated fields: all of them per line, or the chosen ones joined by spaces."""
        if not indices:
            return [line.split() for line in self]
        result = SList()
        for line in self:
            words = line.split()
            picked = [words[i] for i in indices if -len(words) <= i < len(words)]
            if picked:
                result.append(" ".join(picked))
        return result


def _shell_argv(command):
    shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
    return [shell, "-c", command]


def _stop_process(proc):
    import subprocess

    try:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    finally:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def _pump_process(proc, sinks=(None, None)):
    import selectors

    streams = {proc.stdout.fileno(): sinks[0] or sys.stdout, proc.stderr.fileno(): sinks[1] or sys.stderr}
    decoders = {fd: codecs.getincrementaldecoder("utf-8")("replace") for fd in streams}
    with selectors.DefaultSelector() as selector:
        for fd in streams:
            selector.register(fd, selectors.EVENT_READ)
        while streams:
            for key, _ in selector.select():
                fd = key.fd
                data = os.read(fd, 65536)
                target = streams[fd]
                text = decoders[fd].decode(data, not data)
                if text:
                    if callable(target):
                        target(text)
                    else:
                        target.write(text)
                        target.flush()
                if not data:
                    selector.unregister(fd)
                    del streams[fd]


def run_process(argv, sinks=(None, None), **popen_kwargs):
    """Run argv with its stdout/stderr streamed live into this cell's output (or to the callables in sinks);
    return the exit status."""
    import subprocess

    sys.stdout.flush()
    sys.stderr.flush()
    popen_kwargs.setdefault("stdin", subprocess.DEVNULL)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen_kwargs)
    try:
        _pump_process(proc, sinks)
        return proc.wait()
    except BaseException:
        _stop_process(proc)
        raise
    finally:
        proc.stdout.close()
        proc.stderr.close()


def system(command):
    """Run a shell command (what !cmd becomes), streaming its output; sets _exit_code."""
    status = run_process(_shell_argv(command))
    sys._getframe(1).f_globals["_exit_code"] = status


def getoutput(command):
    """Run a shell command and return its output (stderr merged) as an SList; sets _exit_code."""
    lines, status = _shell_output(command)
    sys._getframe(1).f_globals["_exit_code"] = status
    return lines


def _shell_output(command):
    """A shell command's output (stderr merged) as an SList, and its exit status."""
    import subprocess

    sys.stdout.flush()
    proc = subprocess.Popen(_shell_argv(command), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        data = proc.stdout.read()
        status = proc.wait()
    except BaseException:
        _stop_process(proc)
        raise
    finally:
        proc.stdout.close()
    return SList(data.decode("utf-8", "replace").splitlines()), status


def format_duration(seconds, precision=3):
    """A duration as IPython's timing magics write it: 1.23 s, 45.6 ms, 7.89 µs, 12 ns, or 2min 5s."""
    if seconds >= 60.0:
        parts = []
        left = seconds
        for suffix, length in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
            value = int(left / length)
            if value > 0:
                left = left % length
                parts.append("%d%s" % (value, suffix))
            if left < 1:
                break
        return " ".join(parts)
    import math

    order = min(-int(math.floor(math.log10(seconds)) // 3), 3) if seconds > 0.0 else 3
    return "%.*g %s" % (precision, seconds * (1, 1e3, 1e6, 1e9)[order], ("s", "ms", "\u00b5s", "ns")[order])


def _magic_pwd(args, ctx):
    return os.getcwd()


def _magic_cd(args, ctx):
    target = _single_path(args) or "~"
    if target == "-":
        if _state.previous_dir is None:
            raise UsageError("%cd -: no previous directory")
        target = _state.previous_dir
    previous = os.getcwd()
    os.chdir(os.path.expanduser(target))
    _state.previous_dir = previous
    cwd = os.getcwd()
    print(cwd)
    emit_status("cd", path=cwd)


def _magic_ls(args, ctx):
    return sorted(os.listdir(os.path.expanduser(_single_path(args) or ".")))


def _magic_env(args, ctx):
    args = args.strip()
    if not args:
        return dict(os.environ)
    if "=" in args:
        key, _, value = args.partition("=")
    elif " " in args:
        key, _, value = args.partition(" ")
    else:
        if args not in os.environ:
            raise UsageError("environment variable %s is not set" % args)
        return os.environ[args]
    key, value = key.strip(), value.strip()
    if not key:
        raise UsageError("%env needs a variable name")
    os.environ[key] = value
    print("env: %s=%s" % (key, value))


def _magic_set_env(args, ctx):
    args = args.strip()
    key, _, value = args.partition("=") if "=" in args.split(" ", 1)[0] else args.partition(" ")
    if not key.strip():
        raise UsageError("usage: %set_env KEY VALUE")
    os.environ[key.strip()] = value.strip()
    print("env: %s=%s" % (key.strip(), value.strip()))


def _offset_tree(tree, lineno, col):
    for node in ast.walk(tree):
        if "lineno" in node._attributes:
            if getattr(node, "lineno", None) == 1:
                node.col_offset += col
            if getattr(node, "end_lineno", None) == 1 and node.end_col_offset is not None:
                node.end_col_offset += col
    ast.increment_lineno(tree, lineno - 1)


def _compile_fragment(source, ctx, mode):
    """Compile source that sits on ctx's line, so tracebacks point at the magic's line."""
    tree = compile(source, ctx.filename, mode, ast.PyCF_ONLY_AST, dont_inherit=True)
    line = linecache.getline(ctx.filename, ctx.lineno)
    col = line.find(source) if source else -1
    _offset_tree(tree, ctx.lineno, len(line[:col].encode("utf-8")) if col >= 0 else 0)
    return compile(tree, ctx.filename, mode, dont_inherit=True)


# Timing magics: %time, %%time, %timeit, %%timeit print what IPython prints, and send a
# time/timeit status event with the same numbers for hosts that want them structured.


def _magic_time(args, ctx):
    if not args.strip():
        raise UsageError("usage: %time <statement or expression>")
    try:
        code = _compile_fragment(args, ctx, "eval")
    except SyntaxError:
        code = _compile_fragment(args, ctx, "exec")
    return _timed(lambda: eval(code, ctx.globals, ctx.locals))


def _cpu_times():
    try:
        import resource

        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime, usage.ru_stime
    except ImportError:
        times = os.times()
        return times.user, times.system


def _timed(run):
    wall_start = time.time()
    cpu_start = _cpu_times()
    value = run()
    cpu_end = _cpu_times()
    wall = time.time() - wall_start
    user, system = cpu_end[0] - cpu_start[0], cpu_end[1] - cpu_start[1]
    print("CPU times: user %s, sys: %s, total: %s" % (
        format_duration(user), format_duration(system), format_duration(user + system)))
    print("Wall time: %s" % format_duration(wall))
    emit_status("time", ms=wall * 1000.0)
    return value


class TimeitResult:
    """What %timeit -o returns, as IPython's: loops, repeat, best, worst, all_runs (s per run), timings (s per loop)."""

    def __init__(self, loops, repeat, best, worst, all_runs, compile_time=0.0, precision=3):
        self.loops = loops
        self.repeat = repeat
        self.best = best
        self.worst = worst
        self.all_runs = all_runs
        self.compile_time = compile_time
        self._precision = precision
        self.timings = [run / loops for run in all_runs]

    @property
    def average(self):
        """Mean seconds per loop."""
        import math

        return math.fsum(self.timings) / len(self.timings)

    @property
    def stdev(self):
        """Standard deviation of the seconds per loop."""
        import math

        mean = self.average
        return (math.fsum([(t - mean) ** 2 for t in self.timings]) / len(self.timings)) ** 0.5

    def __str__(self):
        return "%s \u00b1 %s per loop (mean \u00b1 std. dev. of %d run%s, %s loop%s each)" % (
            format_duration(self.average, self._precision), format_duration(self.stdev, self._precision),
            self.repeat, "" if self.repeat == 1 else "s", format(self.loops, ","), "" if self.loops == 1 else "s")

    def __repr__(self):
        return "<TimeitResult : %s>" % self

    def _repr_pretty_(self, p, cycle):
        p.text(repr(self))


_TIMEIT_USAGE = "usage: %timeit [-n<N> -r<R> [-t|-c] -q -p<P> -o] statement"


def _parse_timeit_options(args):
    """IPython's %timeit options (n:r:tcp:qo, getopt style) and the statement after them."""
    options = {"number": 0, "repeat": 7, "quiet": False, "result": False, "precision": 3, "timer": time.perf_counter}
    rest = args.strip()
    while rest.startswith("-"):
        match = re.match(r"-([nrp])\s*(\S+)\s*|-([tcqo]+)(?=\s|$)\s*", rest)
        if match is None:
            break
        if match.group(1):
            try:
                value = int(match.group(2))
            except ValueError:
                raise UsageError("invalid literal for int() with base 10: %r (%s)" % (match.group(2), _TIMEIT_USAGE))
            options[{"n": "number", "r": "repeat", "p": "precision"}[match.group(1)]] = value
        else:
            for flag in match.group(3):
                if flag == "q":
                    options["quiet"] = True
                elif flag == "o":
                    options["result"] = True
                elif flag == "t":
                    options["timer"] = time.time
                else:
                    options["timer"] = time.process_time
        rest = rest[match.end():]
    if options["repeat"] < 1:
        raise UsageError("%timeit -r needs at least 1 run")
    return options, rest


def _timeit(stmt, setup, ctx, options):
    import timeit

    if ctx.frame.f_code.co_flags & _CO_NEWLOCALS:
        namespace = dict(ctx.globals)
        namespace.update(ctx.locals)
    else:
        namespace = ctx.globals
    compile(stmt or "pass", "<magic-timeit-stmt>", "exec", dont_inherit=True)
    compile(setup or "pass", "<magic-timeit-setup>", "exec", dont_inherit=True)
    timer = timeit.Timer(stmt or "pass", setup or "pass", timer=options["timer"], globals=namespace)
    number = options["number"]
    if number <= 0:
        for index in range(10):
            number = 10 ** index
            if timer.timeit(number) >= 0.2:
                break
    runs = options["repeat"]
    all_runs = timer.repeat(runs, number)
    best, worst = min(all_runs) / number, max(all_runs) / number
    result = TimeitResult(number, runs, best, worst, all_runs, 0.0, options["precision"])
    if not options["quiet"]:
        if worst > 4 * best and best > 0 and worst > 1e-6:
            print("The slowest run took %0.2f times longer than the fastest. This could mean that an intermediate "
                  "result is being cached." % (worst / best))
        print(result)
    emit_status("timeit", ms=result.average * 1000.0, loops=number, runs=runs)
    return result if options["result"] else None


def _magic_timeit(args, ctx):
    options, stmt = _parse_timeit_options(args)
    if not stmt:
        return None
    return _timeit(transform(stmt), "", ctx, options)


def user_names(namespace=None):
    """Sorted names user cells defined (runtime, prelude and _private names left out)."""
    ns = _state.namespace if namespace is None else namespace
    protected = _state.protected
    return sorted(name for name, value in ns.items()
                  if not name.startswith("_") and not (name in protected and protected[name] is value))


def _filtered_names(args, ctx):
    wanted = set(args.split())
    names = user_names(ctx.globals)
    if wanted:
        names = [n for n in names if type(ctx.globals[n]).__name__ in wanted]
    return names


def _magic_who(args, ctx):
    names = _filtered_names(args, ctx)
    print("  ".join(names) if names else "No user variables defined.")


def _magic_who_ls(args, ctx):
    return _filtered_names(args, ctx)


def _short_value(value):
    try:
        text = repr(value)
    except Exception:
        text = "<%s>" % type(value).__name__
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


def _magic_whos(args, ctx):
    names = _filtered_names(args, ctx)
    if not names:
        print("No user variables defined.")
        return
    rows = [(n, type(ctx.globals[n]).__name__, _short_value(ctx.globals[n])) for n in names]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(("Name", "Type", "Value"))]
    print("  ".join(h.ljust(w) for h, w in zip(("Name", "Type", "Value"), widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def _reset_namespace(ns):
    kept = {name: ns[name] for name in _BASE_NAMES if name in ns}
    ns.clear()
    ns.update(kept)
    ns.update(_state.protected)
    ns["__veyyon__"] = _runtime


def _magic_reset(args, ctx):
    unknown = [a for a in args.split() if a not in ("-f", "-s")]
    if unknown:
        raise UsageError("%reset accepts only -f and -s, got %s" % " ".join(unknown))
    _reset_namespace(ctx.globals)


def _magic_load(args, ctx):
    path = _single_path(args)
    if not path:
        raise UsageError("usage: %load <path>")
    path = os.path.abspath(os.path.expanduser(path))
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    value = _execute(source, path, ctx.globals, register=False)
    return None if value is _NO_VALUE else value


def _magic_run(args, ctx):
    import runpy

    argv = _split_args(args)
    interactive = False
    while argv and argv[0] in ("-i",):
        interactive = True
        argv.pop(0)
    if not argv:
        raise UsageError("usage: %run [-i] <path> [args...]")
    path = os.path.expanduser(argv[0])
    if not os.path.exists(path) and os.path.exists(path + ".py"):
        path += ".py"
    saved_argv = sys.argv
    sys.argv = [path] + argv[1:]
    try:
        init = {k: v for k, v in ctx.globals.items() if not k.startswith("__")} if interactive else None
        result = runpy.run_path(path, init_globals=init, run_name="__main__")
    finally:
        sys.argv = saved_argv
    for name, value in result.items():
        if not (name.startswith("__") and name.endswith("__")):
            ctx.globals[name] = value


def _canonical_name(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _distributions():
    from importlib import metadata

    found = {}
    for dist in metadata.distributions():
        try:
            name = dist.metadata["Name"]
        except Exception:
            continue
        if name:
            found.setdefault(_canonical_name(name), (dist.version, dist))
    return found


def _top_level_names(dist, key):
    names = set()
    try:
        text = dist.read_text("top_level.txt")
    except Exception:
        text = None
    if text:
        names.update(line.strip() for line in text.splitlines())
    else:
        for path in dist.files or ():
            first = path.parts[0] if path.parts else ""
            if first.endswith(".py"):
                names.add(first[:-3])
            elif "." not in first and first not in ("", "__pycache__"):
                names.add(first)
    if not names:
        names.add(key.replace("-", "_"))
    return {name for name in names if name.isidentifier()}


def modules_to_evict(top_names, module_names):
    """Modules in module_names that belong to one of the top-level packages top_names."""
    tops = set(top_names) - {"sys", "builtins", "__main__", "veyyon_runtime"}
    return [name for name in module_names if name.partition(".")[0] in tops]


def _evict_changed(before, after):
    tops = set()
    for key, (version, dist) in after.items():
        if key not in before or before[key][0] != version:
            tops.update(_top_level_names(dist, key))
    for key in set(before) - set(after):
        tops.add(key.replace("-", "_"))
    evicted = modules_to_evict(tops, list(sys.modules))
    for name in evicted:
        sys.modules.pop(name, None)
    return sorted({name.partition(".")[0] for name in evicted})


def _magic_pip(args, ctx):
    import importlib

    argv = _split_args(args)
    before = _distributions()
    status = run_process([sys.executable, "-m", "pip"] + argv)
    importlib.invalidate_caches()
    evicted = _evict_changed(before, _distributions())
    emit_status("pip", args=argv, exitCode=status, evicted=evicted)


def _magic_matplotlib(args, ctx):
    """Accepted for notebook compatibility: figures are always rendered after each cell."""


def _run_body(body, ctx):
    return _execute(body, ctx.filename, ctx.globals, line_offset=ctx.lineno, register=False)


def _cell_capture(line, body, ctx):
    options = _split_args(line)
    flags = {o for o in options if o.startswith("--")}
    names = [o for o in options if not o.startswith("-")]
    unknown = flags - {"--no-stdout", "--no-stderr", "--no-display"}
    if unknown or len(names) > 1:
        raise UsageError("usage: %%capture [--no-stdout] [--no-stderr] [--no-display] [name]")
    result = CapturedIO()
    if names:
        ctx.globals[names[0]] = result
    with _Capture(result, "--no-stdout" not in flags, "--no-stderr" not in flags, "--no-display" not in flags):
        value = _run_body(body, ctx)
        if value is not _NO_VALUE and value is not None:
            result.outputs.append(CapturedOutput(mime_bundle(value)))


def _cell_time(line, body, ctx):
    if line.strip():
        raise UsageError("Can't use statement directly after '%%time'!")
    value = _timed(lambda: _run_body(body, ctx))
    return None if value is _NO_VALUE else value


def _cell_timeit(line, body, ctx):
    options, setup = _parse_timeit_options(line)
    return _timeit(transform(body), setup, ctx, options)


def _cell_writefile(line, body, ctx):
    options = _split_args(line)
    append = any(o in ("-a", "--append") for o in options)
    paths = [o for o in options if o not in ("-a", "--append")]
    if len(paths) != 1:
        raise UsageError("usage: %%writefile [-a] <path>")
    path = os.path.expanduser(paths[0])
    existed = os.path.exists(path)
    with open(path, "a" if append else "w", encoding="utf-8") as handle:
        handle.write(body if body.endswith("\n") else body + "\n")
    verb = "Appending to" if append else ("Overwriting" if existed else "Writing")
    print("%s %s" % (verb, paths[0]))


_LINE_MAGICS.update({
    "pwd": _magic_pwd, "cd": _magic_cd, "ls": _magic_ls, "env": _magic_env, "set_env": _magic_set_env,
    "time": _magic_time, "timeit": _magic_timeit, "who": _magic_who, "who_ls": _magic_who_ls,
    "whos": _magic_whos, "reset": _magic_reset, "load": _magic_load, "run": _magic_run,
    "pip": _magic_pip, "matplotlib": _magic_matplotlib,
})
_CELL_MAGICS.update({
    "capture": _cell_capture,
    "time": _cell_time, "timeit": _cell_timeit, "writefile": _cell_writefile,
})


# ---------------------------------------------------------------------------
# Magics: the rest of IPython's builtin set. Each works as in IPython or raises a UsageError
# that says it is not supported here (and why); see _UNSUPPORTED_MAGICS.


def _run_script(argv, body, line_options):
    """%%script and its named forms: run argv with the body on stdin, as IPython does."""
    import subprocess
    import tempfile

    out_name = err_name = None
    raise_error = True
    rest = []
    options = list(line_options)
    while options:
        option = options.pop(0)
        if option in ("--out", "--err", "--proc") and options:
            if option == "--proc":
                raise UsageError("%%script --proc needs a background process, which is not supported here")
            if option == "--out":
                out_name = options.pop(0)
            else:
                err_name = options.pop(0)
        elif option == "--bg":
            raise UsageError("%%script --bg (background scripts) is not supported here: a cell's processes end with it")
        elif option == "--no-raise-error":
            raise_error = False
        else:
            rest.append(option)
    argv = argv + rest
    if not argv:
        raise UsageError("usage: %%script [--out VAR] [--err VAR] [--no-raise-error] program [args...]")
    if not body.endswith("\n"):
        body += "\n"
    collected = {"stdout": [], "stderr": []}
    sinks = (collected["stdout"].append if out_name else None, collected["stderr"].append if err_name else None)
    with tempfile.TemporaryFile() as stdin:
        stdin.write(body.encode("utf-8", "replace"))
        stdin.seek(0)
        try:
            status = run_process(argv, stdin=stdin, sinks=sinks)
        except FileNotFoundError:
            print("Couldn't find program: %r" % argv[0])
            return None
    namespace = _state.namespace
    if out_name:
        namespace[out_name] = "".join(collected["stdout"])
    if err_name:
        namespace[err_name] = "".join(collected["stderr"])
    if raise_error and status != 0:
        raise subprocess.CalledProcessError(status, body)
    return None


def _cell_script(line, body, ctx):
    return _run_script([], body, _split_args(line))


def _named_script(program):
    def run(line, body, ctx):
        return _run_script([program], body, _split_args(line))
    return run


def _cell_sx(line, body, ctx):
    return _magic_sx(body, ctx)


class _DisplayObject:
    """What %%html, %%svg, %%markdown, %%latex and %%javascript display (IPython.display's classes)."""

    def __init__(self, kind, mime, data):
        self._kind = kind
        self._bundle = {mime: data}

    def _repr_mimebundle_(self, include=None, exclude=None):
        return dict(self._bundle)

    def __repr__(self):
        return "<IPython.core.display.%s object>" % self._kind


def _display_cell(kind, mime):
    def run(line, body, ctx):
        options = _split_args(line)
        if kind == "HTML" and options and options != ["--isolated"]:
            raise UsageError("usage: %%html [--isolated]")
        display(_DisplayObject(kind, mime, body if body.endswith("\n") else body + "\n"))
    return run


def _shell_alias(command):
    """IPython's default shell aliases (%cat, %cp, %ll, ...): run the command with the arguments appended."""
    def run(args, ctx):
        status = run_process(_shell_argv("%s %s" % (command, args) if args.strip() else command))
        ctx.globals["_exit_code"] = status
    return run


def _magic_sx(args, ctx):
    lines, ctx.globals["_exit_code"] = _shell_output(args)
    return lines


def _magic_pushd(args, ctx):
    previous = os.getcwd()
    _magic_cd(args, ctx)
    _state.dir_stack.insert(0, previous)
    return list(_state.dir_stack)


def _magic_popd(args, ctx):
    if not _state.dir_stack:
        raise UsageError("%popd on empty stack")
    target = _state.dir_stack.pop(0)
    previous = os.getcwd()
    os.chdir(target)
    _state.previous_dir = previous
    print(os.getcwd())
    emit_status("cd", path=os.getcwd())
    print("popd -> %s" % target)


def _magic_dirs(args, ctx):
    return list(_state.dir_stack)


def _magic_xmode(args, ctx):
    modes = {"context": "Context", "plain": "Plain", "verbose": "Verbose", "minimal": "Minimal"}
    wanted = args.strip().lower()
    if not wanted:
        order = ["Plain", "Context", "Verbose", "Minimal"]
        mode = order[(order.index(_state.xmode) + 1) % len(order)]
    elif wanted in modes:
        mode = modes[wanted]
    else:
        raise ValueError("Unrecognized mode in FormattedTB: <%s>\nValid modes: %s" % (args.strip(), list(modes.values())))
    _state.xmode = mode
    print("Exception reporting mode: %s" % mode)


def _magic_precision(args, ctx):
    text = args.strip()
    numpy = sys.modules.get("numpy")
    if not text:
        _state.float_format = None
        if numpy is not None:
            numpy.set_printoptions(precision=8)
        return "%r"
    if "%" in text:
        try:
            text % 3.14159
        except Exception:
            raise ValueError("Precision must be int or format string, not %r" % text)
        _state.float_format = text
        if numpy is not None:
            numpy.set_printoptions(precision=8)
        return text
    try:
        digits = int(text)
    except ValueError:
        raise ValueError("Precision must be int or format string, not %r" % text)
    if digits < 0:
        raise ValueError("Precision must be int or format string, not %r" % text)
    _state.float_format = "%%.%if" % digits
    if numpy is not None:
        numpy.set_printoptions(precision=digits)
    return _state.float_format


def _pretty_float(obj, p, cycle):
    fmt = _state.float_format
    p.text(repr(obj) if fmt is None else fmt % obj)


def _magic_pprint(args, ctx):
    _state.pretty_printing = not _state.pretty_printing
    print("Pretty printing has been turned %s" % ("ON" if _state.pretty_printing else "OFF"))


def _magic_xdel(args, ctx):
    name = args.strip()
    if not name:
        raise UsageError("usage: %xdel <variable>")
    try:
        del ctx.globals[name]
    except KeyError:
        raise NameError("name '%s' is not defined" % name)


def _magic_reset_selective(args, ctx):
    parts = [part for part in args.split() if part != "-f"]
    if len(parts) != 1:
        raise UsageError("usage: %reset_selective [-f] <regex>")
    pattern = re.compile(parts[0])
    for name in user_names(ctx.globals):
        if pattern.search(name):
            del ctx.globals[name]


def _magic_tb(args, ctx):
    if _state.last_traceback is None:
        raise UsageError("No traceback available to show.")
    print("\n".join(_state.last_traceback))


def _magic_history(args, ctx):
    options = args.split()
    numbered = "-n" in options
    ranges = [o for o in options if not o.startswith("-")]
    unknown = [o for o in options if o.startswith("-") and o != "-n"]
    if unknown:
        raise UsageError("%%history here supports -n and ranges (N, N-M), not %s" % " ".join(unknown))
    history = _state.history
    selected = []
    for item in ranges or ["1-%d" % len(history)]:
        match = re.match(r"^(\d+)(?:-(\d+))?$", item)
        if match is None:
            raise UsageError("%%history: cannot read the range %r (use N or N-M)" % item)
        start = int(match.group(1))
        end = int(match.group(2) or start)
        selected.extend(n for n in range(start, end + 1) if n in history)
    for number in selected:
        source = history[number]
        if numbered:
            lines = source.split("\n")
            print("%4d: %s" % (number, lines[0]) + "".join("\n      " + line for line in lines[1:]))
        else:
            print(source)


def _magic_page(args, ctx):
    name = args.strip().split(" ")[-1] if args.strip() else ""
    if not name:
        raise UsageError("usage: %page <object>")
    print(pretty(eval(name, ctx.globals, ctx.locals)))


def _magic_pycat(args, ctx):
    path = _single_path(args)
    if not path:
        raise UsageError("usage: %pycat <path>")
    with open(os.path.expanduser(path), encoding="utf-8", errors="replace") as handle:
        print(handle.read(), end="")


def _inspected(args, ctx, what):
    import inspect

    name = args.strip()
    if not name:
        raise UsageError("usage: %%%s <object>" % what)
    try:
        obj = eval(name, ctx.globals, ctx.locals)
    except Exception:
        print("Object `%s` not found." % name)
        return None, None, inspect
    return name, obj, inspect


def _magic_pdoc(args, ctx):
    name, obj, inspect = _inspected(args, ctx, "pdoc")
    if name is not None:
        print(inspect.getdoc(obj) or "No documentation found for %s" % name)


def _magic_pdef(args, ctx):
    name, obj, inspect = _inspected(args, ctx, "pdef")
    if name is None:
        return
    try:
        print(" %s%s" % (name, inspect.signature(obj)))
    except (TypeError, ValueError):
        print("No definition header found for %s" % name)


def _magic_psource(args, ctx):
    name, obj, inspect = _inspected(args, ctx, "psource")
    if name is None:
        return
    try:
        print(inspect.getsource(obj), end="")
    except (TypeError, OSError):
        print("No source found for %s" % name)


def _magic_pfile(args, ctx):
    name, obj, inspect = _inspected(args, ctx, "pfile")
    if name is None:
        return
    try:
        path = inspect.getsourcefile(obj)
        with open(path, encoding="utf-8", errors="replace") as handle:
            print(handle.read(), end="")
    except (TypeError, OSError):
        print("No file found for %s" % name)


def _magic_pinfo(args, ctx):
    text = args.strip().rstrip("?")
    name, obj, inspect = _inspected(text, ctx, "pinfo")
    if name is None:
        return
    lines = []
    try:
        lines.append("Signature: %s%s" % (name, inspect.signature(obj)))
    except (TypeError, ValueError):
        pass
    if not callable(obj) or isinstance(obj, type):
        lines.append("Type:      %s" % type(obj).__name__)
        lines.append("String form: %s" % _short_value(obj))
    doc = inspect.getdoc(obj)
    lines.append("Docstring: %s" % (doc if doc else "<no docstring>"))
    try:
        lines.append("File:      %s" % inspect.getsourcefile(obj))
    except TypeError:
        pass
    if callable(obj) and not isinstance(obj, type):
        lines.append("Type:      %s" % type(obj).__name__)
    print("\n".join(lines))


def _magic_psearch(args, ctx):
    import fnmatch

    pattern = args.strip()
    if not pattern:
        raise UsageError("usage: %psearch <pattern with * and ?>")
    names = sorted(set(ctx.globals) | set(dir(builtins)))
    for name in names:
        if fnmatch.fnmatchcase(name, pattern) and not name.startswith("_"):
            print(name)


def _magic_alias_magic(args, ctx):
    parts = _split_args(args)
    kinds = {p for p in parts if p in ("-l", "--line", "-c", "--cell")}
    names = [p.lstrip("%") for p in parts if p not in kinds]
    if len(names) != 2:
        raise UsageError("usage: %alias_magic [-l] [-c] NAME TARGET")
    new, target = names
    line = not kinds or kinds & {"-l", "--line"}
    cell = not kinds or kinds & {"-c", "--cell"}
    found = False
    if line and target in _LINE_MAGICS:
        _LINE_MAGICS[new] = _LINE_MAGICS[target]
        print("Created `%%%s` as an alias for `%%%s`." % (new, target))
        found = True
    if cell and target in _CELL_MAGICS:
        _CELL_MAGICS[new] = _CELL_MAGICS[target]
        print("Created `%%%%%s` as an alias for `%%%%%s`." % (new, target))
        found = True
    if not found:
        raise UsageError("Magic `%s` not found." % target)


def _magic_lsmagic(args, ctx):
    line = "  ".join("%" + name for name in sorted(_LINE_MAGICS))
    cell = "  ".join("%%" + name for name in sorted(_CELL_MAGICS))
    print("Available line magics:\n%s\n\nAvailable cell magics:\n%s\n\nAutomagic is OFF, %% prefix IS needed for "
          "line magics.\n\nNot supported here: %s" % (line, cell, "  ".join(sorted(_UNSUPPORTED_MAGICS))))


def _magic_magic(args, ctx):
    print("IPython's magic functions work in cells here: %name args (line magics) and %%name on a cell's first "
          "line (cell magics); !cmd runs a shell command and var = !cmd captures its output. %lsmagic lists them.")


def _magic_config(args, ctx):
    text = args.strip()
    match = re.match(r"^InlineBackend\.(figure_formats?)\s*=\s*(.+)$", text)
    if match is None:
        raise UsageError("%%config here supports only InlineBackend.figure_format(s) = ... (got %r)" % text)
    try:
        value = ast.literal_eval(match.group(2).strip())
    except (ValueError, SyntaxError):
        raise UsageError("%%config: cannot read %s" % match.group(2))
    formats = [value] if isinstance(value, str) else list(value)
    allowed = {"png", "retina", "svg", "pdf"}
    if not formats or not all(isinstance(f, str) and f in allowed for f in formats):
        raise ValueError("supported formats are: %s not %s" % (", ".join(repr(f) for f in sorted(allowed)), value))
    _figure_formats[:] = formats


def _magic_conda(args, ctx):
    import shutil

    for program in ("conda", "mamba", "micromamba"):
        path = shutil.which(program)
        if path is not None:
            argv = _split_args(args)
            if argv and argv[0] in ("install", "remove", "update", "uninstall") and "--prefix" not in argv \
                    and "-p" not in argv:
                argv[1:1] = ["--prefix", sys.prefix]
            status = run_process([path] + argv)
            if status != 0:
                print("Note: %s exited with status %d" % (program, status))
            return None
    raise UsageError("The conda command could not be found on PATH; %conda works only in a conda environment.")


def _magic_prun(args, ctx):
    options, stmt = _parse_prun_options(args)
    return _prun(transform(stmt), ctx, options)


def _cell_prun(line, body, ctx):
    options, stmt = _parse_prun_options(line)
    return _prun(transform(stmt + "\n" + body if stmt.strip() else body), ctx, options)


def _parse_prun_options(args):
    options = {"sort": [], "limit": [], "return": False, "quiet": False, "dump": None, "text": None}
    rest = args.strip()
    while rest.startswith("-"):
        match = re.match(r"-([slDT])\s*(\S+)\s*|-([rq]+)(?=\s|$)\s*", rest)
        if match is None:
            break
        if match.group(1) == "s":
            options["sort"].append(match.group(2))
        elif match.group(1) == "l":
            limit = match.group(2)
            options["limit"].append(int(limit) if limit.isdigit() else float(limit) if re.match(r"^\d*\.\d+$", limit)
                                    else limit)
        elif match.group(1) == "D":
            options["dump"] = match.group(2)
        elif match.group(1) == "T":
            options["text"] = match.group(2)
        else:
            options["return"] = options["return"] or "r" in match.group(3)
            options["quiet"] = options["quiet"] or "q" in match.group(3)
        rest = rest[match.end():]
    return options, rest


def _prun(code_text, ctx, options):
    import cProfile
    import pstats

    profile = cProfile.Profile()
    code = compile(code_text or "pass", "<string>", "exec", dont_inherit=True)
    try:
        profile.runctx(code, ctx.globals, ctx.locals)
    except SystemExit:
        pass
    stream = io.StringIO()
    stats = pstats.Stats(profile, stream=stream)
    stats.strip_dirs().sort_stats(*(options["sort"] or ["time"]))
    stats.print_stats(*options["limit"])
    text = stream.getvalue().rstrip()
    if not options["quiet"]:
        print(text)
    if options["dump"]:
        profile.dump_stats(options["dump"])
        print("\n*** Profile stats marshalled to file %r." % options["dump"])
    if options["text"]:
        with open(options["text"], "w", encoding="utf-8") as handle:
            handle.write(text)
        print("\n*** Profile printout saved to text file %r." % options["text"])
    return stats if options["return"] else None


_IPYTHON_EXTENSIONS = frozenset({"autoreload", "storemagic"})


def _magic_load_ext(args, ctx):
    import importlib

    name = args.strip()
    if not name:
        raise UsageError("Missing module name.")
    if name in _IPYTHON_EXTENSIONS:
        raise UsageError("%%load_ext %s: IPython's own extension %s needs the IPython shell, which this kernel is "
                         "not; use importlib.reload() to reload a changed module" % (name, name))
    if name in _state.extensions:
        print("The %s extension is already loaded. To reload it, use:\n  %%reload_ext %s" % (name, name))
        return None
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        raise ModuleNotFoundError("No module named %r" % name, name=name) from None
    _load_extension(name, module)
    return None


def _load_extension(name, module):
    load = getattr(module, "load_ipython_extension", None)
    if load is not None:
        try:
            load(_ExtensionShell())
        except _ShellFeatureMissing as exc:
            raise UsageError("the %s extension needs the IPython shell's %s, which this kernel does not have"
                             % (name, exc))
    _state.extensions[name] = module


def _magic_reload_ext(args, ctx):
    import importlib

    name = args.strip()
    if not name:
        raise UsageError("Missing module name.")
    module = _state.extensions.pop(name, None)
    if module is not None:
        unload = getattr(module, "unload_ipython_extension", None)
        if unload is not None:
            unload(_ExtensionShell())
        module = importlib.reload(module)
    else:
        module = importlib.import_module(name)
    _load_extension(name, module)


def _magic_unload_ext(args, ctx):
    name = args.strip()
    module = _state.extensions.get(name)
    if module is None:
        print("The %s extension is not loaded." % name)
        return
    unload = getattr(module, "unload_ipython_extension", None)
    if unload is None:
        print("The %s extension doesn't define how to unload it." % name)
        return
    unload(_ExtensionShell())
    del _state.extensions[name]


class _ShellFeatureMissing(AttributeError):
    pass


class _ExtensionShell:
    """The part of IPython's shell an extension's load_ipython_extension(ip) may use here."""

    @property
    def user_ns(self):
        return _state.namespace

    def push(self, variables, interactive=True):
        """Put names into the user namespace."""
        _state.namespace.update(variables)

    def register_magic_function(self, func, magic_kind="line", magic_name=None):
        """Register func as a %name (line) or %%name (cell) magic."""
        name = magic_name or func.__name__
        if magic_kind == "cell":
            register_cell_magic(name, func)
        elif magic_kind == "line_cell":
            register_line_magic(name, lambda line: func(line, None))
            register_cell_magic(name, func)
        else:
            register_line_magic(name, func)

    def __getattr__(self, name):
        raise _ShellFeatureMissing(name)


_UNSUPPORTED_MAGICS = {
    "alias": "shell aliases cannot be defined; use !cmd or %%bash",
    "unalias": "shell aliases cannot be defined",
    "autoawait": "top-level await always works here",
    "autocall": "automatic calling (f x for f(x)) is not available",
    "automagic": "automagic is off: magics need their % prefix",
    "autosave": "there is no notebook to save",
    "bookmark": "directory bookmarks are not kept; use %cd with a path",
    "dhist": "the directory history is not kept; %dirs shows the %pushd stack",
    "clear": "the output area cannot be cleared",
    "colors": "output is not coloured",
    "connect_info": "the kernel has no Jupyter connection file",
    "qtconsole": "the kernel has no Jupyter connection",
    "notebook": "there is no notebook to export; the host can export a session as .ipynb",
    "debug": "interactive debuggers need a terminal; the kernel's stdin carries requests",
    "pdb": "interactive debuggers need a terminal; the kernel's stdin carries requests",
    "doctest_mode": "the prompts cannot change",
    "ed": "editors need a terminal",
    "edit": "editors need a terminal",
    "gui": "GUI event loops are not integrated; figures render inline",
    "pylab": "use import numpy as np; import matplotlib.pyplot as plt (figures render inline)",
    "killbgscripts": "%%script --bg is not supported, so there are no background scripts",
    "logoff": "session logging is not available",
    "logon": "session logging is not available",
    "logstart": "session logging is not available",
    "logstate": "session logging is not available",
    "logstop": "session logging is not available",
    "macro": "macros are not available",
    "pastebin": "nothing is uploaded from the kernel",
    "quickref": "use %lsmagic and %magic",
    "recall": "there is no input line to edit",
    "rep": "there is no input line to edit",
    "rerun": "cells cannot be re-run from inside the kernel; send them again",
    "save": "use %%writefile to write code to a file",
    "rehashx": "shell aliases are not kept",
    "sc": "%sc is deprecated in IPython; use var = !cmd",
    "store": "no state is kept across kernels",
    "autoreload": "IPython's autoreload extension needs the IPython shell; use importlib.reload()",
    "debug_cell": "interactive debuggers need a terminal",
}


def _unsupported(name):
    reason = _UNSUPPORTED_MAGICS[name]

    def run(*args):
        raise UsageError("%%%s is an IPython magic that is not supported here: %s." % (name, reason))
    return run


_LINE_MAGICS.update({
    "sx": _magic_sx, "system": _magic_sx, "pushd": _magic_pushd, "popd": _magic_popd, "dirs": _magic_dirs,
    "xmode": _magic_xmode, "precision": _magic_precision, "pprint": _magic_pprint, "xdel": _magic_xdel,
    "reset_selective": _magic_reset_selective, "tb": _magic_tb, "history": _magic_history, "hist": _magic_history,
    "page": _magic_page, "pycat": _magic_pycat, "less": _magic_pycat, "more": _magic_pycat, "pdoc": _magic_pdoc,
    "pdef": _magic_pdef, "psource": _magic_psource, "pfile": _magic_pfile, "pinfo": _magic_pinfo,
    "pinfo2": _magic_pinfo, "psearch": _magic_psearch, "alias_magic": _magic_alias_magic, "lsmagic": _magic_lsmagic,
    "magic": _magic_magic, "config": _magic_config, "conda": _magic_conda, "mamba": _magic_conda,
    "micromamba": _magic_conda, "prun": _magic_prun, "load_ext": _magic_load_ext, "reload_ext": _magic_reload_ext,
    "unload_ext": _magic_unload_ext, "loadpy": _magic_load,
    "cat": _shell_alias("cat"), "cp": _shell_alias("cp"), "mv": _shell_alias("mv"), "rm": _shell_alias("rm"),
    "mkdir": _shell_alias("mkdir"), "rmdir": _shell_alias("rmdir"), "man": _shell_alias("man"),
    "ll": _shell_alias("ls -F -o"), "lf": _shell_alias("ls -F -o | grep ^-"),
    "lk": _shell_alias("ls -F -o | grep ^l"), "lx": _shell_alias("ls -F -o | grep ^-..x"),
    "ldir": _shell_alias("ls -F -o | grep /$"),
})
_LINE_MAGICS.update({name: _unsupported(name) for name in _UNSUPPORTED_MAGICS if name != "debug_cell"})
_PRETTY_TYPES[float] = _pretty_float
_CELL_MAGICS.update({
    "file": _cell_writefile, "script": _cell_script, "!": _cell_sx, "sx": _cell_sx, "system": _cell_sx,
    "html": _display_cell("HTML", "text/html"), "HTML": _display_cell("HTML", "text/html"),
    "svg": _display_cell("SVG", "image/svg+xml"), "SVG": _display_cell("SVG", "image/svg+xml"),
    "markdown": _display_cell("Markdown", "text/markdown"), "latex": _display_cell("Latex", "text/latex"),
    "javascript": _display_cell("Javascript", "application/javascript"),
    "js": _display_cell("Javascript", "application/javascript"), "prun": _cell_prun,
    "debug": _unsupported("debug_cell"),
})
_CELL_MAGICS.update({name: _named_script(name) for name in ("perl", "ruby", "python", "python2", "pypy")})
_CELL_MAGICS["python3"] = _named_script("python3")
_CELL_MAGICS["bash"] = _named_script("bash")
_CELL_MAGICS["sh"] = _named_script("sh")


# ---------------------------------------------------------------------------
# Requests


class Request:
    """One execute request from the host."""

    __slots__ = ("id", "code", "silent", "store_history", "cwd", "env")

    def __init__(self, request_id, code, silent=False, store_history=True, cwd=None, env=None):
        self.id = request_id
        self.code = code
        self.silent = silent
        self.store_history = store_history
        self.cwd = cwd
        self.env = env


def _parse_request(message):
    request_id = message.get("id")
    if not isinstance(request_id, str):
        return ("invalid", (None, "request id must be a string, got %s" % type(request_id).__name__))

    def invalid(text):
        return ("invalid", (request_id, text))

    code = message.get("code")
    if not isinstance(code, str):
        return invalid("request %r: code must be a string" % request_id)
    silent = message.get("silent", False)
    store_history = message.get("storeHistory", True)
    if not isinstance(silent, bool) or not isinstance(store_history, bool):
        return invalid("request %r: silent and storeHistory must be booleans" % request_id)
    cwd = message.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        return invalid("request %r: cwd must be a string" % request_id)
    env = message.get("env")
    if env is not None:
        if not isinstance(env, dict) or not all(
                isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in env.items()):
            return invalid("request %r: env must map names to strings (or null to unset)" % request_id)
    return ("execute", Request(request_id, code, silent, store_history, cwd, env))


def classify_line(line):
    """Decode one host line: ("execute", Request) | ("exit", None) | ("bridge_result", dict) | ("invalid", (id, why))."""
    try:
        message = json.loads(line)
    except Exception as exc:
        return ("invalid", (None, "malformed request line (not JSON): %s" % exc))
    if not isinstance(message, dict):
        return ("invalid", (None, "malformed request line: expected a JSON object, got %s"
                            % type(message).__name__))
    kind = message.get("type")
    if kind == "exit":
        return ("exit", None)
    if kind == "bridge_result":
        if not isinstance(message.get("callId"), str):
            return ("invalid", (None, "bridge_result without a string callId"))
        return ("bridge_result", message)
    if kind in ("complete", "inspect"):
        return _parse_introspect(message)
    if kind not in (None, "execute"):
        request_id = message.get("id") if isinstance(message.get("id"), str) else None
        return ("invalid", (request_id, "unknown message type %r" % (kind,)))
    return _parse_request(message)


# ---------------------------------------------------------------------------
# Introspection: complete and inspect requests
#
# Answered on a thread of their own, beside any running cell: they read the namespace
# and never run cell code on purpose (attribute chains are looked up statically; only
# the builtin descriptors of functions and methods are bound), touch no execution count,
# and answer once with a complete_reply or inspect_reply frame carrying the request's id.
# At most _INTROSPECT_THREADS are busy at once (one stuck in a __dir__ leaves room).

import inspect as _inspect
import keyword as _keyword
import pkgutil as _pkgutil
import rlcompleter as _rlcompleter

MAX_COMPLETIONS = 500
MAX_INSPECT_CHARS = 65536
MAX_INTROSPECT_CODE = 1 << 20
_INTROSPECT_THREADS = 4
_introspect_slots = threading.BoundedSemaphore(_INTROSPECT_THREADS)
_MISSING = object()
_NAME_CHAIN = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*$")


def _parse_introspect(message):
    """(kind, id, code, cursor, detail) for a complete/inspect line, or ("invalid", (id, why))."""
    request_id = message.get("id")
    if not isinstance(request_id, str):
        return ("invalid", (None, "%s request id must be a string" % message.get("type")))
    code, cursor = message.get("code"), message.get("cursorPos")
    if not isinstance(code, str) or len(code) > MAX_INTROSPECT_CODE:
        return ("invalid", (request_id, "code must be a string of at most %d characters" % MAX_INTROSPECT_CODE))
    if isinstance(cursor, bool) or not isinstance(cursor, int) or not 0 <= cursor <= len(code):
        cursor = len(code)
    detail = 1 if message.get("detailLevel") == 1 else 0
    return (message["type"], (request_id, code, cursor, detail))


def _start_introspection(kind, payload):
    request_id = payload[0]
    if not _introspect_slots.acquire(blocking=False):
        _introspection_failed(kind, request_id, "the kernel is still answering earlier completion requests")
        return
    threading.Thread(target=_introspect, args=(kind, payload), name="veyyon-introspect", daemon=True).start()


def _introspect(kind, payload):
    request_id, code, cursor, detail = payload
    try:
        if kind == "complete":
            matches, start = complete(code, cursor)
            _send({"type": "complete_reply", "id": request_id, "matches": matches,
                   "cursorStart": start, "cursorEnd": cursor})
        else:
            text = inspect_text(code, cursor, detail)
            _send({"type": "inspect_reply", "id": request_id, "found": text is not None,
                   "bundle": {} if text is None else {"text/plain": text}})
    except BaseException as exc:
        _introspection_failed(kind, request_id, "%s: %s" % (type(exc).__name__, exc))
    finally:
        _introspect_slots.release()


def _introspection_failed(kind, request_id, why):
    reply = {"type": kind + "_reply", "id": request_id, "error": why[:1000]}
    reply.update({"matches": [], "cursorStart": 0, "cursorEnd": 0} if kind == "complete" else {"found": False, "bundle": {}})
    _send(reply)


def _static_attr(obj, name):
    """obj.name without running user code: instance and module values as stored, builtin descriptors bound."""
    try:
        value = _inspect.getattr_static(obj, name)
    except AttributeError:
        return _MISSING
    if isinstance(obj, types.ModuleType):
        return value
    try:
        own = not isinstance(obj, type) and name in object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        own = False
    getter = getattr(type(value), "__get__", None)
    if own or getter is None or isinstance(value, property) or type(value).__module__ != "builtins":
        return value
    try:
        return getter(value, None, obj) if isinstance(obj, type) else getter(value, obj, type(obj))
    except Exception:
        return value


def _resolve(chain):
    """The object a dotted name chain names in the user namespace (or builtins), or _MISSING."""
    parts = chain.split(".")
    ns = _state.namespace or {}
    obj = ns.get(parts[0], _MISSING)
    if obj is _MISSING:
        obj = getattr(builtins, parts[0], _MISSING)
    for part in parts[1:]:
        if obj is _MISSING:
            break
        obj = _static_attr(obj, part)
    return obj


def _names_of(obj):
    try:
        names = dir(obj)
    except Exception:
        names = []
    return [n for n in names if isinstance(n, str)]


def _module_names(package):
    if not package:
        names = set(sys.builtin_module_names)
        names.update(m.name for m in _pkgutil.iter_modules())
        return names
    module = sys.modules.get(package)
    path = getattr(module, "__path__", None) if module is not None else None
    return set(m.name for m in _pkgutil.iter_modules(path)) if path else set()


def _open_call(before):
    """The dotted callee of the innermost call still open before the cursor, or None."""
    depth = 0
    for index in range(len(before) - 1, -1, -1):
        char = before[index]
        if char in ")]}":
            depth += 1
        elif char in "([{":
            if depth == 0:
                if char != "(":
                    return None
                match = _NAME_CHAIN.search(before[:index].rstrip())
                return match.group(0) if match else None
            depth -= 1
    return None


def _keyword_args(callee, prefix):
    obj = _resolve(callee)
    if obj is _MISSING:
        return []
    try:
        params = _inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return []
    kinds = (_inspect.Parameter.POSITIONAL_OR_KEYWORD, _inspect.Parameter.KEYWORD_ONLY)
    return [p.name + "=" for p in params if p.kind in kinds and p.name.startswith(prefix)]


def _visible(names, prefix):
    hide = not prefix.startswith("_")
    return sorted(set(n for n in names if n.startswith(prefix) and not (hide and n.startswith("_"))))


def complete(code, cursor):
    """(matches, cursor_start) for the token before cursor: magics, modules, attributes, keyword args, names."""
    before = code[:cursor]
    line = before[before.rfind("\n") + 1:]
    magic = re.match(r"\s*(%%?)(\w*)$", line)
    if magic:
        table = _CELL_MAGICS if magic.group(1) == "%%" else _LINE_MAGICS
        names = [magic.group(1) + n for n in sorted(table) if n.startswith(magic.group(2))]
        return names[:MAX_COMPLETIONS], cursor - len(magic.group(1)) - len(magic.group(2))
    imported = re.match(r"\s*from\s+([\w.]+)\s+import\s+(?:[\w\s,]*,\s*)?(\w*)$", line)
    if imported:
        module, prefix = imported.group(1), imported.group(2)
        names = _module_names(module)
        if module in sys.modules:
            names.update(_names_of(sys.modules[module]))
        return _visible(names, prefix)[:MAX_COMPLETIONS], cursor - len(prefix)
    importing = re.match(r"\s*(?:import|from)\s+(?:[\w.]+\s*,\s*)*([\w.]*)$", line)
    if importing:
        dotted = importing.group(1)
        package, _, prefix = dotted.rpartition(".")
        return _visible(_module_names(package), prefix)[:MAX_COMPLETIONS], cursor - len(prefix)
    attribute = re.search(r"([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)\.(\w*)$", line)
    if attribute:
        obj = _resolve(attribute.group(1))
        prefix = attribute.group(2)
        names = [] if obj is _MISSING else _visible(_names_of(obj), prefix)
        return names[:MAX_COMPLETIONS], cursor - len(prefix)
    prefix = re.search(r"\w*$", line).group(0)
    if prefix[:1].isdigit():
        return [], cursor
    callee = _open_call(before)
    first = _keyword_args(callee, prefix) if callee else []
    completer = _rlcompleter.Completer(dict(_state.namespace or {}))
    names = set()
    state = 0
    while len(names) < 4 * MAX_COMPLETIONS:
        match = completer.complete(prefix, state) if prefix else None
        if match is None:
            break
        names.add(match.rstrip("(: "))
        state += 1
    if not prefix:
        names.update(n for n in (_state.namespace or {}) if isinstance(n, str))
        names.update(_keyword.kwlist)
        names.update(dir(builtins))
    ordered = first + [n for n in _visible(names, prefix) if n + "=" not in first]
    return ordered[:MAX_COMPLETIONS], cursor - len(prefix)


def _name_at(code, cursor):
    """The dotted name under or just before the cursor, else the callee of the call it is in."""
    start = cursor
    while start > 0 and (code[start - 1].isalnum() or code[start - 1] in "_."):
        start -= 1
    end = cursor
    while end < len(code) and (code[end].isalnum() or code[end] == "_"):
        end += 1
    match = _NAME_CHAIN.match(code[start:end].strip("."))
    if match and match.group(0) == code[start:end].strip("."):
        return match.group(0)
    return _open_call(code[:cursor])


def _short(text, limit):
    return text if len(text) <= limit else text[:limit - 1] + "…"


def inspect_text(code, cursor, detail=0):
    """IPython-style `obj?` text (`obj??` with detail 1: the source too) for the name at cursor, or None."""
    name = _name_at(code, cursor)
    if not name:
        return None
    obj = _resolve(name)
    if obj is _MISSING:
        return None
    fields = []
    try:
        fields.append(("Signature", name.rpartition(".")[2] + str(_inspect.signature(obj))))
    except (TypeError, ValueError):
        pass
    if not callable(obj) or isinstance(obj, type):
        try:
            form = object.__repr__(obj) if isinstance(obj, property) else repr(obj)
        except Exception as exc:
            form = "<repr failed: %s>" % type(exc).__name__
        fields.append(("String form", _short(form, 1000)))
    try:
        length = len(obj) if isinstance(obj, (str, bytes, list, tuple, dict, set, frozenset)) else None
    except Exception:
        length = None
    if length is not None:
        fields.append(("Length", str(length)))
    try:
        source_file = _inspect.getsourcefile(obj) or _inspect.getfile(obj)
    except (TypeError, OSError):
        source_file = None
    if source_file:
        fields.append(("File", source_file))
    doc = _inspect.getdoc(obj)
    if detail and not isinstance(obj, types.ModuleType):
        try:
            fields.append(("Source", _inspect.getsource(obj).rstrip("\n")))
        except (TypeError, OSError):
            pass
    if doc and not (detail and fields and fields[-1][0] == "Source"):
        fields.append(("Docstring", doc))
    elif not doc and not (fields and fields[-1][0] == "Source"):
        fields.append(("Docstring", "<no docstring>"))
    fields.append(("Type", type(obj).__name__))
    text = "\n".join("%-12s %s" % (label + ":", value) if "\n" not in value else "%s:\n%s" % (label, value)
                     for label, value in fields)
    return _short(text, MAX_INSPECT_CHARS)



def _protocol_error(request_id, text):
    _send({"type": "error", "id": request_id, "ename": PROTOCOL_ERROR, "evalue": text,
           "traceback": ["%s: %s" % (PROTOCOL_ERROR, text)]})


def _diagnose(text):
    try:
        os.write(_diagnostic_fd, ("veyyon runner: %s\n" % text).encode("utf-8", "replace"))
    except OSError:
        pass


def _shutdown(status):
    _frame_lock.acquire(timeout=1.0)
    os._exit(status)


_END_OF_INPUT = object()
_PARENT_POLL_SECONDS = 1.0


def _read_requests(stream, requests):
    """Reader thread: route host lines; at EOF the queued requests still run, then the process ends."""
    while True:
        line = stream.readline()
        if not line:
            requests.put(_END_OF_INPUT)
            return
        if not line.strip():
            continue
        try:
            _route_line(line, requests)
        except Exception as exc:
            _diagnose("could not handle a host line: %s: %s" % (type(exc).__name__, exc))


def _route_line(line, requests):
    kind, payload = classify_line(line)
    if kind == "execute":
            requests.put(payload)
    elif kind == "exit":
        _shutdown(0)
    elif kind == "bridge_result":
        _resolve_bridge(payload)
    elif kind in ("complete", "inspect"):
        _start_introspection(kind, payload)
    else:
        request_id, text = payload
        if request_id is None:
            _protocol_error(None, text)
        else:
            requests.put(("invalid", request_id, text))


def _apply_context(request):
    if request.cwd is not None:
        os.chdir(request.cwd)
        cwd = os.getcwd()
        if cwd not in sys.path:
            sys.path.insert(0, cwd)
    if request.env:
        for key, value in request.env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


_boot_load = globals().get("__veyyon_boot_load__")


def _cached_prelude_code(source, filename):
    """The code of source from boot.py's cache when it is the prelude.py beside the runner, else None."""
    if _boot_load is None:
        return None
    try:
        with open(os.path.join(os.path.dirname(__file__), "prelude.py"), encoding="utf-8", newline="") as file:
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
    _send({"type": "result", "id": request.id, "bundle": bundle})


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
    _set_signal(_SIGINT, _on_sigint)
    try:
        _defer_started(request.id)
        try:
            _apply_context(request)
            if request.code.strip():
                _user_call(_run_cell, request, cell_filename(request))
        except BaseException as exc:
            failure = exc
        if request.code.strip():
            try:
                _user_call(_flush_figures)
            except BaseException as exc:
                failure = failure or exc
    finally:
        _set_signal(_SIGINT, _SIG_IGN)
        st.cell_active = False
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


def _serve(requests):
    while True:
        item = requests.get()
        if item is _END_OF_INPUT:
            _shutdown(0)
        try:
            if isinstance(item, tuple):
                _, request_id, text = item
                _protocol_error(request_id, text)
                _send({"type": "done", "id": request_id, "status": "error",
                       "executionCount": _state.execution_count, "cancelled": False})
            else:
                _handle_request(item)
        except BaseException as exc:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            _state.cell_active = False
            _diagnose("internal error: %s: %s" % (type(exc).__name__, exc))
            if isinstance(item, Request):
                _send({"type": "done", "id": item.id, "status": "error",
                       "executionCount": _state.execution_count, "cancelled": False})


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


def _build_runtime():
    module = types.ModuleType("veyyon_runtime", "Kernel services for the prelude and the magics.")
    for name in _RUNTIME_EXPORTS:
        setattr(module, name, globals()[name])
    return module


_runtime = _build_runtime()


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
    global _frame_fd, _redeliver_wake, _diagnostic_fd
    _frame_fd = os.dup(1)
    _diagnostic_fd = os.dup(2)
    _pipe_fd(1, _fd_pump)
    _pipe_fd(2, _fd2_pump)
    try:
        import faulthandler

        faulthandler.enable(_diagnostic_fd)
    except (ImportError, OSError, ValueError, RuntimeError):
        pass
    request_fd = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    wake_read, _redeliver_wake = os.pipe()
    os.set_blocking(_redeliver_wake, False)
    return request_fd, wake_read


def _install_namespace():
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    module.__dict__["__veyyon__"] = _runtime
    sys.modules["__main__"] = module
    _state.namespace = module.__dict__
    sys.modules["veyyon_runtime"] = _runtime
    builtins.display = display
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]


def main():
    """Serve the NDJSON protocol on stdin/stdout until an exit request, EOF, or the host's death."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    warnings.filterwarnings("ignore", message=".*non-interactive, and thus cannot be shown")
    request_fd, wake_read = _install_fds()
    _install_namespace()
    sys.stdout = _stdout
    sys.stderr = _stderr
    sys.stdin = _BlockingStdin()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    requests = queue.SimpleQueue()
    stream = io.open(request_fd, "rb")
    threading.Thread(target=_fd_pump.run, name="veyyon-stdout", daemon=True).start()
    threading.Thread(target=_fd2_pump.run, name="veyyon-stderr", daemon=True).start()
    threading.Thread(target=_redeliver_loop, args=(wake_read,), name="veyyon-sigint", daemon=True).start()
    threading.Thread(target=_read_requests, args=(stream, requests), name="veyyon-stdin", daemon=True).start()
    threading.Thread(target=_watch_parent, args=(os.getppid(),), name="veyyon-parent", daemon=True).start()
    _serve(requests)


_BOUNDARY_CODE = _user_call.__code__
_PLUMBING_CODES = frozenset(fn.__code__ for fn in (_user_call, _run_cell, _execute, _run_code, _run_coroutine,
                                                 _cached_prelude_code))
_CRITICAL_CODES = frozenset(fn.__code__ for fn in (
    _write_line, _send, _send_raw, _OutStream.write, _OutStream.flush, _FdPump.pump, _emit_display,
    emit_status, _bridge_open, _bridge_close, _bridge_status, _stop_process, _Capture.__enter__,
    _Capture.__exit__, _defer_started, _send_started, _StreamBuffer.add, _StreamBuffer.flush,
    _StreamBuffer._send_queued, _FdPump.pump_if_ready, _wake_ticker, _flush_streams, _flush_all_output,
))


if __name__ == "__main__":
    main()
