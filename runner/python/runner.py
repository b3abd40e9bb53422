"""veyyon kernel runner: one Python process serving code cells as NDJSON on stdin/stdout.

Standard library only, Python 3.8+. The code is the package ``_veyyon_runner`` beside this
file (one module per concern, see its ``__init__``); this file is the entry that serves it:
``python3 -u runner.py`` (or ``python3 -u -m _veyyon_runner`` from this directory); importing it
does not start the server. The host spawns ``boot.py`` beside it instead, which loads the
package from cached code objects (and caches the prelude's, see ``server._cached_prelude_code``).

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


if __name__ == "__main__":
    from _veyyon_runner.server import main

    main()
