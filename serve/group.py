"""``ERNIE_WORKERS=N``, ``ERNIE_ENGINES=K``: K engine cores, N web front ends attached to
each, one port.

The launcher starts HAProxy on the public port (``serve.proxy``; until a worker is up it
answers with a page that says the chat is starting), fetches a hub model's files once with
the progress on its console (``engine.download``: a core would fetch them unseen), then
starts each engine core for its N clients (``engine.shared_core``; none when
``ERNIE_ENGINE=remote``) on its GPUs (``engine.plan.placement``), one after the other on a GPU
(a core measures the GPU's free memory while it starts), all at once on the CPU, with its
N workers (``serve.worker``: forked from one server that imported them once), each
Chainlit's app under uvicorn (``serve.web``) holding its own ``AsyncLLM`` client
in-process: tokens go from the core to the worker that asked, over vLLM's own sockets,
with no HTTP in between. Then it watches them: vLLM lets no front end attach twice to a
core, and a front end does not notice its core's death, so when any process of a core's
unit ends the launcher logs the cause in one line and restarts that unit (at most
``ERNIE_RESTART_TRIES`` times in a row) while the other cores' units keep serving.

Usage::

    exit_code = Group(plan, public=("0.0.0.0", 8000)).run()   # until SIGINT or SIGTERM
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from multiprocessing.connection import wait
from pathlib import Path

from pydantic import SecretStr

from engine import (
    Download,
    DownloadError,
    Plan,
    SharedCore,
    fetch_model,
    launch_shared_core,
)

from .ports import free_port
from .proxy import Forwarding, Proxy
from .units import METRICS_DIR, Slot, Unit, Worker, visible_devices
from .worker import run_worker, start_server, worker_context

__all__ = ["Group"]

logger = logging.getLogger("serve.group")

STABLE_S = 600.0  # a group that ran this long starts the count of restarts again


class Group:
    def __init__(self, plan: Plan, public: tuple[str, int]) -> None:
        self.plan = plan
        self.public = public
        per_core, self.ports = plan.workers, list[int]()
        for _ in range(plan.engines * per_core):  # each its own, bound when its worker is up
            self.ports.append(free_port(taken=[*self.ports, public[1]]))
        slots = [Slot(n, n % per_core, port) for n, port in enumerate(self.ports)]
        self.units = [
            Unit(k, slots[k * per_core : (k + 1) * per_core]) for k in range(plan.engines)
        ]
        self.folder = Path(tempfile.mkdtemp(prefix="ernie-group-"))
        self.shared = self.folder / "shared"  # what the workers share: the limits
        self.shared.mkdir()
        settings = plan.settings
        own = settings.auth_proxy_secret is None  # else an outer proxy proves addresses
        secret = secrets.token_hex(32) if own else None
        self.forwarding = Forwarding(
            settings.auth_proxy_secret_header,
            secret,
            settings.max_connections_per_address,
            settings.request_timeout_s,
        )
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
        """Start the units, and start again each one that ends, until stopped or out of
        tries."""
        down = list(self.units)
        try:
            start_server()  # the workers' imports, beside the download and the cores
            if not self._fetch():
                return 1
            while True:
                while down:
                    starting, down = self._next_start(down)
                    for broken, failed in self._start(starting):
                        if not self._again(broken, failed):
                            return 1
                        down.append(broken)
                unit, cause = self._watch(proxy)
                if unit is None:  # HAProxy ended: the port needs it back
                    logger.error("%s; starting it again", cause)
                    proxy = Proxy.start(self.public, self.ports, self.forwarding, self.folder)
                    continue
                unit.stop()
                if not self._again(unit, cause):
                    return 1
                down.append(unit)
        except SystemExit:  # SIGINT or SIGTERM
            return 0
        finally:
            for unit in self.units:
                unit.stop()
            proxy.stop()

    def _fetch(self) -> bool:
        """A hub model's files, fetched before any core starts; False, with the cause
        logged in one line, when the download stopped."""
        if self.plan.settings.engine == "remote":
            return True
        try:
            fetch_model(self.plan.settings, Download())
        except DownloadError as exc:
            logger.error("%s", exc)
            return False
        return True

    def _again(self, unit: Unit, cause: str) -> bool:
        """Count a restart of ``unit``: False, with the cause logged, when tries ran out."""
        unit.tries = 1 if time.monotonic() - unit.started > STABLE_S else unit.tries + 1
        if unit.tries > self.plan.settings.restart_tries:
            logger.error("%s; giving up after %d restarts", cause, unit.tries - 1)
            return False
        what = "the group" if len(self.units) == 1 else f"engine core {unit.number}'s unit"
        logger.error("%s; restarting %s (restart %d)", cause, what, unit.tries)
        return True

    def _open_port(self) -> Proxy | None:
        """HAProxy on the public port; None, with the cause logged, when it cannot serve."""
        proxy = Proxy.start(self.public, self.ports, self.forwarding, self.folder)
        ended = proxy.started()
        if ended:  # the port is taken, say: nothing to serve on
            logger.error("%s", ended)
            return None
        cores = "one engine" if len(self.units) == 1 else f"{len(self.units)} engine cores"
        logger.info(
            "serving on http://%s:%d: %d workers on %s, HAProxy in front (its log: %s)",
            *self.public,
            len(self.ports),
            cores,
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

    def _next_start(self, down: list[Unit]) -> tuple[list[Unit], list[Unit]]:
        """The units to start now, and the rest. On a GPU one at a time: a core measures the
        GPU's free memory while it loads. On the CPU (or with no core: a remote engine)
        all at once: two cores on 2 CPUs loaded in 40 s instead of 60 (``test_workers``)."""
        if self.plan.hardware.cpu or self.plan.settings.engine == "remote":
            return down, []
        return down[:1], down[1:]

    def _start(self, units: list[Unit]) -> list[tuple[Unit, str]]:
        """Start ``units``' engine cores and workers, then wait for their cores together;
        each unit that failed, with the cause as one line."""
        failed: list[tuple[Unit, str]] = []
        with contextlib.ExitStack() as starting:
            for unit in units:
                starting.enter_context(self._starting(unit, failed))
        return failed

    @contextlib.contextmanager
    def _starting(self, unit: Unit, failed: list[tuple[Unit, str]]) -> Iterator[None]:
        """``unit``'s core and workers started; leaving waits for its core (the model
        loads). A failure is added to ``failed``, not raised: the other units go on."""
        unit.started = time.monotonic()
        waited = False
        try:
            with visible_devices(self.plan.placement.devices(unit.number)), self._core() as core:
                unit.core = core
                unit.workers = [self._spawn(core, slot) for slot in unit.slots]
                waited = True
                yield
        except Exception as exc:  # the core did not start: vLLM logged its root cause above
            unit.stop()
            name = "the engine core" if len(self.units) == 1 else f"engine core {unit.number}"
            failed.append((unit, f"{name} failed to start ({type(exc).__name__}: {exc})"))
        if not waited:  # it failed before its block: the others' blocks still run
            yield

    @contextlib.contextmanager
    def _core(self) -> Iterator[SharedCore | None]:
        if self.plan.settings.engine == "remote":
            yield None
            return
        with launch_shared_core(self.plan, clients=self.plan.workers) as core:
            yield core

    def _spawn(self, core: SharedCore | None, slot: Slot) -> Worker:
        process = worker_context().Process(
            target=run_worker,
            args=(self.worker_plan(), core, slot, self.shared, self.public[0]),
            name=f"ernie-worker-{slot.number}",
        )
        process.start()
        return Worker(slot, process)

    def _watch(self, proxy: Proxy) -> tuple[Unit | None, str]:
        """Wait until a process ends: its unit (None: HAProxy) and the cause."""
        while True:
            wait([s for unit in self.units for s in unit.sentinels()], timeout=1.0)
            for unit in self.units:
                ended = unit.ended()
                if ended:
                    return unit, ended
            ended = proxy.ended()
            if ended:
                return None, ended
