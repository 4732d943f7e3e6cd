"""The processes a path needs: a Chainlit app, vLLM's OpenAI-compatible server."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from vllm.engine.arg_utils import AsyncEngineArgs

__all__ = ["Server", "chainlit_app", "openai_server", "serve_flags"]

ROOT = Path(__file__).resolve().parent.parent
# The engine arguments the app sets (engine.engine_args), as vLLM's server flags.
SERVE_FLAGS = (
    "model",
    "tokenizer",
    "dtype",
    "max_model_len",
    "gpu_memory_utilization",
    "max_num_seqs",
    "load_format",
    "kv_cache_memory_bytes",
    "block_size",
    "tensor_parallel_size",
    "pipeline_parallel_size",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """A server process in a process group of its own (``stop`` ends the group), but not
    in a session of its own: with Linux's autogroup scheduling, a new session makes a
    scheduling group where vLLM's busy-waiting CPU engine starves the stream to the
    clients (README, "CPU hosts"), which is not what the measurements are about."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def wait(self, path: str, timeout_s: float) -> None:
        """Until ``path`` answers 200 (the process must stay alive meanwhile)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.log.name} exited: {self.log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}{path}", timeout=5).status_code == 200:
                    return
            time.sleep(0.5)
        raise TimeoutError(f"{self.url}{path} not ready after {timeout_s} s")

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@contextlib.contextmanager
def _started(command: list[str], env: dict[str, str], log: Path, port: int) -> Iterator[Server]:
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, process_group=0
        )
    server = Server(f"http://127.0.0.1:{port}", process, log)
    try:
        yield server
    finally:
        server.stop()


def chainlit_app(
    app: str, env: dict[str, str], log: Path
) -> contextlib.AbstractContextManager[Server]:
    port = free_port()
    command = [sys.executable, "-m", "chainlit", "run", app, "--headless", "--host", "127.0.0.1"]
    return _started([*command, "--port", str(port)], env, log, port)


def serve_flags(args: AsyncEngineArgs) -> list[str]:
    flags = []
    for name in SERVE_FLAGS:
        value = getattr(args, name)
        if value is not None:
            flags += [f"--{name.replace('_', '-')}", str(value)]
    if args.enforce_eager:
        flags.append("--enforce-eager")
    return flags


def openai_server(args: AsyncEngineArgs, log: Path) -> contextlib.AbstractContextManager[Server]:
    """vLLM's own server with the app's engine arguments (``vllm serve``)."""
    port = free_port()
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", *serve_flags(args)]
    command += ["--port", str(port), "--served-model-name", "bench", "--disable-uvicorn-access-log"]
    return _started(command, dict(os.environ), log, port)
