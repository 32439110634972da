"""A TCP relay on the run's address to a service that listens on loopback only (the machine's RabbitMQ): a
network namespace reaches the relay, and the relay is what a silence cuts."""

from __future__ import annotations

import contextlib
import select
import socket
import threading

__all__ = ["Relay"]


class Relay:
    """A TCP relay from ``host``:``port`` (a free one) to ``target``: each connection it takes, it opens one to
    the target and passes the bytes both ways; the target closing (or refusing) closes the client's too."""

    def __init__(self, host: str, target: tuple[str, int]) -> None:
        self.target = target
        self.server = socket.create_server((host, 0))
        self.host, self.port = host, self.server.getsockname()[1]
        self.sockets: set[socket.socket] = set()
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, name="relay-accept", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:  # the target is down: as a refused connection, closed at once
                client.close()
                continue
            with self.lock:
                if self.closed:
                    client.close()
                    upstream.close()
                    return
                self.sockets |= {client, upstream}
            threading.Thread(target=self._pump, args=(client, upstream), name="relay-pump", daemon=True).start()

    def _pump(self, one: socket.socket, other: socket.socket) -> None:
        pair = {one: other, other: one}
        try:
            while True:
                for source in select.select(list(pair), [], [], 1.0)[0]:
                    data = source.recv(65536)
                    if not data:
                        return
                    pair[source].sendall(data)
        except (OSError, ValueError):
            pass
        finally:
            with self.lock:
                for sock in (one, other):
                    self.sockets.discard(sock)
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                    sock.close()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            sockets, self.sockets = list(self.sockets), set()
        self.server.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
