"""The host bridge: agent()/completion()/parallel() calls answered by bridge_result lines."""

import itertools
import threading

from .state import _state
from .protocol import PROTOCOL_ERROR, STATUS_MIME, _JSON, _diagnose, _reader_needed, _send


class BridgeError(Exception):
    """A bridge call the host answered with an error; str() is "name: message"."""

    def __init__(self, name, message):
        super().__init__(name, message)
        self.name = name
        self.message = message

    def __str__(self):
        return "%s: %s" % (self.name, self.message)


class _BridgeCall:
    def __init__(self, call_id, request_id, method):
        self.call_id = call_id
        self.request_id = request_id
        self.method = method
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


# Set when the host's input has ended (or it sent exit): no bridge call can be answered any more.
_bridge_ended = False
_NO_HOST = "the runner's input has ended, so no host can answer this %s call (run without a host, the runner has no bridge)"


def _bridge_open(method, request_id=None):
    call = _BridgeCall("c%d" % next(_bridge_ids), _state.current_id, method)
    with _bridge_lock:
        if _bridge_ended:
            raise BridgeError("BridgeCancelled", _NO_HOST % method)
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
    call = _bridge_open(method, request_id)
    _reader_needed()
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


def end_bridge():
    """The host's input has ended: open bridge calls fail now, and later ones at once."""
    global _bridge_ended
    with _bridge_lock:
        _bridge_ended = True
        calls = [c for c in _bridge_calls.values() if not c.resumed]
        for call in calls:
            call.resumed = True
            del _bridge_calls[call.call_id]
    for call in calls:
        _bridge_status(call, "resume")
        call.error = ("BridgeCancelled", _NO_HOST % call.method)
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
