"""``ERNIE_WORKERS=N``: one engine core, N web front ends attached to it, one port.

The launcher starts HAProxy on the public port (``serve.proxy``), the engine core for N
clients (``engine.shared_core``; none when ``ERNIE_ENGINE=remote``), and N spawned
workers, each Chainlit's app under uvicorn (``serve.web``) holding its own ``AsyncLLM``
client in-process: tokens go from the core to the worker that asked, over vLLM's own
sockets, with no HTTP in between. Then it watches them: vLLM lets no front end attach
twice to a core, and a front end does not notice its core's death, so when any of them
ends the launcher logs the cause in one line and restarts the group (at most
``ERNIE_RESTART_TRIES`` times in a row).

Usage::

    exit_code = Group(plan, public=("0.0.0.0", 8000)).run()   # until SIGINT or SIGTERM
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import secrets
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from pathlib import Path

from pydantic import SecretStr
from setproctitle import setproctitle

from deploy.preflight import Plan
from engine.core_errors import exit_reason
from engine.shared_core import SharedCore, join, launch_shared_core

from .proxy import Forwarding, Proxy
from .web import configure_logging, serve_app

__all__ = ["WORKER_TITLE", "Group"]

logger = logging.getLogger("serve.group")

WORKER_TITLE = "ernie-chat worker"
STABLE_S = 600.0  # a group that ran this long starts the count of restarts again
PROXY_START_S = 0.5  # HAProxy binds its port or fails within this
METRICS_DIR = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's multiprocess mode


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _ended(process: BaseProcess) -> str:
    reason = exit_reason(process.exitcode or 0)  # engine.core_errors' words for exit codes
    return f"was {reason}" if reason.startswith("killed") else reason


def run_worker(plan: Plan, core: SharedCore | None, index: int, port: int, folder: Path) -> None:
    """A worker's process: front end ``index`` of the group, serving on ``port``."""
    setproctitle(f"{WORKER_TITLE} {index}")  # what ps and top show
    configure_logging(plan.settings)
    join(plan, core, index, folder)
    serve_app("127.0.0.1", port)


@dataclass
class Worker:
    index: int
    port: int
    process: BaseProcess


class Group:
    def __init__(self, plan: Plan, public: tuple[str, int]) -> None:
        self.plan = plan
        self.public = public
        self.ports = [_free_port() for _ in range(plan.workers)]
        self.folder = Path(tempfile.mkdtemp(prefix="ernie-group-"))
        settings = plan.settings
        own = settings.auth_proxy_secret is None  # else an outer proxy proves addresses
        secret = secrets.token_hex(32) if own else None
        self.forwarding = Forwarding(settings.auth_proxy_secret_header, secret)
        self._stopping = False

    def worker_plan(self) -> Plan:
        """The workers' plan: they trust the group's proxy. Each warms up its own client
        (``ERNIE_WARMUP``: a worker left cold made the first burst 4 x slower than steady
        on the H200)."""
        if self.forwarding.secret is None:
            return self.plan
        secret = SecretStr(self.forwarding.secret)
        settings = self.plan.settings.with_values("the worker group", auth_proxy_secret=secret)
        return replace(self.plan, settings=settings)

    def run(self) -> int:
        """Serve until SIGINT or SIGTERM (0), or until restarts run out (1)."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._stop)
        os.environ[METRICS_DIR] = str(self._metrics_dir())
        try:
            proxy = self._open_port()
            return 1 if proxy is None else self._serve(proxy)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)  # config, logs, metrics, limits

    def _serve(self, proxy: Proxy) -> int:
        """Run the group, restarting it when a process dies, until stopped or out of tries."""
        tries, started = 0, time.monotonic()
        try:
            while not self._stopping:
                cause = self._run_once(proxy)
                if proxy.process.poll() is not None:  # it ended: the port needs it back
                    proxy = Proxy.start(self.public, self.ports, self.forwarding, self.folder)
                if cause is None:
                    return 0
                tries = 1 if time.monotonic() - started > STABLE_S else tries + 1
                if tries > self.plan.settings.restart_tries:
                    logger.error("%s; giving up after %d restarts", cause, tries - 1)
                    return 1
                logger.error("%s; restarting the group (restart %d)", cause, tries)
                started = time.monotonic()
            return 0
        except SystemExit:  # a signal while the engine core was starting
            return 0
        finally:
            proxy.stop()

    def _open_port(self) -> Proxy | None:
        """HAProxy on the public port; None, with the cause logged, when it cannot serve."""
        proxy = Proxy.start(self.public, self.ports, self.forwarding, self.folder)
        time.sleep(PROXY_START_S)
        ended = proxy.ended()
        if ended:  # the port is taken, say: nothing to serve on
            logger.error("%s", ended)
            return None
        logger.info(
            "serving on http://%s:%d: %d workers on one engine, HAProxy in front (its log: %s)",
            *self.public,
            len(self.ports),
            proxy.log,
        )
        return proxy

    def _metrics_dir(self) -> Path:
        folder = self.folder / "metrics"
        folder.mkdir(exist_ok=True)
        return folder

    def _stop(self, signum: int, frame: object) -> None:
        if not self._stopping:
            self._stopping = True
            logger.info("stopping the group (%s)", signal.Signals(signum).name)
            raise SystemExit(0)

    @contextlib.contextmanager
    def _core(self) -> Iterator[SharedCore | None]:
        if self.plan.settings.engine == "remote":
            yield None
            return
        with launch_shared_core(self.plan, clients=len(self.ports)) as core:
            yield core

    def _run_once(self, proxy: Proxy) -> str | None:
        """Start the core and the workers and watch them: the first one to end, as one
        line, or None when the launcher was told to stop."""
        workers: list[Worker] = []
        core: SharedCore | None = None
        shared = Path(tempfile.mkdtemp(prefix="run-", dir=self.folder))  # new counts each start
        try:
            with self._core() as core:
                workers = [self._spawn(core, i, port, shared) for i, port in enumerate(self.ports)]
            return self._watch(core, workers, proxy)
        except SystemExit:
            return None
        except Exception as exc:  # the core did not start: vLLM logged its root cause above
            return f"the engine core failed to start ({type(exc).__name__}: {exc})"
        finally:
            _stop_all(workers)
            if core is not None:
                core.shutdown()

    def _spawn(self, core: SharedCore | None, index: int, port: int, shared: Path) -> Worker:
        spawn = multiprocessing.get_context("spawn")
        process = spawn.Process(
            target=run_worker,
            args=(self.worker_plan(), core, index, port, shared),
            name=f"ernie-worker-{index}",
        )
        process.start()
        return Worker(index, port, process)

    def _watch(self, core: SharedCore | None, workers: list[Worker], proxy: Proxy) -> str:
        by_sentinel = {w.process.sentinel: w for w in workers}
        while True:
            wait([*by_sentinel, *(core.sentinels() if core else [])], timeout=1.0)
            for worker in workers:
                process = worker.process
                if process.exitcode is not None:
                    return f"worker {worker.index} (pid {process.pid}) {_ended(process)}"
            dead = core.dead() if core else None
            if dead:
                return dead
            ended = proxy.ended()
            if ended:
                return ended


def _stop_all(workers: list[Worker]) -> None:
    """Stop the workers (SIGTERM, then SIGKILL after 10 s) and drop their live metrics."""
    from prometheus_client import multiprocess

    for worker in workers:
        if worker.process.exitcode is None:
            worker.process.terminate()
    deadline = time.monotonic() + 10
    for worker in workers:
        worker.process.join(max(0.0, deadline - time.monotonic()))
        if worker.process.exitcode is None:
            worker.process.kill()
            worker.process.join()
        if os.environ.get(METRICS_DIR) and worker.process.pid is not None:
            multiprocess.mark_process_dead(worker.process.pid)  # type: ignore[no-untyped-call]
