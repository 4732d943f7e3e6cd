"""The open loop's command-line options (``python -m bench --rate ...``) and the
``OpenLoop`` they ask for."""

from __future__ import annotations

import argparse

from engine.plan.plan import Plan

from .clients import ClientPool
from .openloop import OpenLoop, Slo

__all__ = ["open_loop_options", "the_open_loop"]


def open_loop_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("open loop (bench.openloop, bench.traffic)")
    group.add_argument(
        "--rate", type=float, nargs="*", help="new conversations a second (Poisson); "
        "no value: the sweep for the capacity at the SLO"
    )  # fmt: skip
    group.add_argument("--duration-s", type=float, default=20.0, help="arrivals for this long")
    group.add_argument("--turns", type=int, default=2, help="messages a conversation")
    group.add_argument("--think-s", type=float, default=2.0, help="mean pause between them")
    group.add_argument("--reply-median", type=int, default=256, help="reply tokens, median")
    group.add_argument("--reply-max", type=int, default=1024, help="reply tokens, at most")
    group.add_argument("--reply-sigma", type=float, default=0.6, help="0: all the median")
    group.add_argument("--first-rate", type=float, default=2.0, help="the sweep's first rate")
    group.add_argument(
        "--warm-up-s", type=float, default=5.0, help="arrivals at the first rate for this "
        "long before it, not measured (0: none)"
    )  # fmt: skip
    group.add_argument(
        "--profile", nargs="*", help="py-spy on the app paths' processes (or those named) "
        "during the open loop (folded stacks: OUT/<path>-pyspy.txt)"
    )  # fmt: skip
    group.add_argument(
        "--client-procs", type=int, default=0, help="the visitors from this many client "
        "processes (bench.clients; 0: the bench's own loop)"
    )  # fmt: skip
    group.add_argument("--client-cpus", help="the client processes' CPUs (taskset's list)")
    group.add_argument("--app-cpus", help="every serving process's CPUs (taskset's list)")
    group.add_argument(
        "--slo", default="ttft_p99_ms=500,itl_p99_ms=100", help="first token and time per "
        "token, p99 (default ttft_p99_ms=500,itl_p99_ms=100)"
    )  # fmt: skip


def the_open_loop(
    args: argparse.Namespace, plan: Plan, clients: ClientPool | None
) -> OpenLoop | None:
    """The open loop the run asks for (``--rate``), or None."""
    if args.rate is None:
        return None
    return OpenLoop(
        duration_s=args.duration_s, turns=args.turns, think_s=args.think_s,
        reply_median=args.reply_median, reply_max=args.reply_max, rates=tuple(args.rate),
        reply_sigma=args.reply_sigma,
        first_rate=args.first_rate, warm_up_s=args.warm_up_s, slo=Slo.parse(args.slo),
        system_prompt=plan.settings.system_prompt,
        profile_to=args.out if args.profile is not None else None,
        profile_paths=tuple(args.profile or ()), clients=clients,
    )  # fmt: skip
