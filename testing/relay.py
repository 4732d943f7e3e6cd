"""A TCP relay on a loopback port to a running server: the server "comes up" on a port
where nothing listened before (an app started before its ``vllm serve``).

Usage::

    async with relay(port, vllm_server.url):   # 127.0.0.1:port now reaches the server
        ...
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

__all__ = ["relay"]


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def relay(port: int, target_url: str) -> AsyncIterator[None]:
    """Every connection to 127.0.0.1:``port`` joined to ``target_url``'s host and port,
    until the block ends."""
    target = urlsplit(target_url)
    writers: set[asyncio.StreamWriter] = set()

    async def join(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(target.hostname, target.port)
        writers.update((writer, up_writer))
        both = (_pipe(reader, up_writer), _pipe(up_reader, writer))
        await asyncio.gather(*both, return_exceptions=True)

    server = await asyncio.start_server(join, "127.0.0.1", port)
    async with server:  # its end waits for every connection to close: the kept-alive too
        try:
            yield
        finally:
            for writer in writers:
                writer.close()
