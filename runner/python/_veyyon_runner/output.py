"""Output capture: sys.stdout/sys.stderr proxies, the fd 1/2 pumps, %%capture, routing to frames."""

import codecs
import io
import os
import sys
import threading

from . import protocol
from .state import _deliver_pending, _state
from .protocol import _out, _send, encode_bundle_frame


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
            _send(None, encode_bundle_frame("display", _state.current_id, bundle))


_router = _Router()


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


# Audit events of a new process that shares the cell's fd 1 and 2.
_CHILD_EVENTS = frozenset(("os.system", "subprocess.Popen", "os.posix_spawn", "os.fork", "os.forkpty", "os.spawn"))


def _mark_fd_writes(fd):
    """After a write to fd 1 or 2, the cell's next stream write reads that fd's pump first."""
    if fd == 1:
        _fd_pump.seen = True
    elif fd == 2:
        _fd2_pump.seen = True


def _audit_children(event, args):
    if event in _CHILD_EVENTS:
        _fd_pump.seen = True
        _fd2_pump.seen = True


def _marking_fd_writes(original, name):
    """`original` (os.write or os.writev), marking fd 1 and 2 as written after each call."""

    def wrapper(fd, data):
        written = original(fd, data)
        if fd == 1 or fd == 2:
            _mark_fd_writes(fd)
        return written

    wrapper.__doc__, wrapper.__name__, wrapper.__qualname__ = original.__doc__, name, name
    return wrapper


def watch_fd_writers():
    """Keep a cell's output in the order it reached the OS: print and sys.stdout queue their text,
    while os.write and child processes write fd 1 (or 2) directly, and the pump reading that pipe may
    not run before the next print. So os.write/os.writev to fd 1 or 2 and starting a child process
    mark the fd's pump as written, and until the cell ends each stream write first reads what its
    pipes hold (one poll). Cells that do neither pay nothing. Writes by C code straight to fd 1 are
    ordered once the pump has read one of them in that cell."""
    for name in ("write", "writev"):
        original = getattr(os, name, None)
        if original is not None:
            setattr(os, name, _marking_fd_writes(original, name))
    sys.addaudithook(_audit_children)


def _after_fork_in_child():
    """In a forked child: fresh locks, nothing queued, no timer, and output sent per line (it may _exit any time)."""
    protocol._frame_lock = threading.Lock()
    protocol._started_line = None
    protocol._reader_due = None
    _out.lock = threading.RLock()
    _out.parts = []
    _out.size = 0
    _out.eager = True
    _fd_pump.lock = threading.RLock()
    _fd2_pump.lock = threading.RLock()
    protocol._ticker_awake = True
    protocol._ticker_thread = None
    protocol._ticker_event = threading.Event()


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


def _emit_display(bundle):
    _flush_streams()
    _router.display(bundle)
    if _state.pending:
        _deliver_pending()
