"""Chat with a running app through Chainlit's own Socket.IO protocol, as a browser tab does.

Usage::

    python scripts/socket_chat.py http://127.0.0.1:8000 "你好" [--wait-ready 300]

Prints the streamed reply, then one line with the reply's frame count and time. Exits 1
if no reply came. It polls ``/readyz`` first when ``--wait-ready`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testing.chat_client import ChatClient, wait_ready


async def chat(url: str, text: str, timeout_s: float, ready_s: float) -> int:
    if ready_s:
        await wait_ready(url, ready_s)
    async with ChatClient.connect(url) as client:
        reply = await client.send(text, timeout_s=timeout_s)
    print(reply.text)
    took = (reply.ended_at or reply.sent_at) - reply.sent_at
    print(f"[{len(reply.frames)} websocket frames, {took:.2f} s]", file=sys.stderr)
    return 0 if reply.frames else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("url")
    parser.add_argument("message")
    parser.add_argument("--wait-ready", type=float, default=0, help="seconds to wait for /readyz")
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    return asyncio.run(chat(args.url, args.message, args.timeout, args.wait_ready))


if __name__ == "__main__":
    sys.exit(main())
