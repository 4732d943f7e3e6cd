"""``python -m bench``: the engine, the app and the HTTP architecture, side by side.

Usage::

    python -m bench [--concurrency 1 16 64 256] [--reply-tokens 256] [--rounds 1]
                    [--paths engine app http [chainlit workers engines cores remote]]
                    [--workers 4] [--engines 2] [--engine-workers 2]
                    [--replicas 1] [--api-servers 1] [--vllm-url URL] [--out artifacts/bench]
    python -m bench --shapes [at-connect back-to-back reconnect idle-tabs slow-reader]
                    [--shape-chats 256] [--bursts 3] [--idle-tabs 4000] [--url URL]

The model and engine settings are the app's (``ERNIE_*``, ``.env``). Prints a table and
the ratios, and writes ``bench.json`` and ``bench.png`` into ``--out``. The paths named
only on request: ``chainlit`` (the app under ``chainlit run``, the developers' command),
``workers`` (``ERNIE_WORKERS=--workers`` behind HAProxy), ``engines`` (``ERNIE_ENGINES=
--engines`` cores with ``--engine-workers`` workers each), ``cores`` (``--engines`` bare
engines at once, their ceiling: ``bench.cores``), ``remote`` (``--replicas`` apps with
``ERNIE_ENGINE=remote`` on one ``vllm serve --api-server-count --api-servers``).
CPU is counted for every serving process: the app's tree, the group's, vLLM's server.
``--shapes`` runs the load shapes (``bench.shapes``) on the app as ``python -m serve``
starts it, and no path unless ``--paths`` names some.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import sys
import time
from pathlib import Path

from deploy.loading import load_settings
from deploy.preflight import Plan, preflight
from deploy.settings import SettingsError

from .cores import cores_path
from .measure import LoadResult, Loads
from .paths import (
    PROMPT,
    VllmServer,
    app_path,
    engine_path,
    http_path,
    remote_path,
    vllm_server,
)
from .report import comparisons, table, write_chart, write_json
from .shapes import SHAPES, run_shapes, shapes_table

PATHS = ("engine", "app", "http", "chainlit", "workers", "engines", "cores", "remote")  # 5 by name


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--reply-tokens", type=int, default=256)
    parser.add_argument(
        "--rounds", type=int, default=1, help="each load this many times in a row (summed)"
    )
    parser.add_argument("--paths", nargs="+", choices=PATHS)
    parser.add_argument("--shapes", nargs="*", choices=SHAPES, help="default: every shape")
    parser.add_argument("--shape-chats", type=int, default=256, help="chats of each shape")
    parser.add_argument("--bursts", type=int, default=3, help="the back-to-back bursts")
    parser.add_argument("--idle-tabs", type=int, default=4000, help="the idle-tabs shape's")
    parser.add_argument("--url", help="the shapes' app, already running; default: start one")
    parser.add_argument("--workers", type=int, default=4, help="the workers path's group")
    parser.add_argument("--engines", type=int, default=2, help="the engines and cores paths' cores")
    parser.add_argument(
        "--engine-workers", type=int, default=2, help="the engines path's workers per core"
    )
    parser.add_argument(
        "--replicas", type=int, default=1, help="app processes on the remote path's server"
    )
    parser.add_argument(
        "--api-servers", type=int, default=1, help="API processes of the started vLLM server"
    )
    parser.add_argument(
        "--vllm-url",
        help="a running vLLM server (vllm serve --served-model-name bench, the same model) "
        "for the http and remote paths; default: start one",
    )
    parser.add_argument("--out", type=Path, default=Path("artifacts/bench"))
    return parser


async def _run(plan: Plan, args: argparse.Namespace) -> tuple[list[LoadResult], list[LoadResult]]:
    results: list[LoadResult] = []
    cold: list[LoadResult] = []
    loads = Loads(tuple(sorted(set(args.concurrency))), args.reply_tokens, max(1, args.rounds))
    out = args.out
    async with contextlib.AsyncExitStack() as stack:
        server: list[VllmServer] = []  # one for the http and remote paths, once needed

        async def vllm() -> VllmServer:
            if args.vllm_url:
                return VllmServer(str(args.vllm_url))
            if not server:
                log = out / "vllm-server.log"
                started = vllm_server(plan, log, args.api_servers)
                server.append(await stack.enter_async_context(started))
            return server[0]

        # The in-process paths first: the vLLM server, once started, holds the GPU's memory.
        for path in sorted(args.paths, key=lambda p: p in ("http", "remote")):
            started = time.monotonic()
            if path == "engine":
                results += await engine_path(plan, loads)
            elif path == "cores":
                results += await cores_path(plan, loads, args.engines)
            else:
                if path in ("app", "chainlit"):
                    burst, measured = await app_path(loads, out, path=path)
                elif path == "workers":
                    workers = str(args.workers)
                    burst, measured = await app_path(loads, out, path=path, ERNIE_WORKERS=workers)
                elif path == "engines":
                    group = {"ERNIE_ENGINES": args.engines, "ERNIE_WORKERS": args.engine_workers}
                    burst, measured = await app_path(
                        loads, out, path=path, **{k: str(v) for k, v in group.items()}
                    )
                elif path == "http":
                    burst, measured = await http_path(await vllm(), plan, loads, out)
                else:
                    burst, measured = await remote_path(await vllm(), loads, out, args.replicas)
                cold.append(burst)
                results += measured
            took = time.monotonic() - started
            print(f"{path}: done in {took:.0f} s", file=sys.stderr, flush=True)
    return results, cold


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.shapes is not None and not args.shapes:
        args.shapes = list(SHAPES)
    if args.paths is None:
        args.paths = [] if args.shapes else list(PATHS[:3])
    try:
        plan = preflight(load_settings()).alone()  # the engine path: one core in-process
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    results, cold = asyncio.run(_run(plan, args))
    shapes = []
    if args.shapes:
        sizes = {"chats": args.shape_chats, "bursts": args.bursts, "tabs": args.idle_tabs}
        shapes = asyncio.run(run_shapes(args.shapes, logs=args.out, url=args.url, **sizes))
    settings = plan.settings
    meta = {
        "command": " ".join(["python -m bench", *(argv if argv is not None else sys.argv[1:])]),
        "machine": f"{plan.hardware.device}, {platform.machine()}",
        "model": settings.model,
        "settings": {
            k: v
            for k, v in settings.model_dump(mode="json", exclude={"history_url"}).items()
            if v is not None
        },
        "prompt_chars": len(PROMPT),
        "reply_tokens": args.reply_tokens,
    }
    if results:
        print(table(results + cold))
    for row in comparisons(results, cold):
        print(json.dumps(row, ensure_ascii=False))
    if shapes:
        print(shapes_table(shapes))
    write_json(args.out / "bench.json", meta | {"shapes": shapes}, results, cold)
    if results:
        write_chart(args.out / "bench.png", results, f"{meta['machine']}: {settings.model}")
    print(f"wrote {args.out / 'bench.json'} and {args.out / 'bench.png'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
