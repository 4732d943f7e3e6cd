"""The processes the tests and the benchmark start: the app, vLLM's OpenAI server.

Usage::

    with AppServer.run({"ERNIE_MODEL": path}, log) as app:       # python -m serve
        app.wait("/", timeout_s=180); app.readyz()
    with openai_server(plan, log) as vllm:                         # vllm serve, same args
        vllm.wait("/v1/models", timeout_s=300)
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from engine.plan.plan import Plan
from serve import ports as serve_ports
from serve.proxy import SOCKET, ask

from .background import environ
from .polling import until, until_sync

__all__ = ["ROOT", "AppServer", "Server", "free_port", "openai_server", "probe", "serve_flags"]

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


GIVEN: set[int] = set()  # this session's ports: a server may bind its own minutes later


def probe() -> httpx.Client:
    """A client for a loop that asks a server again and again: httpx.get() builds a client,
    and with it a TLS context from the CA bundle (30-40 ms of CPU), at every try; polling
    loops spent 86 s of the test process's CPU there (py-spy, a fresh clone's run)."""
    return httpx.Client(timeout=5)


def free_port() -> int:
    """A port no other server of the session was given, below the ephemeral range
    (``serve.ports``): a server that loads on idle CPU binds it minutes later."""
    port = serve_ports.free_port(taken=GIVEN)
    GIVEN.add(port)
    return port


def clean_environ(**values: str) -> dict[str, str]:
    """This process's environment without its ERNIE_* settings, plus ``values``."""
    return {k: v for k, v in environ().items() if not k.startswith("ERNIE_")} | values


@dataclass
class Server:
    """A server process in a process group of its own (``stop`` ends the group), but not
    in a session of its own: with Linux's autogroup scheduling, a new session makes a
    scheduling group where vLLM's busy-waiting CPU engine starves the stream to the
    clients (docs/operations.md, "CPU and GPU"), which is not what the tests are about."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    @classmethod
    @contextlib.contextmanager
    def started(
        cls,
        command: list[str],
        env: Mapping[str, str],
        log: Path,
        *,
        open_files: int | None = None,
        cwd: Path = ROOT,
        port: int | None = None,
    ) -> Iterator[Any]:
        """``command`` (which takes ``{port}``: ``port``, or a free one) running in ``cwd``
        until the block ends; ``open_files``: its soft limit of open files (1,024 is many
        distributions')."""
        port = port or free_port()

        def limit_open_files() -> None:
            _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, hard))

        with log.open("wb") as out:
            process = subprocess.Popen(
                [part.format(port=port) for part in command],
                cwd=cwd,
                env=dict(env),
                stdout=out,
                stderr=subprocess.STDOUT,
                process_group=0,
                preexec_fn=None if open_files is None else limit_open_files,
            )
        server = cls(f"http://127.0.0.1:{port}", process, log)
        try:
            yield server
        finally:
            server.stop()

    def wait(self, path: str, timeout_s: float) -> None:
        """Until ``path`` answers 200 (RuntimeError if the process exits meanwhile)."""

        def answers(client: httpx.Client) -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.log.name} exited: {self.log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                return client.get(f"{self.url}{path}").status_code == 200
            return False

        with probe() as client:
            until_sync(lambda: answers(client), timeout_s, f"answer from {self.url}{path}")

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


class AppServer(Server):
    """The app as ``scripts/start.sh`` starts it (``python -m serve``), or another
    Chainlit app under ``chainlit run``, with these ERNIE_* settings."""

    @classmethod
    @contextlib.contextmanager
    def run(
        cls,
        env: Mapping[str, str],
        log: Path,
        *,
        app: str | None = None,
        nice: int = 0,
        open_files: int | None = None,
        root: Path = ROOT,
        prefix: Sequence[str] = (),
        port: int | None = None,
    ) -> Iterator[AppServer]:
        """The app until the block ends (``app``: ``chainlit run`` that file instead);
        ``nice``: under ``nice`` (vLLM's CPU engine spins on both cores of a small
        machine; a browser under test needs CPU too); ``open_files``: as ``started``;
        ``root``: the checkout it runs from (another version, for a side-by-side run);
        ``prefix``: a command it runs under, as ``openai_server``'s."""
        command = [sys.executable, "-m", "serve"]
        if app is not None:
            command = [sys.executable, "-m", "chainlit", "run", app, "--headless"]
        command += ["--host", "127.0.0.1", "--port", "{port}"]
        if nice:
            command = ["nice", "-n", str(nice), *command]
        command = [*prefix, *command]
        full_log = {"ERNIE_LOG_FILE": str(log.with_name(f"{log.stem}-full.log"))}  # beside ``log``
        environ = clean_environ(**{**full_log, **env})
        started = cls.started(command, environ, log, open_files=open_files, cwd=root, port=port)
        with started as server:
            yield server

    def group_folder(self) -> Path:
        """A group's folder (its HAProxy configuration, log and stats socket), as the
        console's "serving on" line names HAProxy's log."""
        return Path(re.findall(r"its log: (\S+)/haproxy\.log\)", self.log.read_text())[-1])

    def worker_urls(self) -> list[str]:
        """A group's workers' own addresses, read from its HAProxy configuration."""
        config = (self.group_folder() / "haproxy.cfg").read_text()
        ports = dict.fromkeys(re.findall(r"server w\d+ 127\.0\.0\.1:(\d+)", config))
        return [f"http://127.0.0.1:{port}" for port in ports]

    async def every_worker_ready(self, timeout_s: float = 300) -> None:
        """Until every worker of a group is ready and HAProxy sends it visitors (its stats
        say UP): the port's ``/readyz`` is any worker's, and each unit loads at its own
        pace."""

        def ready() -> bool:
            urls, codes = self.worker_urls(), []
            for url in urls:
                with contextlib.suppress(httpx.HTTPError):
                    codes.append(client.get(f"{url}/readyz").status_code)
            return codes == [200] * len(urls)

        def routed() -> bool:
            stats = ask(self.group_folder() / SOCKET, "show stat").splitlines()
            states = [line.split(",")[17] for line in stats if line.startswith("workers,w")]
            return bool(states) and all(state == "UP" for state in states)

        with probe() as client:
            await until(ready, timeout_s, "every worker ready")
        await until(routed, 30, "HAProxy sending visitors to every worker")

    def readyz(self) -> tuple[int, dict[str, Any]]:
        response = httpx.get(f"{self.url}/readyz", timeout=5)
        return response.status_code, response.json()

    async def wait_for_running(
        self, count: int, *, within_s: float, headers: dict[str, str] | None = None
    ) -> None:
        """Until the engine holds ``count`` requests (``/readyz``), polling without blocking;
        ``headers``: the operations token, where the app has one."""
        async with httpx.AsyncClient(timeout=5, headers=headers) as client:

            async def holds() -> bool:
                body = (await client.get(f"{self.url}/readyz")).json()
                return bool(body.get("running_requests") == count)

            await until(holds, within_s, f"{count} running requests", interval_s=0.02)


def serve_flags(plan: Plan) -> list[str]:
    """``vllm serve`` flags for the engine arguments the app would use."""
    from engine.engine_args import build_engine_args

    args = build_engine_args(plan)
    flags = []
    for name in SERVE_FLAGS:
        value = getattr(args, name)
        if value is not None:
            flags += [f"--{name.replace('_', '-')}", str(value)]
    if args.enforce_eager:
        flags.append("--enforce-eager")
    return flags


def openai_server(
    plan: Plan, log: Path, *, api_servers: int = 1, prefix: Sequence[str] = ()
) -> contextlib.AbstractContextManager[Server]:
    """vLLM's own server with the app's engine arguments (``vllm serve``), with
    ``api_servers`` API processes on its engine core; ``prefix``: a command it runs under
    (``testing.background.lowest_priority()``)."""
    command = [*prefix, sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    command += serve_flags(plan)
    if api_servers > 1:  # only ``vllm serve`` starts several (its CLI needs the "vllm" wheel)
        command = [*prefix, sys.executable, "-m", "vllm.entrypoints.cli.main", "serve"]
        command += serve_flags(plan)
        command += ["--api-server-count", str(api_servers)]
    command += ["--port", "{port}", "--served-model-name", "bench", "--disable-uvicorn-access-log"]
    return Server.started(command, environ(), log)
