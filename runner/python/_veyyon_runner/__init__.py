"""The veyyon Python kernel runner as a package (standard library only, Python 3.8+).

The protocol it serves is described in ``runner.py`` beside this package. Modules, by concern:
    state       kernel state and SIGINT delivery
    protocol    frame encoding and writing, started frames, stream coalescing, request parsing
    output      sys.stdout/sys.stderr proxies, fd 1/2 pumps, %%capture
    display     pretty printer, MIME formatters, display(), status events, figures
    bridge      host bridge calls
    transform   the magic source transformer
    execution   compiling and running a cell, tracebacks
    magics      line and cell magics, shell helpers
    introspect  complete and inspect requests
    egress      the in-sandbox forwarder to the host's egress proxy
    definitions the source of the functions and classes cells defined (for snapshots)
    baseline    the environment and sys.path the host set (what a snapshot leaves out)
    snapshot    saving the user state for a snapshot request, and the payload's format
    restore     restoring a snapshot's payload for a restore request
    shield      the standard modules loaded on first use, found where they were at start
    server      the main loop and start-up (``main``)

The name starts with an underscore and carries the project's name so that no user module is
likely to share it; boot.py serves it through its own finder (runner.py through the package's
``__path__``), so a file of the same name in a cell's directory cannot shadow it. The runner
loads introspect, magics, snapshot and restore only when first used; the standard modules they
need come from where they were at start (``shield``).
"""
