"""A protocol-aware TCP proxy between a host and the lab's private store: the cut at commit and the slow store.

Serves issue 25 (``resume_nemesis``).  The proxy runs as a child process of
the cell (it dies with it) and listens on the store-side address of one
host's link; the host dials it instead of the cluster.  It forwards bytes both
ways and reads the client's side of the PostgreSQL wire protocol (v3: the
untyped start-up packet, then ``type byte + int32 length`` messages) far
enough to know which statement each message carries: a simple ``Query``
(``Q``) by its text, an extended-protocol ``Bind`` (``B``) by the text its
``Parse`` (``P``) gave the statement name (so a prepared statement is
recognised when it is executed, not when it is parsed).

Three faults (``faults/resume/nemesis.py`` declares them):

- ``cut``: once a statement matching the trigger has been executed, the
  proxy waits for the message that makes it durable (``at = "sync"``: the
  ``Sync`` that ends its implicit transaction, or the ``Query`` itself;
  ``at = "commit"``: the next ``COMMIT``), forwards it to the server, closes
  the client's socket at once, then reads the server's reply to the end
  (``ReadyForQuery``) and records what it said (``CommandComplete`` tag or
  ``ErrorResponse``) — the outcome the client never learns.  Only the first
  match in the proxy's life is cut; later connections pass through.  The
  cut is ordered so that no reply can slip through: the flag is set before
  the message is forwarded, and server bytes are forwarded only while it is
  clear.
- ``drop``: the same trigger, but the message that would make the claim durable
  never reaches the server: the proxy closes both sockets instead of
  forwarding it, so the server rolls the claim's transaction back (the commit
  is lost) while the client, as after a ``cut``, cannot tell.
- ``slow``: every chunk from the server is held ``delay_ms`` before it is
  forwarded (the store answers slowly; requests are not delayed).

Events (one JSON line each on the report pipe): ``{"cut": statement,
"server_said": ..., "at": time}``.  Every loop is bounded: a socket waits at
most :data:`IDLE_S` for data, the proxy lives at most ``lifetime_s``.
"""
from __future__ import annotations

import json
import os
import re
import socket
import struct
import threading
import time

IDLE_S = 120.0
DRAIN_S = 10.0


def _cstr(buf: bytes, at: int) -> tuple[str, int]:
    end = buf.index(b"\0", at)
    return buf[at:end].decode(errors="replace"), end + 1


class _Conn:
    """One client connection through the proxy: two pumping threads and the client-side parser."""

    def __init__(self, proxy: "Proxy", client: socket.socket):
        self.proxy, self.client = proxy, client
        self.server = socket.create_connection(proxy.upstream, timeout=IDLE_S) if isinstance(proxy.upstream, tuple) \
            else self._unix(proxy.upstream)
        self.lock = threading.Lock()
        self.cut = False
        self.statements: dict[str, str] = {}
        self.armed: str | None = None  # the matching statement, waiting for the message that makes it durable
        self.started = False  # the untyped start-up packet was seen

    @staticmethod
    def _unix(path: str) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(IDLE_S)
        s.connect(path)
        return s

    def run(self) -> None:
        t = threading.Thread(target=self._from_server, daemon=True)
        t.start()
        try:
            self._from_client()
        finally:
            t.join(DRAIN_S + 1)
            for s in (self.client, self.server):
                try:
                    s.close()
                except OSError:
                    pass

    # ---- client -> server: parse, forward, maybe cut
    def _from_client(self) -> None:
        buf = b""
        self.client.settimeout(IDLE_S)
        while not self.cut:
            try:
                chunk = self.client.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
            out = b""
            while True:
                msg, buf = self._next(buf)
                if msg is None:
                    break
                out += msg
                if self._decide(msg):
                    self._cut(out)
                    return
            if out:
                self.server.sendall(out)
        try:
            self.server.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _next(self, buf: bytes) -> tuple[bytes | None, bytes]:
        if not self.started:  # SSLRequest / GSSENCRequest / StartupMessage: int32 length, no type byte
            if len(buf) < 4:
                return None, buf
            n = struct.unpack("!I", buf[:4])[0]
            if len(buf) < n:
                return None, buf
            code = struct.unpack("!I", buf[4:8])[0]
            if code not in (80877103, 80877104):  # not SSL/GSS: the start-up message itself
                self.started = True
            return buf[:n], buf[n:]
        if len(buf) < 5:
            return None, buf
        n = struct.unpack("!I", buf[1:5])[0]
        if len(buf) < 1 + n:
            return None, buf
        return buf[:1 + n], buf[1 + n:]

    def _decide(self, msg: bytes) -> bool:
        """True when ``msg`` is the one after which the connection is cut (module docstring)."""
        if not self.started or self.proxy.mode not in ("cut", "drop") or self.proxy.done.is_set():
            return False
        kind, body = msg[:1], msg[5:]
        text = None
        if kind == b"P":
            name, at = _cstr(body, 0)
            self.statements[name], _ = _cstr(body, at)
            return False
        if kind == b"B":
            _, at = _cstr(body, 0)
            name, _ = _cstr(body, at)
            text = self.statements.get(name, "")
        elif kind == b"Q":
            text, _ = _cstr(body, 0)
        if text is not None and self.armed is None and re.search(self.proxy.trigger, text, re.I):
            self.armed = text
            if kind == b"Q" and self.proxy.at == "sync":
                return True
            return False
        if self.armed is None:
            return False
        if self.proxy.at == "sync":
            return kind == b"S"
        if text is not None and re.match(r"\s*COMMIT\b", text, re.I):
            self.committing = True
            return kind == b"Q"
        return kind == b"S" and getattr(self, "committing", False)

    def _cut(self, out: bytes) -> None:
        with self.lock:
            self.cut = True
        self.proxy.done.set()
        if self.proxy.mode == "drop":  # the durable message is lost: the server sees the connection end mid-claim
            self.cut_at = time.time()
            for sock in (self.client, self.server):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.client.close()
            return
        self.server.sendall(out)  # the durable message reaches the server ...
        try:  # ... and the client loses its connection before any reply
            self.client.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.client.close()
        self.cut_at = time.time()

    # ---- server -> client: forward (slowly), or read the reply the client never gets
    def _from_server(self) -> None:
        said, got = [], b""
        while True:
            try:
                self.server.settimeout(DRAIN_S if self.cut else IDLE_S)
                chunk = self.server.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            with self.lock:
                cut = self.cut
            if cut:
                got += chunk
                said = _replies(got)
                if "ReadyForQuery" in said:
                    break
                continue
            if self.proxy.mode == "slow":
                time.sleep(self.proxy.delay_ms / 1000)
            try:
                self.client.sendall(chunk)
            except OSError:
                break
        if self.cut:
            self.proxy.report({"cut": self.armed, "server_said": [s for s in said if s != "ReadyForQuery"],
                               "dropped": self.proxy.mode == "drop", "at": getattr(self, "cut_at", time.time())})


def _replies(buf: bytes) -> list[str]:
    """The server's messages in ``buf``, named: ``CommandComplete <tag>``, ``Error <message>``, ``ReadyForQuery``."""
    out, at = [], 0
    while at + 5 <= len(buf):
        kind, n = buf[at:at + 1], struct.unpack("!I", buf[at + 1:at + 5])[0]
        body = buf[at + 5:at + 1 + n]
        if len(body) < n - 4:
            break
        if kind == b"C":
            out.append("CommandComplete " + body.rstrip(b"\0").decode(errors="replace"))
        elif kind == b"E":
            fields = dict((f[:1], f[1:].decode(errors="replace")) for f in body.split(b"\0") if f)
            out.append("Error " + fields.get(b"M", "?"))
        elif kind == b"Z":
            out.append("ReadyForQuery")
        at += 1 + n
    return out


class Proxy:
    """Listens on ``listen`` (host, port) and forwards to ``upstream`` ((host, port) or a Unix socket path)."""

    def __init__(self, listen: tuple[str, int], upstream, mode: str, trigger: str = "", at: str = "sync",
                 delay_ms: float = 0.0, report_fd: int | None = None):
        self.listen, self.upstream, self.mode = listen, upstream, mode
        self.trigger, self.at, self.delay_ms, self.report_fd = trigger, at, delay_ms, report_fd
        self.done = threading.Event()
        self.wlock = threading.Lock()

    def report(self, event: dict) -> None:
        if self.report_fd is not None:
            with self.wlock:
                os.write(self.report_fd, (json.dumps(event) + "\n").encode())

    def serve(self, lifetime_s: float, ready_fd: int | None = None) -> None:
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(self.listen)
        srv.listen(64)
        srv.settimeout(0.5)
        if ready_fd is not None:
            os.write(ready_fd, b"up\n")
        deadline = time.monotonic() + lifetime_s
        while time.monotonic() < deadline:
            try:
                client, _ = srv.accept()
            except socket.timeout:
                continue
            try:
                conn = _Conn(self, client)
            except OSError as exc:
                self.report({"error": f"upstream: {exc}"})
                client.close()
                continue
            threading.Thread(target=conn.run, daemon=True).start()


def serve_child(listen: tuple[str, int], upstream, mode: str, trigger: str, at: str, delay_ms: float,
                report_fd: int, lifetime_s: float) -> None:
    """The proxy process's body (forked by runners/resume/nemesis.py): named ``dlnem-proxy`` for ``ps``."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, b"dlnem-proxy", 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass
    Proxy(listen, upstream, mode, trigger, at, delay_ms, report_fd).serve(lifetime_s, report_fd)


def main(argv: list[str] | None = None) -> int:
    """``python -m runners.resume.nemesis_proxy``: the same proxy between a real worker host and a real database."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m runners.resume.nemesis_proxy", description=main.__doc__)
    ap.add_argument("--listen", required=True, help="HOST:PORT the workers dial instead of the database")
    ap.add_argument("--upstream", required=True, help="HOST:PORT of the database (or the path of its Unix socket)")
    ap.add_argument("--mode", choices=("cut", "drop", "slow", "pass"), default="pass")
    ap.add_argument("--trigger", default=r"INSERT INTO driftlab_guard_claims\b",
                    help="regex of the statement that carries the claim (cut and drop modes)")
    ap.add_argument("--at", choices=("sync", "commit"), default="commit",
                    help="cut at the Sync after the statement (autocommit) or at its transaction's COMMIT")
    ap.add_argument("--delay-ms", type=float, default=150.0, help="slow mode: hold each reply this long")
    ap.add_argument("--lifetime-s", type=float, default=600.0, help="the proxy exits after this long")
    a = ap.parse_args(argv)

    def addr(text: str):
        host, sep, port = text.rpartition(":")
        return (host, int(port)) if sep and port.isdigit() else text

    listen = addr(a.listen)
    if not isinstance(listen, tuple):
        ap.error("--listen: HOST:PORT")
    print(f"nemesis proxy: {a.mode} on {a.listen} -> {a.upstream}; events on stdout", file=sys.stderr, flush=True)
    Proxy(listen, addr(a.upstream), a.mode, a.trigger, a.at, a.delay_ms, sys.stdout.fileno()).serve(a.lifetime_s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
