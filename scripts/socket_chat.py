"""Chat with a running app through Chainlit's own Socket.IO protocol, as a browser tab does.

Usage::

    python scripts/socket_chat.py http://127.0.0.1:8000 "你好" [--wait-ready 300]

Prints the streamed reply, then one line with the reply's frame count and the app's stats
line. Exits 1 if no reply came. It polls ``/readyz`` first when ``--wait-ready`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import socketio


async def wait_ready(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            try:
                response = await client.get(f"{url}/readyz", timeout=5)
                if response.status_code == 200:
                    return
                body = response.json()
                if body.get("state") == "failed":
                    raise SystemExit(f"engine failed: {body.get('reason')}")
            except httpx.HTTPError:
                pass
            await asyncio.sleep(1)
    raise SystemExit(f"not ready after {timeout_s} s")


async def chat(url: str, text: str, timeout_s: float) -> int:
    sio = socketio.AsyncClient()
    frames: list[str] = []
    reply: dict[str, Any] = {}
    done = asyncio.Event()
    sent = asyncio.Event()

    @sio.on("stream_start")  # type: ignore[misc]
    async def on_start(step: dict[str, Any]) -> None:
        frames.append(step["output"])
        reply["id"] = step["id"]

    @sio.on("stream_token")  # type: ignore[misc]
    async def on_token(data: dict[str, Any]) -> None:
        frames.append(data["token"])

    @sio.on("new_message")  # type: ignore[misc]
    async def on_message(step: dict[str, Any]) -> None:
        if step.get("id") == reply.get("id"):  # the final, complete reply
            reply["final"] = step["output"]

    @sio.on("task_end")  # type: ignore[misc]
    async def on_task_end(*_: Any) -> None:
        if sent.is_set():
            done.set()

    auth = {
        "clientType": "webapp",
        "sessionId": str(uuid.uuid4()),
        "threadId": None,
        "userEnv": "{}",
        "chatProfile": None,
    }
    await sio.connect(url, socketio_path="/ws/socket.io", auth=auth, transports=["websocket"])
    await sio.emit("connection_successful")
    await asyncio.sleep(0.5)
    started = time.monotonic()
    sent.set()
    await sio.emit(
        "client_message",
        {
            "message": {
                "id": str(uuid.uuid4()),
                "threadId": "",
                "name": "User",
                "type": "user_message",
                "output": text,
                "createdAt": datetime.now(UTC).isoformat(),
            },
            "fileReferences": [],
        },
    )
    await asyncio.wait_for(done.wait(), timeout_s)
    await sio.disconnect()
    final = reply.get("final", "".join(frames))
    print(final)
    print(f"[{len(frames)} websocket frames, {time.monotonic() - started:.2f} s]", file=sys.stderr)
    return 0 if frames else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("url")
    parser.add_argument("message")
    parser.add_argument("--wait-ready", type=float, default=0, help="seconds to wait for /readyz")
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    if args.wait_ready:
        asyncio.run(wait_ready(args.url, args.wait_ready))
    return asyncio.run(chat(args.url, args.message, args.timeout))


if __name__ == "__main__":
    sys.exit(main())
