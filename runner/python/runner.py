"""veyyon kernel runner: one Python process serving code cells as NDJSON on stdin/stdout.

Standard library only, Python 3.8+. The code is the package ``_veyyon_runner`` beside this
file (one module per concern, see its ``__init__``); this file is the entry that serves it:
``python3 -u runner.py`` (or ``python3 -u -m _veyyon_runner`` from this directory); importing it
does not start the server. The host spawns ``boot.py`` beside it instead, which loads the
package from cached code objects (and caches the prelude's, see ``server._cached_prelude_code``).

The protocol (frames, their order, executionCount, interrupts, bad input, the bridge) is
PROTOCOL.md at the root of the repository, checked against the host's schemas. Here, a
``started`` frame is sent once a SIGINT would interrupt the cell (with its first frame, or
about 1 ms after it began if none came), and stream output is coalesced up to CHUNK_CHARS and
sent within about 10 ms, before any other frame.

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
