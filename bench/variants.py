"""Paths named after the default group's, each with what it changes: ``engines-wN`` (N
workers a core), ``engines-capN`` (``ERNIE_MAX_REPLIES=N``), ``engines-NAME`` (a lever:
``--lever NAME:SETTING=VALUE[,SETTING=VALUE]``, any ``ERNIE_*`` or ``VLLM_*`` setting) and
``vllm-aN`` (``vllm serve --api-server-count N``), so one invocation measures each beside
the default.

Usage::

    paths = with_variants(["engines", "vllm"], workers=[2, 4], caps=[], levers=["si4:..."],
                          api_servers=[4])
    group_env("engines-si4", workers=2, engines=2, levers=...)
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["api_servers_of", "group_env", "lever", "with_variants"]


def lever(text: str) -> tuple[str, dict[str, str]]:
    """``NAME:SETTING=VALUE,...`` as its name and settings."""
    name, _, assignments = text.partition(":")
    settings = dict(part.split("=", 1) for part in assignments.split(",") if "=" in part)
    if not name.isidentifier() or not settings:
        raise ValueError(f"--lever {text!r}: write NAME:SETTING=VALUE[,SETTING=VALUE]")
    return name, settings


def with_variants(
    paths: list[str],
    workers: Sequence[int],
    caps: Sequence[int],
    levers: Sequence[str] = (),
    api_servers: Sequence[int] = (),
) -> list[str]:
    """``paths`` with an ``engines-wN`` path after ``engines`` for each count past the
    first, an ``engines-capN`` for each of ``caps``, an ``engines-NAME`` for each lever, and
    a ``vllm-aN`` after ``vllm`` for each count of API servers past one."""
    if "engines" in paths:
        extra = [f"engines-w{n}" for n in dict.fromkeys(workers[1:]) if n != workers[0]]
        extra += [f"engines-cap{n}" for n in dict.fromkeys(caps)]
        extra += [f"engines-{lever(text)[0]}" for text in levers]
        at = paths.index("engines") + 1
        paths = [*paths[:at], *extra, *paths[at:]]
    servers = [f"vllm-a{n}" for n in dict.fromkeys(api_servers) if n > 1]
    if servers:
        at = paths.index("vllm") + 1 if "vllm" in paths else len(paths)
        paths = [*paths[:at], *servers, *paths[at:]]
    return paths


def group_env(path: str, workers: int, engines: int, levers: Sequence[str]) -> dict[str, str]:
    """The settings of an ``engines`` path: ``engines`` cores, ``workers`` a core, and what
    its name changes."""
    env = {"ERNIE_ENGINES": str(engines), "ERNIE_WORKERS": str(workers)}
    suffix = path.removeprefix("engines-")
    named = dict(lever(text) for text in levers)
    if suffix in named:
        return env | named[suffix]
    if path.startswith("engines-w"):
        return env | {"ERNIE_WORKERS": path.removeprefix("engines-w")}
    if path.startswith("engines-cap"):
        return env | {"ERNIE_MAX_REPLIES": path.removeprefix("engines-cap")}
    return env


def api_servers_of(path: str) -> int:
    """The API servers of a ``vllm`` or ``vllm-aN`` path."""
    return int(path.removeprefix("vllm-a")) if path.startswith("vllm-a") else 1
