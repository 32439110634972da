"""A network namespace of a test's own, joined to the host by a veth pair, and DROP rules that cut it off.

The services a scenario partitions listen on the host side's address; its worker runs inside the namespace
(``ip netns exec``), so every packet between them crosses the veth pair, where an nftables rule (iptables
where nft is missing) inside the namespace drops them: silence, no RST, as a real partition is. Deleting
the namespace deletes its rules and its end of the pair; the host's end is deleted explicitly.

Needs root, ``ip`` (iproute2) and nft or iptables; ``unusable()`` says which is missing, for a skip.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import random
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["NETWORK", "Namespace", "namespace", "unusable"]

#: Namespaces and host-side veths this module makes: ``vsp<pid>n<k>`` and ``vsp<pid>h<k>``, so a run that
#: died before cleaning up is recognised (its pid gone) and cleaned up by the next.
PREFIX = "vsp"
#: Where the /30 subnets of the pairs are taken from.
POOL = ipaddress.ip_network("10.213.0.0/16")
TABLE = "vectorsync_partition"
#: The ``[network]`` settings of a rig whose workers must notice a silent peer in 2 to 4 s: a pooled
#: connection's pre-ping, then a new connection, take tcp_user_timeout + connect_timeout at worst. The
#: defaults (30 s and 10 s) stand under the default time limit of 30 minutes with far more room.
NETWORK = """
[network]
connect_timeout = 2
keepalive_idle = 1
keepalive_interval = 1
keepalive_count = 2
tcp_user_timeout = 2
health_check_interval = 2
"""


def _run(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=check)


def _firewall() -> str | None:
    """``nft`` or ``iptables``, whichever is on PATH (nft first); after one try at installing nftables from
    Debian's packages where neither is (a lock keeps parallel test processes from running apt-get at once)."""
    for tool in ("nft", "iptables"):
        if shutil.which(tool):
            return tool
    if not shutil.which("apt-get"):
        return None
    with open("/tmp/vectorsync-nftables-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not shutil.which("nft"):
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                subprocess.run(
                    ["apt-get", "install", "-y", "--no-install-recommends", "nftables"],
                    capture_output=True,
                    timeout=300,
                    env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
                )
    return "nft" if shutil.which("nft") else None


def unusable() -> str | None:
    """Why this machine cannot run the partition scenarios (None: it can)."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add, veth, nft)"
    if not shutil.which("ip"):
        return "network namespaces need the ip command (Debian's iproute2)"
    if _firewall() is None:
        return "dropping packets needs nft or iptables (Debian's nftables or iptables), and neither is installed"
    probe = f"{PREFIX}{os.getpid()}probe"
    made = _run("ip", "netns", "add", probe, check=False)
    if made.returncode:
        return f"this machine does not allow network namespaces: ip netns add: {made.stderr.strip()}"
    _run("ip", "netns", "del", probe, check=False)
    return None


@dataclass
class Namespace:
    """A namespace ``name`` whose end of the pair has ``inside``; the host's end (``veth``) has ``host``."""

    name: str
    veth: str
    host: str
    inside: str
    subnet: str
    firewall: str
    #: The ports cut now (empty: none).
    cut_ports: tuple[int, ...] = field(default=())

    @property
    def prefix(self) -> list[str]:
        """The command prefix that runs a command inside the namespace."""
        return ["ip", "netns", "exec", self.name]

    def _inside(self, *command: str, stdin: str | None = None) -> None:
        result = subprocess.run([*self.prefix, *command], input=stdin, capture_output=True, text=True, timeout=60)
        if result.returncode:
            raise RuntimeError(f"{' '.join(command)} in {self.name} failed: {result.stderr.strip()}")

    def cut(self, ports: Sequence[int]) -> None:
        """Drop every TCP packet between the namespace and the host's ``ports``, both ways."""
        assert not self.cut_ports, f"already cut: {self.cut_ports}"
        listed = ", ".join(str(p) for p in ports)
        if self.firewall == "nft":
            self._inside(
                "nft",
                "-f",
                "-",
                stdin=(
                    f"table inet {TABLE} {{\n"
                    f"  chain out {{\n    type filter hook output priority 0; policy accept;\n"
                    f"    ip daddr {self.host} tcp dport {{ {listed} }} drop\n  }}\n"
                    f"  chain in {{\n    type filter hook input priority 0; policy accept;\n"
                    f"    ip saddr {self.host} tcp sport {{ {listed} }} drop\n  }}\n"
                    f"}}\n"
                ),
            )
        else:
            for rule in self._iptables_rules(ports):
                self._inside("iptables", "-A", *rule)
        self.cut_ports = tuple(ports)

    def heal(self) -> None:
        """Remove the rules: packets flow again (those dropped meanwhile stay lost, as on a real network)."""
        if not self.cut_ports:
            return
        if self.firewall == "nft":
            self._inside("nft", "delete", "table", "inet", TABLE)
        else:
            for rule in self._iptables_rules(self.cut_ports):
                self._inside("iptables", "-D", *rule)
        self.cut_ports = ()

    def _iptables_rules(self, ports: Sequence[int]) -> list[list[str]]:
        listed = ",".join(str(p) for p in ports)
        return [
            ["OUTPUT", "-d", self.host, "-p", "tcp", "-m", "multiport", "--dports", listed, "-j", "DROP"],
            ["INPUT", "-s", self.host, "-p", "tcp", "-m", "multiport", "--sports", listed, "-j", "DROP"],
        ]


def _clean_leftovers() -> None:
    """Delete the namespaces and veths of test processes that died without cleaning up."""
    names = _run("ip", "netns", "list", check=False).stdout.split()
    links = re.findall(r"^\d+: ([^:@]+)", _run("ip", "-o", "link", "show", check=False).stdout, re.M)
    for kind, name in [*(("netns", n) for n in names), *(("link", n) for n in links)]:
        found = re.fullmatch(rf"{PREFIX}(\d+)[nh]\d+", name)
        if found and not Path(f"/proc/{found.group(1)}").exists():
            _run("ip", kind, "del", name, check=False)


def _free_subnet() -> ipaddress.IPv4Network:
    """A /30 of POOL that no address of this host is in."""
    used = [
        ipaddress.ip_interface(a).network
        for a in re.findall(r"inet (\S+)", _run("ip", "-4", "-o", "addr", "show", check=False).stdout)
    ]
    candidates = list(POOL.subnets(new_prefix=30))
    rng = random.Random(os.getpid() ^ int.from_bytes(os.urandom(4), "little"))
    for _ in range(1000):
        subnet = rng.choice(candidates)
        if not any(subnet.overlaps(u) for u in used):
            return subnet
    raise RuntimeError(f"no free /30 in {POOL}")


_made = 0


@contextlib.contextmanager
def namespace() -> Iterator[Namespace]:
    """A namespace and its veth pair with private addresses; deleted afterwards, rules and all, however the
    test ends."""
    global _made
    reason = unusable()
    if reason:
        import pytest

        pytest.skip(reason)
    firewall = _firewall()
    assert firewall is not None
    _clean_leftovers()
    _made += 1
    name, veth, peer = (f"{PREFIX}{os.getpid()}{kind}{_made}" for kind in ("n", "h", "p"))
    subnet = _free_subnet()
    host, inside = (str(a) for a in list(subnet.hosts())[:2])
    try:
        _run("ip", "netns", "add", name)
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", peer)
        _run("ip", "link", "set", peer, "netns", name)
        _run("ip", "addr", "add", f"{host}/30", "dev", veth)
        _run("ip", "link", "set", veth, "up")
        _run("ip", "-n", name, "addr", "add", f"{inside}/30", "dev", peer)
        _run("ip", "-n", name, "link", "set", peer, "up")
        _run("ip", "-n", name, "link", "set", "lo", "up")
        yield Namespace(name, veth, host, inside, str(subnet), firewall)
    finally:
        _run("ip", "netns", "del", name, check=False)  # its rules and its end of the pair with it
        _run("ip", "link", "del", veth, check=False)
