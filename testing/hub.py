"""A model hub on this machine: a model folder served in the Hugging Face hub's URL layout,
so the real huggingface_hub client (``HF_ENDPOINT``) downloads from it, at a set rate,
stopping midway on demand (``cut_at``), or pausing midway until the test has seen what it
wanted (``hold_at``, ``release()``): what a slow or broken link does to a first start.

Usage::

    with HubServer.run(folder, "test-org/demo", rate=2_000_000) as hub:
        env = {"HF_ENDPOINT": hub.url, "ERNIE_MODEL": "test-org/demo"}
        hub.served                 # body bytes sent so far, by file
    with HubServer.run(folder, "test-org/demo", hold_at=1_000_000) as hub:
        ...                        # every file waits at its first MB
        hub.release()              # and goes on
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

__all__ = ["COMMIT", "HubServer"]

COMMIT = "0123456789abcdef0123456789abcdef01234567"
CHUNK = 64 * 1024


@dataclass
class HubServer:
    folder: Path
    repo: str
    rate: float | None = None  # body bytes a second, per file
    cut_at: int | None = None  # stop every file's body at this byte (the link breaks)
    hold_at: int | None = None  # pause every file's body at this byte until release()
    served: dict[str, int] = field(default_factory=dict)
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _released: threading.Event = field(default_factory=threading.Event)

    @classmethod
    @contextlib.contextmanager
    def run(cls, folder: Path, repo: str, **options: float | None) -> Iterator[HubServer]:
        hub = cls(folder, repo, **options)  # type: ignore[arg-type]
        server = ThreadingHTTPServer(("127.0.0.1", 0), hub._handler())
        server.daemon_threads = True
        hub.url = f"http://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield hub
        finally:
            server.shutdown()
            server.server_close()

    def release(self) -> None:
        """The bodies held at ``hold_at`` go on."""
        self._released.set()

    def files(self) -> dict[str, Path]:
        return {p.name: p for p in sorted(self.folder.iterdir()) if p.is_file()}

    def _info(self) -> dict[str, object]:
        names = [{"rfilename": name} for name in self.files()]
        return {"id": self.repo, "modelId": self.repo, "sha": COMMIT, "siblings": names,
                "private": False, "gated": False, "disabled": False, "tags": []}  # fmt: skip

    def _tree(self) -> list[dict[str, object]]:
        return [
            {"type": "file", "path": name, "size": path.stat().st_size, "oid": _digest(path)}
            for name, path in self.files().items()
        ]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (_Handler,), {"hub": self})


class _Handler(BaseHTTPRequestHandler):
    """The hub's URLs: model info, file tree, and files by commit (Range honoured)."""

    hub: HubServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def _answer(self, *, body: bool) -> None:
        path = self.path.split("?", 1)[0]
        api = f"/api/models/{self.hub.repo}/"
        if path == api.rstrip("/") or path.startswith(api + "revision/"):
            return self._json(self.hub._info(), body)
        if path.startswith(api + "tree/"):
            return self._json(self.hub._tree(), body)
        found = re.fullmatch(rf"/{re.escape(self.hub.repo)}/resolve/[^/]+/(.+)", path)
        file = self.hub.files().get(found.group(1)) if found else None
        if file is None:
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound" if found else "RepoNotFound")
            self.send_header("Content-Length", "0")
            return self.end_headers()
        self._file(file, body)

    def _json(self, value: object, body: bool) -> None:
        data = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _file(self, file: Path, body: bool) -> None:
        size = file.stat().st_size
        asked = re.match(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        start = int(asked.group(1)) if asked else 0
        end = min(int(asked.group(2)) + 1, size) if asked and asked.group(2) else size
        self.send_response(206 if asked else 200)
        self.send_header("ETag", f'"{_digest(file)}"')
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start))
        if asked:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.end_headers()
        if body:
            self._send(file, start, end)

    def _send(self, file: Path, start: int, end: int) -> None:
        with file.open("rb") as data:
            data.seek(start)
            position = start
            while position < end:
                if self.hub.cut_at is not None and position >= self.hub.cut_at:
                    self.close_connection = True
                    return  # the link broke: the client sees a short body
                if self.hub.hold_at is not None and position < self.hub.hold_at <= end:
                    chunk = data.read(self.hub.hold_at - position)  # up to the hold, then wait
                    self._write(file, chunk)
                    position += len(chunk)
                    self.hub._released.wait(timeout=300)
                    continue
                chunk = data.read(min(CHUNK, end - position))
                self._write(file, chunk)
                position += len(chunk)

    def _write(self, file: Path, chunk: bytes) -> None:
        self.wfile.write(chunk)
        with self.hub._lock:
            self.hub.served[file.name] = self.hub.served.get(file.name, 0) + len(chunk)
        if self.hub.rate:
            time.sleep(len(chunk) / self.hub.rate)


def _digest(file: Path) -> str:
    return hashlib.sha256(file.read_bytes()).hexdigest()
