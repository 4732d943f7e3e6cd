"""``python -m bench``: the engine, the app and the HTTP architecture, side by side.

Usage::

    python -m bench [--concurrency 1 16 64 256] [--reply-tokens 256] [--rounds 1]
                    [--paths engine app http [vllm engine@256 chainlit workers engines
                    cores remote]]
                    [--workers 4] [--engines 2] [--engine-workers 2 [4 ...]]
                    [--replicas 1] [--api-servers 1] [--vllm-url URL] [--out artifacts/bench]
    python -m bench --paths engine cores engines app --rate [R ...] [--duration-s 20]
                    [--turns 2] [--think-s 2] [--reply-median 256] [--reply-max 1024]
                    [--slo ttft_p99_ms=500,itl_p99_ms=100] [--baseline DIR]
    python -m bench --shapes [at-connect back-to-back reconnect idle-tabs slow-reader]
                    [--shape-chats 256] [--bursts 3] [--idle-tabs 4000] [--url URL]

The model and engine settings are the app's (``ERNIE_*``, ``.env``). Prints a table and
the ratios, and writes ``bench.json`` and ``bench.png`` into ``--out``. The paths named
only on request: ``vllm`` (``vllm serve`` with vLLM's own defaults over its OpenAI API, the
set-up an operator would run instead: ``bench.peer``; ``http`` talks to the same server),
``engine@256`` (the raw engine with the batch the app gave it before it sized it from the
device: 256 sequences, 2,048 tokens a step), ``chainlit`` (the app under ``chainlit
run``, the developers' command),
``workers`` (``ERNIE_WORKERS=--workers`` behind HAProxy), ``engines`` (``ERNIE_ENGINES=
--engines`` cores with ``--engine-workers`` workers each; more counts add ``engines-wN``
paths, in the same run), ``cores`` (``--engines`` bare
engines at once, their ceiling: ``bench.cores``), ``remote`` (``--replicas`` apps with
``ERNIE_ENGINE=remote`` on one ``vllm serve --api-server-count --api-servers``).
CPU is counted for every serving process: the app's tree, the group's, vLLM's server.
``--shapes`` runs the load shapes (``bench.shapes``) on the app as ``python -m serve``
starts it, and no path unless ``--paths`` names some. ``--rate`` runs the open loop
(``bench.openloop``) on every path after its closed loads (none unless ``--concurrency``
names some). ``--baseline DIR`` runs the app's own paths from another checkout too (the
version before a change: ``app@base`` beside ``app``, ``engines@base`` beside ``engines``,
in the same run).
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

from engine.plan.plan import Plan
from engine.plan.preflight import preflight
from serve.web import raise_open_files
from settings.loader import load_settings
from settings.settings import SettingsError
from testing.servers import ROOT

from .charts import write_chart
from .clients import cpu_list, maybe_pool
from .measure import LoadResult, Loads
from .openloop import RateResult, Slo
from .options import open_loop_options, the_open_loop
from .paths import PROMPT, app_path, http_path, remote_path
from .report import BASELINE_PATHS, capacities, comparisons, rates_table, table, write_json
from .servers import Servers
from .shapes import SHAPES, run_shapes, shapes_table
from .variants import api_servers_of, group_env, with_variants

PATHS = ("engine", "app", "http", "chainlit", "workers", "engines", "cores", "remote", "vllm")
PATHS += ("engine@256",)  # 3 by default; the others by name
LATE = ("http", "remote", "vllm")  # on a vLLM server, which holds the GPU's memory once up


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--concurrency",
        type=int,
        nargs="*",
        help="closed bursts; default 1 16 64 256 (none with --rate)",
    )
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
        "--engine-workers",
        type=int,
        nargs="+",
        default=[2],
        help="the engines path's workers per core; more counts add engines-wN paths",
    )
    parser.add_argument(
        "--caps", type=int, nargs="*", default=[], help="the engines path again with "
        "ERNIE_MAX_REPLIES=N (its line as long): engines-capN paths, the place in line"
    )  # fmt: skip
    parser.add_argument(
        "--lever", nargs="*", default=[], help="NAME:SETTING=VALUE[,SETTING=VALUE]: the "
        "engines path again with these settings (ERNIE_* or VLLM_*), as engines-NAME"
    )  # fmt: skip
    parser.add_argument(
        "--replicas", type=int, default=1, help="app processes on the remote path's server"
    )
    parser.add_argument(
        "--api-servers", type=int, default=1, help="API processes of the started vLLM server"
    )
    parser.add_argument(
        "--peer-api-servers", type=int, nargs="*", default=[], help="the vllm path again "
        "with vllm serve --api-server-count N, as vllm-aN"
    )  # fmt: skip
    parser.add_argument(
        "--vllm-url",
        help="a running vLLM server (vllm serve --served-model-name bench, the same model) "
        "for the http and remote paths; default: start one",
    )
    parser.add_argument("--out", type=Path, default=Path("artifacts/bench"))
    parser.add_argument(
        "--baseline", type=Path, help="another checkout of the app (the version before a "
        "change): its app, chainlit, workers and engines paths run too, as path@base"
    )  # fmt: skip
    open_loop_options(parser)
    return parser


Measured = tuple[list[LoadResult], list[LoadResult], list[RateResult]]  # cold, loads, rates


async def _path(
    path: str,
    plan: Plan,
    args: argparse.Namespace,
    servers: Servers,
    root: Path = ROOT,
) -> Measured:
    """One path: its cold burst (the socket paths), its loads, its open loop's rates;
    ``root``: the app's checkout (``--baseline``: another version's)."""
    loads = Loads(tuple(sorted(set(args.concurrency))), args.reply_tokens, max(1, args.rounds))
    out, open_loop = args.out, the_open_loop(args, plan, servers.clients)
    if path.startswith("engine") and not path.startswith("engines"):  # AsyncLLM here
        from .raw_engine import OLD_CAP, engine_path

        sized = plan if path == "engine" else OLD_CAP(plan)
        return [], *await engine_path(sized, loads, open_loop, name=path)
    if path == "vllm" or path.startswith("vllm-a"):
        from .peer import vllm_path

        peer = await servers.peer(api_servers_of(path))
        return [], *await vllm_path(peer, plan, loads, open_loop, path)
    if path == "cores":
        from .cores import cores_path

        return [], *await cores_path(plan, loads, args.engines, open_loop)
    group: dict[str, str] = {}
    if path == "workers":
        group = {"ERNIE_WORKERS": str(args.workers)}
    elif path.startswith("engines"):
        group = group_env(path, args.engine_workers[0], args.engines, args.lever)
    if path in ("app", "chainlit", "workers") or path.startswith("engines"):
        burst, closed, rates = await app_path(
            loads, out, path=path, open_loop=open_loop, root=root, **group
        )
    elif path == "http":  # the guides' vLLM server: vllm serve with its own defaults
        burst, closed, rates = await http_path(await servers.peer(), plan, loads, out, open_loop)
    else:
        remote = await servers.app_args()
        burst, closed, rates = await remote_path(remote, loads, out, args.replicas, open_loop)
    return [burst], closed, rates


async def _run(plan: Plan, args: argparse.Namespace) -> Measured:
    cold: list[LoadResult] = []
    results: list[LoadResult] = []
    rates: list[RateResult] = []
    async with contextlib.AsyncExitStack() as stack:
        clients = stack.enter_context(
            maybe_pool(args.client_procs, cpu_list(args.client_cpus) if args.client_cpus else None)
        )
        servers = Servers(args, plan, stack, clients)
        # The in-process paths first: a vLLM server, once started, holds the GPU's memory.
        for path in sorted(args.paths, key=lambda p: p.startswith(LATE)):
            started = time.monotonic()
            burst, closed, measured = await _path(path, plan, args, servers)
            if args.baseline and path in BASELINE_PATHS:  # the same path, the other version
                old = await _path(path, plan, args, servers, root=args.baseline.resolve())
                burst, closed, measured = burst + old[0], closed + old[1], measured + old[2]
            cold, results, rates = cold + burst, results + closed, rates + measured
            took = time.monotonic() - started
            print(f"{path}: done in {took:.0f} s", file=sys.stderr, flush=True)
    return cold, results, rates


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    raise_open_files()  # thousands of tabs (--idle-tabs) are as many sockets here
    if args.shapes is not None and not args.shapes:
        args.shapes = list(SHAPES)
    if args.paths is None:
        args.paths = [] if args.shapes else list(PATHS[:3])
    args.paths = with_variants(
        args.paths, args.engine_workers, args.caps, args.lever, args.peer_api_servers
    )
    if args.app_cpus:  # the app's processes inherit them; the clients take their own
        os.sched_setaffinity(0, cpu_list(args.app_cpus))
    if args.concurrency is None:
        args.concurrency = [] if args.rate is not None else [1, 16, 64, 256]
    try:
        plan = preflight(load_settings()).alone()  # the engine path: one core in-process
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    cold, results, rates = asyncio.run(_run(plan, args))
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
    if rates:
        print(rates_table(rates))
        print(json.dumps({"capacity at the SLO": capacities(rates)}, ensure_ascii=False))
    if shapes:
        print(shapes_table(shapes))
    write_json(args.out / "bench.json", meta | {"shapes": shapes}, results, cold, rates)
    if results or rates:
        title, slo = f"{meta['machine']}: {settings.model}", Slo.parse(args.slo).ttft_p99_ms
        write_chart(args.out / "bench.png", results, rates, title, slo)
    print(f"wrote {args.out / 'bench.json'} and {args.out / 'bench.png'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
