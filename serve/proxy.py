"""HAProxy in front of the workers: one public port, each browser kept on its worker.

Chainlit keeps a chat's session in the process that opened it, so a browser must come
back to the same worker (a reload, a reconnecting socket): a cookie HAProxy inserts on the
first answer pins it, and keeps its chats on that worker's engine core (its prefix
cache). New browsers go to the worker with the fewest connections (a chat is one long
websocket: the least loaded worker, and with as many workers on each core, the least
loaded core). A worker gets none unless ``/readyz`` says its engine is ready: while its
unit restarts, its pages come back to a worker whose core serves, not to one that waits
for its core to load (a restarted worker is up in well under a second; a core loads for
seconds, on a GPU a minute). The workers trust the client address HAProxy forwards only
with the group's secret header (``chat.access.peers``), so per-address limits hold.

Usage::

    forwarding = Forwarding("X-Proxy-Secret", secrets.token_hex(32))  # or None: an outer proxy's
    proxy = Proxy.start(("0.0.0.0", 8000), [8101, 8102], forwarding, folder)  # writes its files
    proxy.process.poll(); proxy.stop()
"""

from __future__ import annotations

import resource
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "COOKIE",
    "SOCKET",
    "STARTING_PAGE",
    "Forwarding",
    "Proxy",
    "ProxyMissingError",
    "ask",
    "config_text",
    "haproxy",
]

COOKIE = "ERNIE_WORKER"
SOCKET = "haproxy.sock"  # the stats socket, in the group's folder
START_S = 10.0  # HAProxy binds its ports or ends within this
HOUR = "1h"  # a chat's websocket may stay open and quiet that long
# HAProxy's answer while no worker is up (the model downloading or loading, a restart): a
# page that says so in both languages and reloads itself, not HAProxy's bare 503.
STARTING_PAGE = (
    "HTTP/1.0 503 Service Unavailable\r\n"
    "Cache-Control: no-cache\r\n"
    "Connection: close\r\n"
    "Retry-After: 5\r\n"
    "Content-Type: text/html; charset=utf-8\r\n"
    "\r\n"
    '<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">'
    "<title>ERNIE chat</title></head><body>"
    "<p>The chat is starting: the model is downloading or loading (the console shows the "
    "progress). This page reloads by itself.</p>"
    "<p>聊天正在启动：正在下载或加载模型（控制台显示进度）。本页会自动刷新。</p>"
    "</body></html>\n"
)


class ProxyMissingError(RuntimeError):
    """HAProxy is not installed; the message says how to get it."""


@dataclass(frozen=True)
class Forwarding:
    """Who proves the forwarded address: the group's own secret, or an outer proxy's.

    With its own secret HAProxy is the front door: it drops every forwarding header a
    client sent and names the peer it saw, and holds each address to ``per_address``
    connections. Behind an outer proxy every connection comes from that proxy: its
    headers pass, and the cap is the outer proxy's to keep. Either way a connection that
    sends no whole request within ``request_timeout_s`` (or stays idle between requests
    that long) is closed."""

    header: str
    secret: str | None  # None: an outer proxy sets the header and the address; pass them
    per_address: int = 256
    request_timeout_s: float = 10


# A client's own word for its address or the page's origin, in any of the usual names.
FORWARDING_HEADERS = ("X-Forwarded-For", "Forwarded", "X-Real-IP", "X-Client-IP",
                      "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Port")  # fmt: skip


def _max_connections() -> int:
    """What the open-file limit allows (``serve.web.raise_open_files``): two sockets a
    proxied connection, and room for HAProxy's own (it refuses to start when it cannot
    raise its limit to fit)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(256, (soft - 512) // 2)


def _front_door(forwarding: Forwarding) -> str:
    """Who the client is, said by HAProxy alone (the group's own secret), with a cap on
    each address's connections; behind an outer proxy, nothing (its headers pass)."""
    if forwarding.secret is None:
        return ""
    dropped = "".join(f"  http-request del-header {name}\n" for name in FORWARDING_HEADERS)
    return (
        "  stick-table type ipv6 size 1m expire 60s store conn_cur\n"
        "  tcp-request connection track-sc0 src\n"
        f"  tcp-request connection reject if {{ sc0_conn_cur gt {forwarding.per_address} }}\n"
        f"{dropped}"
        f"  http-request set-header {forwarding.header} {forwarding.secret}\n"
        "  http-request set-header X-Forwarded-For %[src]\n"
    )


def config_text(
    public: tuple[str, int], workers: list[int], forwarding: Forwarding, page: Path
) -> str:
    """HAProxy's configuration for the group (``page``: ``STARTING_PAGE``'s file; its
    stats socket beside it, ``SOCKET``).

    Header names with anything but letters, digits and hyphens are dropped
    (``X_Forwarded_For`` reached the app as ``X-Forwarded-For``); a request must arrive
    whole, its body too (buffered before it is passed on: a byte every 5 s held a
    worker's request for ever), within ``ERNIE_REQUEST_TIMEOUT_S`` (10 s) and an idle
    keep-alive connection ends after as long, so idle connections cannot hold the port;
    a chat's websocket may stay open and quiet an hour.
    A worker that refuses a connection is down at once, and a request that a worker
    refused or closed unanswered goes to another (a dead unit's two workers have the
    fewest connections: before its checks failed, new pages went there, and got a 503
    after three refusals or a 502 from a worker that stopped under them).
    """
    host, port = public
    request = f"{round(forwarding.request_timeout_s * 1000)}ms"
    servers = "\n".join(
        f"  server w{i} 127.0.0.1:{p} cookie w{i} check inter 1s fall 2 rise 1 "
        "observe layer4 error-limit 1 on-error mark-down"
        for i, p in enumerate(workers)
    )
    return f"""global
  maxconn {_max_connections()}
  stats socket {page.with_name(SOCKET)} mode 600 level user
defaults
  mode http
  retries {len(workers)}
  retry-on conn-failure empty-response
  option redispatch 1
  timeout connect 5s
  option http-buffer-request
  timeout http-request {request}
  timeout http-keep-alive {request}
  timeout client 30s
  timeout client-fin 10s
  timeout server {HOUR}
  timeout tunnel {HOUR}
  errorfile 503 {page}
frontend chat
  bind {host}:{port}
  option http-restrict-req-hdr-names delete
{_front_door(forwarding)}  default_backend workers
backend workers
  balance leastconn
  cookie {COOKIE} insert indirect nocache httponly
  option httpchk GET /readyz
{servers}
"""


def haproxy() -> str:
    """HAProxy's binary (Debian puts it in /usr/sbin, often not on a user's PATH)."""
    binary = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin")
    if binary is None:
        raise ProxyMissingError(
            "ERNIE_WORKERS above 1 needs HAProxy: apt-get install haproxy "
            "(scripts/start.sh does it), or set ERNIE_WORKERS=1"
        )
    return binary


@dataclass
class Proxy:
    process: subprocess.Popen[bytes]
    log: Path  # HAProxy's own messages (a worker DOWN while the group starts, say)

    @classmethod
    def start(
        cls, public: tuple[str, int], workers: list[int], forwarding: Forwarding, folder: Path
    ) -> Proxy:
        binary = haproxy()
        page = folder / "starting.http"
        page.write_bytes(STARTING_PAGE.encode())
        config = folder / "haproxy.cfg"
        config.write_text(config_text(public, workers, forwarding, page))
        log = folder / "haproxy.log"
        with log.open("ab") as out:
            # -db: stay in the foreground, so the launcher watches and stops it like a worker.
            process = subprocess.Popen(
                [binary, "-db", "-f", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        return cls(process, log)

    def started(self) -> str | None:
        """None once HAProxy answers on its stats socket (it does once every port is
        bound); how it ended, in one line, if it ended first."""
        deadline = time.monotonic() + START_S
        while True:
            ended = self.ended()
            if ended is not None:
                return ended
            if ask(self.log.with_name(SOCKET), "show info"):
                return None
            if time.monotonic() > deadline:
                return f"HAProxy did not start within {START_S:.0f} s (its log: {self.log})"
            time.sleep(0.02)

    def ended(self) -> str | None:
        """How HAProxy ended, with its first alert (the cause: a port in use, say), or None."""
        code = self.process.poll()
        if code is None:
            return None
        lines = self.log.read_text(errors="replace").splitlines()
        alerts = [line.split(":", 1)[-1].strip() for line in lines if "[ALERT]" in line]
        return f"HAProxy ended with exit code {code}" + (f": {alerts[0]}" if alerts else "")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def ask(stats_socket: Path, command: str) -> str:
    """HAProxy's answer to ``command`` on its stats socket; "" while it does not answer."""
    try:
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(2)
            conn.connect(str(stats_socket))
            conn.sendall(command.encode() + b"\n")
            return b"".join(iter(lambda: conn.recv(65536), b"")).decode(errors="replace")
    except OSError:
        return ""
