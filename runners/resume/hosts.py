"""Hosts for the nemesis: a network namespace per host, joined to the store's side by a veth pair the lab makes.

Serves issue 25 (``resume_nemesis``).  A **host** is a network namespace of
its own (``ip netns add``) with one end of a veth pair inside it; the other end
stays in the machine's namespace, where the lab's private PostgreSQL cluster
(``runners/resume/pgcluster.py``) and the proxies listen.  Each host gets a
/30 of its own in 10.213.0.0/16 (a /24 per cell, checked unused on this
machine first): the store side is ``.4i+1``, the host side ``.4i+2``.  A
process enters its host with ``setns(2)`` (through ctypes) after the fork and
before it opens a socket, so every connection it makes leaves through its own
link and nothing else: the host's namespace has no other route.

A **partition** is real: the store-side end of the host's link is set down
(``ip link set ... down``); TCP segments in flight are dropped and
retransmitted after the heal, exactly as across a cut cable.

**Names.**  Everything carries the owner's pid: namespaces ``dlnem-<pid>-h<i>``,
links ``dn<pid>h<i>`` (store side) and ``dn<pid>h<i>p`` (host side; at most 15
characters).  :func:`leftovers` finds those whose owner is gone (a run that
was SIGKILLed) and :func:`sweep` removes them; a live run's are left alone.

What it trades away: no clock skew (one kernel, one clock) and no loss below
TCP (no netem here; the proxy shapes traffic instead).
"""
from __future__ import annotations

import ctypes
import fcntl
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

PREFIX = "dlnem-"  # namespaces
LINK_PREFIX = "dn"  # veth links: dn<pid>h<i>[p]
NET = "10.213"
CLONE_NEWNET = 0x40000000
LOCK = Path("/tmp/dlnem.lock")  # address allocation is serialised between the lab's processes


class HostsError(Exception):
    """The lab could not make, change or remove its hosts (a failure of the lab, never a result)."""


def _ip(*args: str, check: bool = True) -> str:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
    if check and proc.returncode != 0:
        raise HostsError(f"ip {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc.stdout


def requirements() -> str:
    """'' when this process may make namespaces (root, ``ip`` present), else the one-line reason."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add); this process is not root"
    try:
        _ip("netns", "list")
    except (OSError, HostsError, subprocess.SubprocessError) as exc:
        return f"`ip netns` is not usable here: {exc}"
    return ""


@dataclass(frozen=True)
class Host:
    """One host: its namespace, its link's two ends, the store side's address (what it dials) and its own."""

    index: int
    netns: str
    link: str  # store-side end (in the machine's namespace): partitions set it down
    peer: str  # host-side end (in the namespace)
    store_addr: str
    addr: str


def _subnets_in_use() -> set[int]:
    text = _ip("-o", "addr") + _ip("route")
    return {int(m) for m in re.findall(rf"{re.escape(NET)}\.(\d+)\.", text)}


class Hosts:
    """k hosts for one cell (module docstring); ``close`` removes them.  Use as a context manager."""

    def __init__(self, k: int):
        self.k, self.owner = k, os.getpid()
        self.hosts: list[Host] = []
        LOCK.touch(exist_ok=True)
        with open(LOCK) as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                used = _subnets_in_use()
                free = [n for n in range(10, 250) if n not in used]
                if not free:
                    raise HostsError(f"no free /24 left in {NET}.0.0/16")
                net = free[self.owner % len(free)]
                for i in range(k):
                    self._make(i, net)
            except BaseException:
                self.close()
                raise

    def _make(self, i: int, net: str) -> None:
        name, link = f"{PREFIX}{self.owner}-h{i}", f"{LINK_PREFIX}{self.owner}h{i}"
        host = Host(i, name, link, link + "p", f"{NET}.{net}.{4 * i + 1}", f"{NET}.{net}.{4 * i + 2}")
        _ip("netns", "add", name)
        self.hosts.append(host)
        _ip("link", "add", link, "type", "veth", "peer", "name", host.peer)
        _ip("link", "set", host.peer, "netns", name)
        _ip("addr", "add", f"{host.store_addr}/30", "dev", link)
        _ip("link", "set", link, "up")
        _ip("-n", name, "addr", "add", f"{host.addr}/30", "dev", host.peer)
        _ip("-n", name, "link", "set", host.peer, "up")
        _ip("-n", name, "link", "set", "lo", "up")

    def __getitem__(self, i: int) -> Host:
        return self.hosts[i]

    def down(self, i: int) -> None:
        """Partition host ``i``: its link's store-side end goes down."""
        _ip("link", "set", self.hosts[i].link, "down")

    def up(self, i: int) -> None:
        """Heal host ``i``'s partition."""
        _ip("link", "set", self.hosts[i].link, "up")

    def close(self) -> None:
        for h in self.hosts:
            _ip("link", "del", h.link, check=False)  # removes the peer with it
            _ip("netns", "del", h.netns, check=False)
        self.hosts = []

    def __enter__(self) -> "Hosts":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def enter(netns: str) -> None:
    """In a forked child, before any socket is opened: move this process into host ``netns``'s network."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/var/run/netns/{netns}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise HostsError(f"setns({netns}): {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, killed and not yet reaped, is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def leftovers() -> list[str]:
    """Namespaces and links of the lab whose owning process is gone: ``netns <name>`` / ``link <name>``."""
    out = []
    for line in _ip("netns", "list", check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.fullmatch(rf"{PREFIX}(\d+)-h\d+", name)
        if m and not _alive(int(m.group(1))):
            out.append(f"netns {name}")
    for m in re.finditer(rf"^\d+: ({LINK_PREFIX}(\d+)h\d+)[@:]", _ip("-o", "link", check=False), re.M):
        if not _alive(int(m.group(2))):
            out.append(f"link {m.group(1)}")
    return out


def sweep() -> list[str]:
    """Remove :func:`leftovers`; what was removed."""
    gone = leftovers()
    for item in gone:
        kind, name = item.split(" ", 1)
        if kind == "link":
            _ip("link", "del", name, check=False)
        else:
            _ip("netns", "del", name, check=False)
    return gone
