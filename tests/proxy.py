"""A proxy of the tests' own between a client and a real server, to make the network fail on command: each
test's subclass says what passes (``forward``) and whether a new connection is taken (``accepting``).

It listens and connects in the form of its server: TCP, TLS (it ends the client's TLS with the server's own
certificate and opens its own to the server, so ``forward`` sees the plain bytes), or a Unix socket.
"""

from __future__ import annotations

import select
import socket
import ssl
import tempfile
import threading
from pathlib import Path

__all__ = ["Proxy"]


class Proxy:
    """From a port (or socket file) of its own to ``target``: (host, port), or a socket file's path.

    ``tls``: the server's (certificate, key), made by ``tests.services.tls_certificate``; the proxy serves
    that certificate, which is also the CA it trusts the server by."""

    def __init__(self, target: tuple[str, int] | str, *, tls: tuple[Path, Path] | None = None) -> None:
        self.target, self.tls = target, tls
        self.sockets: list[socket.socket] = []
        if isinstance(target, str):
            self._folder = tempfile.TemporaryDirectory(prefix="vsproxy")
            self.path = str(Path(self._folder.name) / "proxy.sock")
            self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.server.bind(self.path)
            self.server.listen()
            self.url = f"redis+socket://{self.path}"
        else:
            self.server = socket.create_server(("127.0.0.1", 0))
            self.port = self.server.getsockname()[1]
            self.url = f"redis://127.0.0.1:{self.port}/0"
            if tls is not None:
                self.url = f"rediss://127.0.0.1:{self.port}/0?ssl_ca_certs={tls[0]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def accepting(self) -> bool:
        """Whether a new connection is taken (else it is closed at once)."""
        return True

    def forward(self, source: socket.socket, sink: socket.socket, data: bytes) -> None:
        """Pass on ``data``, read from ``source``, to ``sink``."""
        sink.sendall(data)

    def _upstream(self) -> socket.socket:
        if isinstance(self.target, str):
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self.target)
            return upstream
        upstream = socket.create_connection(self.target)
        if self.tls is None:
            return upstream
        context = ssl.create_default_context(cafile=str(self.tls[0]))
        return context.wrap_socket(upstream, server_hostname=self.target[0])

    def _accept(self) -> None:
        server_side = None
        if self.tls is not None:
            server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            server_side.load_cert_chain(str(self.tls[0]), str(self.tls[1]))
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if not self.accepting():
                client.close()
                continue
            try:
                if server_side is not None:
                    client = server_side.wrap_socket(client, server_side=True)
                upstream = self._upstream()
            except OSError:
                client.close()
                continue
            self.sockets += [client, upstream]
            if self.tls is None:
                for source, sink in ((client, upstream), (upstream, client)):
                    threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()
            else:  # one thread for both directions: an SSL socket is not to be read and written at once
                threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self.forward(source, sink, data)
        except OSError:
            pass

    def _pump(self, one: socket.socket, other: socket.socket) -> None:
        pair = (one, other)
        try:
            while True:
                ready = [s for s in pair if isinstance(s, ssl.SSLSocket) and s.pending()]
                if not ready:
                    ready = select.select(pair, [], [], 0.5)[0]
                for source in ready:
                    source.settimeout(0.5)
                    try:
                        data = source.recv(65536)
                    except (TimeoutError, ssl.SSLWantReadError):
                        continue  # a TLS record that carried no data (a session ticket, say)
                    if not data:
                        return
                    self.forward(source, other if source is one else one, data)
        except (OSError, ValueError):  # closed, here or by ``forward``
            pass

    def close(self) -> None:
        self.server.close()
        for sock in self.sockets:
            sock.close()
        self.sockets.clear()
        if isinstance(self.target, str):
            self._folder.cleanup()
