"""A TCP proxy of the tests' own between a client and a real server, to make the network fail on command:
each test's subclass says what passes (``forward``) and whether a new connection is taken (``accepting``)."""

from __future__ import annotations

import socket
import threading

__all__ = ["Proxy"]


class Proxy:
    """TCP from a port of its own to ``target``, a thread per direction of each connection."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def accepting(self) -> bool:
        """Whether a new connection is taken (else it is closed at once)."""
        return True

    def forward(self, source: socket.socket, sink: socket.socket, data: bytes) -> None:
        """Pass on ``data``, read from ``source``, to ``sink``."""
        sink.sendall(data)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if not self.accepting():
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self.forward(source, sink, data)
        except OSError:
            pass

    def close(self) -> None:
        self.server.close()
        for sock in self.sockets:
            sock.close()
        self.sockets.clear()
