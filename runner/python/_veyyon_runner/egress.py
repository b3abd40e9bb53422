"""The in-sandbox egress forwarder: relays 127.0.0.1:<port> to the host's egress proxy socket.

In a sandbox with ``sandbox.network: allowlist`` the kernel has its own network namespace with
only a loopback interface; the host's egress proxy is a Unix socket bound into it. When the
environment names that socket (``VEYYON_EGRESS_SOCKET``) and a port (``VEYYON_EGRESS_PORT``),
``start`` listens on 127.0.0.1:<port> and relays every connection byte for byte to the socket,
so clients configured through HTTP_PROXY/HTTPS_PROXY (pip, urllib, requests) work unchanged.
Daemon threads do the work: the main thread (cells, SIGINT) never runs any of it, and nothing
here writes to stdout or stderr (a failure to listen is one diagnostic line). ``socket`` is
imported by ``start`` only when the forwarder runs (at the runner's start, before any cell's
directory is on ``sys.path``), so a kernel without it does not pay for the import.
"""

import threading
import time

SOCKET_ENV = "VEYYON_EGRESS_SOCKET"
PORT_ENV = "VEYYON_EGRESS_PORT"
_CHUNK = 65536
_BACKLOG = 64


def _pipe(source, target):
    import socket

    try:
        while True:
            data = source.recv(_CHUNK)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        try:
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _relay(client, path):
    import socket

    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_pipe, args=(upstream, client), name="veyyon-egress-relay", daemon=True)
    back.start()
    _pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _serve(listener, path):
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            if listener.fileno() == -1:
                return
            time.sleep(0.1)
            continue
        threading.Thread(target=_relay, args=(client, path), name="veyyon-egress-relay", daemon=True).start()


def start(environ, diagnose):
    """Starts the forwarder when environ names the socket and port; returns the listening socket, or None."""
    path = environ.get(SOCKET_ENV)
    port_text = environ.get(PORT_ENV)
    if not path or not port_text:
        return None
    try:
        port = int(port_text)
        if not 1 <= port <= 65535:
            raise ValueError(port_text)
    except ValueError:
        diagnose("egress forwarder not started: %s=%r is not a port from 1 to 65535" % (PORT_ENV, port_text))
        return None
    import socket

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(_BACKLOG)
    except OSError as exc:
        listener.close()
        diagnose("egress forwarder not started: cannot listen on 127.0.0.1:%d: %s" % (port, exc))
        return None
    threading.Thread(target=_serve, args=(listener, path), name="veyyon-egress", daemon=True).start()
    return listener
