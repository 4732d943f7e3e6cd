"""How the launcher starts several units (``serve.group``), its engine cores faked (the real
group is ``test_workers.py``'s): on the CPU every unit starts before any core is waited
for, and a unit that fails, at its start or at its core's handshake, leaves the others
running; on a GPU the units start one at a time."""

from __future__ import annotations

import contextlib
import multiprocessing
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.model.memory import GiB
from engine.plan.plan import Plan
from engine.vllm_door.hardware import Hardware
from serve.group import Group
from serve.units import Slot, Worker
from testing.demo import hermetic_settings


@pytest.fixture
def group(tmp_path: Path) -> Iterator[Group]:
    settings = hermetic_settings(model=str(tmp_path), engines=3, workers=1)
    made = Group(Plan(settings, None, Hardware("cpu", (), 8 * GiB, 8 * GiB, ())), ("127.0.0.1", 0))
    yield made
    for unit in made.units:
        unit.stop()
    shutil.rmtree(made.folder, ignore_errors=True)


def sleeper(slot: Slot) -> Worker:
    process = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,))
    process.start()
    return Worker(slot, process)


def test_on_the_cpu_units_start_together_and_fail_alone(
    group: Group, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []

    @contextlib.contextmanager
    def core() -> Iterator[None]:
        n = sum(e.startswith("start") for e in events)
        events.append(f"start {n}")
        if n == 0:
            raise RuntimeError("no room")
        yield None
        events.append(f"wait {n}")  # leaving the block waits for the core's handshake
        if n == 1:
            raise TimeoutError("no handshake")

    monkeypatch.setattr(group, "_core", core)
    monkeypatch.setattr(group, "_spawn", lambda _core, slot: sleeper(slot))
    starting, rest = group._next_start(group.units)
    assert (starting, rest) == (group.units, [])
    failed = group._start(starting)
    assert events == ["start 0", "start 1", "start 2", "wait 2", "wait 1"]
    assert [(unit.number, cause) for unit, cause in failed] == [
        (0, "engine core 0 failed to start (RuntimeError: no room)"),
        (1, "engine core 1 failed to start (TimeoutError: no handshake)"),
    ]
    assert group.units[0].workers == [] and group.units[1].workers == []  # stopped
    (running,) = group.units[2].workers
    assert running.process.is_alive()


def test_on_a_gpu_units_start_one_at_a_time(group: Group) -> None:
    gpu = Hardware("gpu", (), 8 * GiB, 8 * GiB, ("float16",))
    group.plan = Plan(group.plan.settings, None, gpu)
    first, *others = group.units
    assert group._next_start(group.units) == ([first], others)


def test_each_worker_gets_its_own_port_below_the_ephemeral_range(group: Group) -> None:
    """A worker binds its port after its imports, and again after a restart: a port from
    the ephemeral range could meanwhile be any outgoing connection's (``serve.ports``)."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert len(set(group.ports)) == len(group.ports) == 3
    assert all(10_000 <= port < low for port in group.ports), group.ports
