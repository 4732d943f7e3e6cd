"""``python -m engine``: check settings, chat once from a shell, write the demo model.

(Users who may sign in are added with ``python -m chat add-user NAME``.)

Usage::

    python -m engine check [--load]        # settings, where each came from, and the checks
                                           # against model and machine (exit 2 on a bad one);
                                           # --load: start the engine, print its capacity
    python -m engine chat "你好"            # one streamed reply to stdout, stats to stderr
    python -m engine demo-model PATH [--byte-level | --scripted]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from settings.loader import load_settings
from settings.settings import Settings, SettingsError, env_name
from settings.urls import redact_setting

if TYPE_CHECKING:
    from .replies import ChatEngine

__all__ = ["main"]

EXIT_BAD_SETTING = 2
EXIT_ENGINE_ERROR = 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="print the settings and check them")
    check.add_argument("--load", action="store_true", help="also load the engine: capacity")
    chat = commands.add_parser("chat", help="stream one reply to stdout, stats to stderr")
    chat.add_argument("message", help="the user's message")
    demo = commands.add_parser("demo-model", help="write a tiny random ERNIE-shaped model")
    demo.add_argument("path", type=Path)
    kind = demo.add_mutually_exclusive_group()
    kind.add_argument("--byte-level", action="store_true", help="byte-level tokenizer")
    kind.add_argument("--scripted", action="store_true", help="a fixed reply (UI tests)")
    return parser


def _print_settings(settings: Settings) -> None:
    sources = settings.origins
    for field in Settings.model_fields:
        value = getattr(settings, field)
        if value is not None and isinstance(value, str):
            value = redact_setting(value)  # URL passwords stay out of terminals and logs
        shown = "(unset: model or backend default)" if value is None else repr(value)
        print(f"{env_name(field):32} {shown}  # {sources[field]}")


async def _check(engine: ChatEngine, load: bool) -> None:
    plan = engine.plan
    shape = plan.shape
    model = (
        "config not read before loading"
        if shape is None
        else (
            f"{shape.num_hidden_layers} layers, {shape.num_attention_heads} heads, "
            f"{shape.num_key_value_heads} KV heads, {shape.max_position_embeddings} positions"
        )
    )
    print(f"checks passed: model {model}; machine {plan.hardware.device}")
    print(f"memory share: {plan.memory_share} ({plan.sources()['gpu_memory_utilization']})")
    if load:
        await engine.wait_ready()
        for line in engine.capacity.lines():
            print(line)


async def chat_to_terminal(engine: ChatEngine, message: str) -> None:
    """One streamed reply on stdout, its stats line on stderr."""
    from .replies import new_request_id
    from .stream import ReplyEnd, TextChunk

    await engine.wait_ready()
    events = engine.chat([], message, request_id=new_request_id())
    async with contextlib.aclosing(events) as stream:
        async for event in stream:
            if isinstance(event, TextChunk):
                sys.stdout.write(event.text)
                sys.stdout.flush()
            elif isinstance(event, ReplyEnd):
                sys.stdout.write("\n")
                print(f"[{event.finish_reason}] {event.stats.summary()}", file=sys.stderr)


async def _run(args: argparse.Namespace, settings: Settings) -> int:
    """Build the engine (its checks exit 2), then check or chat (engine errors exit 1)."""
    from .errors import EngineError
    from .replies import ChatEngine

    try:
        engine = ChatEngine.from_settings(settings)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_SETTING
    try:
        if args.command == "check":
            await _check(engine, args.load)
        else:
            await chat_to_terminal(engine, args.message)
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ENGINE_ERROR
    finally:
        await engine.shutdown()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "demo-model":
        from engine.model.demo import write_demo_model

        print(write_demo_model(args.path, byte_level=args.byte_level, scripted=args.scripted))
        return 0
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_SETTING
    if args.command == "check":
        _print_settings(settings)
    else:
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # keep the reply readable
    return asyncio.run(_run(args, settings))
