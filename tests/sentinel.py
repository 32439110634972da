"""A Redis Sentinel group for the tests: a master, a replica and one Sentinel, each a redis-server of its own,
started one after the other so the Sentinel never finds its master not yet listening (and fails over)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from producer.cli.dev.processes import tail
from producer.cli.dev.services import redis_answers, redis_server_binary

__all__ = ["SENTINEL_MASTER", "PortTaken", "SentinelGroup", "sentinel_group"]

#: The name the tests' Sentinels know their master by.
SENTINEL_MASTER = "vsmaster"


class PortTaken(RuntimeError):
    """A server of a ``SentinelGroup`` exited as it started: another process had its port."""


class SentinelGroup:
    """A master, a replica and one Sentinel watching them (quorum 1), each a redis-server of its own that keeps
    nothing on disk, on loopback; ``url`` is the ``sentinel://`` URL vectorsync takes.

    ``host``: the address all three listen on (a network namespace's host address, for workers inside it).
    ``persistent``: both servers keep an AOF (``appendfsync always``), and ``kill``/``start_server`` stop and
    start one: each runs from a config file of its own, which the Sentinel rewrites (``CONFIG REWRITE``) when it
    makes it a master or a replica, so a server started again takes up the role it last had, as a deployed one
    does.

    Each server's output goes to a log file in ``folder`` (``server-<port>/redis.log``, ``sentinel.log``;
    ``logs``), which a failed ``start`` quotes.

    The three ports are held, bound, from here until the server of each starts: one ``free_port`` after another
    gave the same port twice about once in 4,500 groups (seen: the replica's and the Sentinel's, the Sentinel then
    exiting with "Address already in use"), and no other process binding port 0 can take one meanwhile. A server
    that finds its port taken all the same (by a process binding port 0 in the moment between the port let go and
    the server binding it) has ``start`` start the group again on fresh ports: ``url`` is read after ``start``."""

    #: Seconds ``start`` gives the group to come up. About 1 s on an idle machine, most of it the replica's first
    #: connection to its master, which redis-server makes from its replication cron, once a second.
    START_SECONDS = 20.0
    #: Starts ``start`` makes, each on fresh ports, while a server finds its port taken (seen once in 400 starts
    #: from ten processes starting groups and nothing else, two cores).
    START_TRIES = 3

    def __init__(self, folder: Path, *, host: str = "127.0.0.1", persistent: bool = False) -> None:
        self.folder, self.host, self.persistent = folder, host, persistent
        self._hold_ports()

    def _hold_ports(self) -> None:
        """Three ports of 127.0.0.1, each held by a socket bound to it, for a group none of whose servers started."""
        held = [socket.socket() for _ in range(3)]
        for sock in held:
            sock.bind(("127.0.0.1", 0))
        #: A socket bound to each port of the group whose server has not started yet; ``_spawn`` lets it go.
        self._held = {int(sock.getsockname()[1]): sock for sock in held}
        self.ports = list(self._held)[:2]  # the master's, then the replica's, at the start
        self.sentinel_port = list(self._held)[2]
        self.url = f"sentinel://{self.host}:{self.sentinel_port}/0?master_name={SENTINEL_MASTER}"
        self.processes: list[subprocess.Popen[bytes]] = []
        #: The server running on each port now (None: killed).
        self.servers: dict[int, subprocess.Popen[bytes] | None] = {}
        #: Each process's log file, its stdout and stderr (and what the process is, for a failed start to say).
        self.logs: dict[subprocess.Popen[bytes], tuple[str, Path]] = {}

    def start(self) -> None:
        """``_start``; again on fresh ports, up to ``START_TRIES`` starts in all, while a server finds its port
        taken (each time with a warning that says so)."""
        for tries in range(1, self.START_TRIES + 1):
            try:
                self._start()
                return
            except PortTaken as taken:
                self.close()
                if tries == self.START_TRIES:
                    raise RuntimeError(f"{taken}\n(the last of {tries} starts, each on fresh ports)") from None
                warnings.warn(f"{taken}\nso the Sentinel group starts again on fresh ports", stacklevel=2)
                self._hold_ports()

    def _start(self) -> None:
        """Start the master; once it answers, the replica; once the replica is in sync, the Sentinel; return once
        the Sentinel names the master, which has the replica in sync, and knows the replica as one it could promote.

        One after the other because a Sentinel that finds its master not yet listening fails over at once: its
        first connection is refused, it connects again only a second later (its ping period), and by then the
        master has been unreachable for longer than ``down-after-milliseconds`` (1000): down, and with quorum 1 a
        failover. The group was whole again only some 20 s later (the Sentinel turns the old master into a replica
        10 s after the switch and learns it is in sync at its next INFO, 10 s on): a loaded run's failed start.

        Fails at once when a server exits, with its log; on the deadline, with the conditions not met and the
        servers' logs."""
        binary = redis_server_binary()[0]
        master, replica = self.ports
        self.folder.mkdir(parents=True, exist_ok=True)
        for port, extra in ((master, ""), (replica, f"replicaof {self.host} {master}\n")):
            data = self.folder / f"server-{port}"
            data.mkdir(exist_ok=True)
            aof = "appendonly yes\nappendfsync always\n" if self.persistent else "appendonly no\n"
            (data / "redis.conf").write_text(
                f'port {port}\nbind {self.host}\nprotected-mode {self._protected}\nsave ""\ndir {data}\n{aof}'
                "repl-diskless-sync-delay 0\n"  # a replica syncs at once, not 5 s later
                f"{extra}"
            )
        deadline = time.monotonic() + self.START_SECONDS
        self.start_server(master)
        self._wait_for(deadline, {f"the master (port {master}) answers": lambda: self._answers(master)})
        self.start_server(replica)
        in_sync = f"the replica (port {replica}) is in sync with the master (port {master})"
        self._wait_for(deadline, {in_sync: lambda: self.replicas_in_sync(master)})
        config = self.folder / "sentinel.conf"
        config.write_text(
            f"port {self.sentinel_port}\nbind {self.host}\nprotected-mode {self._protected}\ndir {self.folder}\n"
            f"sentinel monitor {SENTINEL_MASTER} {self.host} {master} 1\n"
            # known at once, not at the master's next INFO (every 10 s): a failover needs a replica it knows
            f"sentinel known-replica {SENTINEL_MASTER} {self.host} {replica}\n"
            f"sentinel down-after-milliseconds {SENTINEL_MASTER} 1000\n"
            f"sentinel failover-timeout {SENTINEL_MASTER} 4000\n"
        )
        sentinel = f"the Sentinel (port {self.sentinel_port})"
        self._spawn(sentinel, [binary, str(config), "--sentinel"], self.folder / "sentinel.log", self.sentinel_port)

        def names_the_master() -> bool:
            named = self._named_master()
            if named is not None and named != master:
                raise RuntimeError(
                    f"the Sentinel group did not come up: the Sentinel failed over from port {master} to {named} as "
                    f"it started, finding the master down{self._log_tails()}"
                )
            return named == master

        self._wait_for(
            deadline,
            {
                f"{sentinel} answers": lambda: self._answers(self.sentinel_port),
                f"{sentinel} names the master (port {master})": names_the_master,
                f"a client of {self.url} reaches the master": lambda: redis_answers(self.url),
                f"the master (port {master}) has a replica in sync": lambda: self.replicas_in_sync(master),
                "the Sentinel sees a replica it could promote (up, its link to the master up)": (
                    self.sentinel_sees_a_replica
                ),
            },
        )

    def _wait_for(self, deadline: float, conditions: dict[str, Callable[[], bool]]) -> None:
        """Poll ``conditions`` (what each says: its check), in their order, until all are met; raise at once when a
        process of the group has exited, and at ``deadline`` with those not met.

        A round stops at the first condition not met, the later ones depending on it: a check of a port that
        another process holds can take seconds, and a server that exited is seen sooner."""
        while True:
            self._raise_if_one_exited()
            met = all(check() for check in conditions.values())
            self._raise_if_one_exited()
            if met:
                return
            if time.monotonic() > deadline:
                unmet = [what for what, check in conditions.items() if not check()]
                raise RuntimeError(
                    f"the Sentinel group did not come up within {self.START_SECONDS:g} s; not met: {'; '.join(unmet)}"
                    f"{self._log_tails()}"
                )
            time.sleep(0.1)

    def _raise_if_one_exited(self) -> None:
        for process in self.processes:
            if process.poll() is not None:
                what, log = self.logs[process]
                end = tail(log, 20)
                error = PortTaken if "Address already in use" in end else RuntimeError
                raise error(
                    f"the Sentinel group did not come up: {what} exited (code {process.returncode}); "
                    f"the end of its log, {log}:\n{end}"
                )

    def _log_tails(self, lines: int = 15) -> str:
        logs = dict.fromkeys(log for _what, log in self.logs.values())
        return "".join(f"\n--- the end of {log}:\n{tail(log, lines)}" for log in logs)

    def _answers(self, port: int) -> bool:
        return redis_answers(f"redis://{self.host}:{port}/0")

    @property
    def _protected(self) -> str:
        # clients from another address than loopback (a network namespace's) would be refused
        return "yes" if self.host == "127.0.0.1" else "no"

    def _spawn(self, what: str, args: list[str], log: Path, port: int) -> subprocess.Popen[bytes]:
        held = self._held.pop(port, None)
        if held is not None:
            held.close()  # the server binds it next
        with log.open("ab") as output:
            process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT)
        self.processes.append(process)
        self.logs[process] = (what, log)
        return process

    def start_server(self, port: int) -> None:
        """Start the server of ``port`` (one of ``ports``) from its config file, unless it runs."""
        running = self.servers.get(port)
        if running is not None and running.poll() is None:
            return
        data = self.folder / f"server-{port}"
        command = [redis_server_binary()[0], str(data / "redis.conf")]
        self.servers[port] = self._spawn(f"the redis-server of port {port}", command, data / "redis.log", port)

    def kill(self, port: int) -> None:
        """kill -9 of the server of ``port``."""
        process = self.servers.get(port)
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        self.servers[port] = None

    def client(self, port: int) -> Any:
        import redis

        return redis.Redis(host=self.host, port=port, socket_timeout=2, socket_connect_timeout=2, decode_responses=True)

    def sentinel(self) -> Any:
        return self.client(self.sentinel_port)

    def role(self, port: int) -> str | None:
        """``master`` or ``slave``: what the server of ``port`` says it is (None: it does not answer)."""
        import redis

        client = self.client(port)
        try:
            return str(client.role()[0])
        except (redis.RedisError, OSError):
            return None
        finally:
            client.close()

    def master_port(self) -> int:
        """The port of the master the Sentinel names now."""
        client = self.sentinel()
        try:
            return int(client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_MASTER)[1])
        finally:
            client.close()

    def _named_master(self) -> int | None:
        """The port of the master the Sentinel names now (None: it does not answer)."""
        import redis

        try:
            return self.master_port()
        except (redis.RedisError, OSError, TypeError, IndexError):
            return None

    def replicas_in_sync(self, master: int | None = None) -> bool:
        """Whether the master (the one the Sentinel names, or the server of port ``master``) has a replica
        online."""
        import redis

        try:
            client = self.client(self.master_port() if master is None else master)
            try:
                info = client.info("replication")
            finally:
                client.close()
        except (redis.RedisError, OSError):
            return False
        return info.get("role") == "master" and any(
            isinstance(v, dict) and v.get("state") == "online" for k, v in info.items() if k.startswith("slave")
        )

    def sentinel_sees_a_replica(self) -> bool:
        """Whether the Sentinel knows a replica of its master that it could promote: up, its link to the master
        up (a Sentinel learns of replicas from the master's INFO, every 10 s; until then a ``SENTINEL FAILOVER``
        answers NOGOODSLAVE)."""
        import redis

        client = self.sentinel()
        try:
            replicas = client.execute_command("SENTINEL", "REPLICAS", SENTINEL_MASTER)
        except (redis.RedisError, OSError):
            return False
        finally:
            client.close()
        for replica in replicas:
            fields = replica if isinstance(replica, dict) else dict(zip(replica[::2], replica[1::2], strict=True))
            flags = str(fields.get("flags", "")).split(",")
            if flags == ["slave"] and fields.get("master-link-status") == "ok":
                return True
        return False

    def failover(self, timeout: float = 30, *, wait: bool = True) -> int:
        """Make the Sentinel promote the replica (``SENTINEL FAILOVER``) and wait until the new master has the
        old one back as its replica, in sync; the new master's port (``wait`` false: return the old master's
        port as soon as the Sentinel took the command)."""
        old = self.master_port()
        deadline = time.monotonic() + timeout
        # After a failover the Sentinel sees the old master as a replica in sync some 20 s later (it turns it into
        # one 8 s after the switch, and reads its INFO every 10 s): a failover before then answers NOGOODSLAVE.
        while not self.sentinel_sees_a_replica():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Sentinel knew no replica to promote within {timeout} s")
            time.sleep(0.2)
        client = self.sentinel()
        try:
            client.execute_command("SENTINEL", "FAILOVER", SENTINEL_MASTER)
        finally:
            client.close()
        return self.wait_for_failover(old, timeout) if wait else old

    def wait_for_failover(self, old: int, timeout: float = 30) -> int:
        """Wait until the Sentinel names a master other than ``old`` and it has a replica in sync; its port."""
        deadline = time.monotonic() + timeout
        while self.master_port() == old or not self.replicas_in_sync():
            if time.monotonic() > deadline:
                raise RuntimeError(f"no failover within {timeout} s: the master is still on port {old}")
            time.sleep(0.2)
        return self.master_port()

    def close(self) -> None:
        while self._held:
            self._held.popitem()[1].close()
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)


@contextmanager
def sentinel_group(folder: Path | None = None) -> Iterator[SentinelGroup]:
    """A started ``SentinelGroup`` (in ``folder``, a temporary one by default), stopped afterwards."""
    with contextlib.ExitStack() as stack:
        if folder is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="vssentinel")))
        group = SentinelGroup(folder)
        stack.callback(group.close)
        group.start()
        yield group
