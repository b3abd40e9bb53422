"""The frame channel: encoding, the single writer to the private frame fd, the deferred started
frame, coalesced stdout/stderr text, the timer that sends what is due, and request parsing."""

import json
import os
import threading
import time

from .state import _state


STATUS_MIME = "application/x-veyyon-status"
CHUNK_CHARS = 64 * 1024


PROTOCOL_ERROR = "ProtocolError"


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


# A bundle value at least this long that is all base64 characters goes into its frame as it is.
RAW_VALUE_CHARS = 4096
_BASE64_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="


def _raw_value(value):
    """value's bytes when it is a long base64 string, which JSON writes as it is (None otherwise)."""
    if type(value) is not str or len(value) < RAW_VALUE_CHARS or not value.isascii():
        return None
    data = value.encode("ascii")
    return None if data.translate(None, _BASE64_CHARS) else data


def encode_bundle_frame(kind, request_id, bundle):
    """A display or result frame as encode_frame writes it, with long base64 values (image payloads)
    copied in as they are: the JSON encoder scans them character by character for nothing to escape,
    and the line is copied twice more (newline, UTF-8), about 8 of the 14 ms a 1 MiB image took."""
    raw = {}
    for mime, value in bundle.items():
        if type(mime) is not str:
            raw = {}
            break
        data = _raw_value(value)
        if data is not None:
            raw[mime] = data
    if not raw:
        return encode_frame({"type": kind, "id": request_id, "bundle": bundle})
    out = [b'{"type":', _json_line(kind), b',"id":', _json_line(request_id), b',"bundle":{']
    for index, (mime, value) in enumerate(bundle.items()):
        data = raw.get(mime)
        out.append(b"," if index else b"")
        out.append(_json_line(mime))
        out.extend((b":", _json_line(value)) if data is None else (b':"', data, b'"'))
    out.append(b"}}\n")
    return b"".join(out)


def _json_line(value):
    """value as JSON bytes, sanitized and escaped as encode_frame does it."""
    return encode_frame(value)[:-1]


_frame_fd = None
_diagnostic_fd = 2
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


def _send(frame, data=None):
    """Write frame (or its encoded line, data) after any queued stream text."""
    if _frame_fd is None:
        raise RuntimeError("the runner is not serving; frames have nowhere to go")
    if _out.parts:
        _out.flush()
    try:
        _write_line(encode_frame(frame) if data is None else data)
    except BrokenPipeError:
        os._exit(0)


def _send_parts(parts):
    """Write one frame given as byte strings back to back, with writev: a snapshot chunk's base64 is not copied
    into a line first (copying a few MB per chunk cost as much as encoding it)."""
    global _started_line
    if _out.parts:
        _out.flush()
    try:
        with _frame_lock:
            if _started_line is not None:
                parts = [_started_line] + list(parts)
                _started_line = None
            views = [memoryview(part) for part in parts]
            while views:
                written = os.writev(_frame_fd, views)
                while views and written >= len(views[0]):
                    written -= len(views[0])
                    views.pop(0)
                if views and written:
                    views[0] = views[0][written:]
    except BrokenPipeError:
        os._exit(0)


def _send_with_started(frame, data=None):
    """Send frame (or its encoded line, data); while the cell's started frame is still queued, queue it
    behind that instead, so both leave with the next write (a quick cell's started, result and done frames
    take one write)."""
    global _started_line
    if _out.parts:
        _out.flush()
    if data is None:
        data = encode_frame(frame)
    with _frame_lock:
        if _started_line is not None:
            _started_line += data
            return
    try:
        _write_line(data)
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
    global _started_line, _started_at, _reader_due
    _started_at = _monotonic()
    _reader_due = _started_at + _STARTED_SECONDS
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


# Bytes that JSON escapes and that plain text seldom holds: their presence sends a chunk to the
# general encoder. Backslash, quote, newline, tab and carriage return are escaped by replace().
# Below _SCAN_MIN_CHARS the general encoder is as quick.
_SCAN_MIN_CHARS = 512
_RARE_CONTROLS = tuple(bytes((c,)) for c in range(32) if c not in (9, 10, 13))
_COMMON_ESCAPES = ((b"\\", b"\\\\"), (b'"', b'\\"'), (b"\n", b"\\n"), (b"\t", b"\\t"), (b"\r", b"\\r"))


def _json_text_bytes(text):
    """text as a UTF-8 JSON string literal (quotes included), or None when it holds a lone surrogate.

    Text without rare control characters is escaped with a few bytes.replace() scans, several
    times faster than the json module's per-character encoder on large chunks."""
    if len(text) < _SCAN_MIN_CHARS:
        try:
            return _json_text(text).encode("utf-8")
        except UnicodeEncodeError:
            return None
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    for rare in _RARE_CONTROLS:
        if rare in data:
            return _json_text(text).encode("utf-8")
    for plain, escaped in _COMMON_ESCAPES:
        data = data.replace(plain, escaped)
    return b'"' + data + b'"'


def _stream_line(kind, request_id, text):
    """One stdout/stderr frame as bytes; lone surrogates are escaped."""
    rid = "null" if request_id is None else _json_string(request_id)
    literal = _json_text_bytes(text)
    if literal is None:
        return ('{"type":"%s","id":%s,"data":%s}\n' % (kind, rid, _json_string(text))).encode("ascii")
    return ('{"type":"%s","id":%s,"data":' % (kind, rid)).encode("ascii") + literal + b"}\n"


# A block this large is mmapped by glibc's malloc; freeing one raises its trim threshold to twice its size.
_HEAP_SETTLING_BYTES = 1 << 20


def settle_heap():
    """Free one large block, so glibc's malloc keeps the top of its heap between stream frames.

    Until a program frees a block large enough to have been mmapped, glibc returns the top of its
    heap to the OS whenever 128 KiB of it are free. A 64 KiB stream frame's temporaries (the joined
    text, its UTF-8 and escaped copies, the line) can pass that: in a measured flood each frame grew
    the heap by 192 KiB with brk and trimmed it again, faulting 48 fresh pages in, which took most of
    the runner's time where page faults are dear (in a VM). Freeing one mmapped block raises the
    threshold to twice its size, as any program's first such free does. Other allocators ignore it."""
    bytes(_HEAP_SETTLING_BYTES)


_FLUSH_SECONDS = 0.01
_STARTED_SECONDS = 0.001
_TICK_SECONDS = 0.002
_IDLE_TICKS = 5


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


# Set by the server: asks the request reader thread to read host lines beside the running cell.
_wake_reader = None


# When the running cell has run long enough to need host lines read beside it (None: no cell, or done).
_reader_due = None


def _reader_needed():
    """The running cell may wait for a host line (it runs past its started deadline, or calls the bridge)."""
    global _reader_due
    _reader_due = None
    if _wake_reader is not None:
        _wake_reader()


def _tick(now):
    """Send a started frame or queued output that is due; seconds to the next deadline, None if nothing waits."""
    delay = None
    if _started_line is not None:
        wait = _started_at + _STARTED_SECONDS - now
        if wait <= 0:
            _send_started()
        else:
            delay = wait
    if _reader_due is not None:
        wait = _reader_due - now
        if wait <= 0:
            _reader_needed()
        elif delay is None or wait < delay:
            delay = wait
    if _out.parts:
        wait = _out.since + _FLUSH_SECONDS - now
        if wait <= 0:
            _out.flush()
        elif delay is None or wait < delay:
            delay = wait
    return delay


def _tick_loop():
    """Timer thread body: tick while there is work, park after _IDLE_TICKS ticks without any.

    Cells that follow each other closely keep it ticking (cheaper than waking it for each); after a
    lone cell it parks within about _IDLE_TICKS * _TICK_SECONDS."""
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
            if _started_line is not None or _out.parts or _reader_due is not None:
                _wake_ticker()


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


class SnapshotRequest:
    """A snapshot request (PROTOCOL.md, Snapshots and restores)."""

    __slots__ = ("id", "budget", "value_budget", "known")

    def __init__(self, request_id, budget, value_budget, known=None):
        self.id = request_id
        self.budget = budget
        self.value_budget = value_budget
        self.known = known


class RestorePiece:
    """One piece of a restore request's payload (PROTOCOL.md, Snapshots and restores)."""

    __slots__ = ("id", "data", "more", "execution_count")

    def __init__(self, request_id, data, more, execution_count=None):
        self.id = request_id
        self.data = data
        self.more = more
        self.execution_count = execution_count


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _parse_state_request(message):
    """("snapshot", SnapshotRequest) | ("restore", RestorePiece) | ("invalid", (id, why))."""
    kind = message["type"]
    request_id = message.get("id")
    if not isinstance(request_id, str):
        return ("invalid", (None, "%s request id must be a string" % kind))
    if kind == "snapshot":
        budget, value_budget, known = message.get("budget"), message.get("valueBudget"), message.get("known")
        if not _is_number(budget) or not _is_number(value_budget) or budget < 0 or value_budget < 0:
            return ("invalid", (request_id, "snapshot %r: budget and valueBudget must be numbers of bytes" % request_id))
        if known is not None and not isinstance(known, str):
            return ("invalid", (request_id, "snapshot %r: known must be a string" % request_id))
        return ("snapshot", SnapshotRequest(request_id, budget, value_budget, known))
    data, more, count = message.get("data"), message.get("more"), message.get("executionCount")
    if not isinstance(data, (str, bytes, memoryview)) or not isinstance(more, bool):
        return ("invalid", (request_id, "restore %r: data must be a string and more a boolean" % request_id))
    if count is not None and not _is_number(count):
        return ("invalid", (request_id, "restore %r: executionCount must be a number" % request_id))
    return ("restore", RestorePiece(request_id, data, more, None if count is None else int(count)))


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


_DATA_KEY = b'"data":"'
_LONG_LINE = 64 * 1024


def _long_restore_message(line):
    """A long restore line's message with its base64 data as bytes, cut out before the JSON parser sees it (the
    parser scans a 5.6 MB string at tens of MB/s); None when the line is anything else."""
    start = line.find(_DATA_KEY)
    if start < 0:
        return None
    start += len(_DATA_KEY)
    end = line.find(b'"', start)
    if end < 0 or line.find(b"\\", start, end) >= 0:
        return None
    try:
        message = json.loads(line[:start] + line[end:])
    except Exception:
        return None
    if not isinstance(message, dict) or message.get("type") != "restore" or message.get("data") != "":
        return None
    message["data"] = memoryview(line)[start:end]
    return message


def classify_line(line):
    """Decode one host line: ("execute", Request) | ("exit", None) | ("bridge_result", dict) |
    ("snapshot", SnapshotRequest) | ("restore", RestorePiece) | ("invalid", (id, why))."""
    message = _long_restore_message(line) if len(line) > _LONG_LINE and isinstance(line, bytes) else None
    try:
        if message is None:
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
    if kind in ("snapshot", "restore"):
        return _parse_state_request(message)
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


MAX_COMPLETIONS = 500
MAX_INSPECT_CHARS = 65536
MAX_INTROSPECT_CODE = 1 << 20


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


def _introspection_failed(kind, request_id, why):
    """Answer a complete or inspect request with no matches (not found) and why."""
    reply = {"type": kind + "_reply", "id": request_id, "error": why[:1000]}
    reply.update({"matches": [], "cursorStart": 0, "cursorEnd": 0} if kind == "complete" else {"found": False, "bundle": {}})
    _send(reply)


def _diagnose(text):
    try:
        os.write(_diagnostic_fd, ("veyyon runner: %s\n" % text).encode("utf-8", "replace"))
    except OSError:
        pass
