"""``python -m engine``: check settings, chat once from a shell, write the demo model.

Usage::

    python -m engine check                 # effective settings; exit 2 on a bad one
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

from .settings import Settings, SettingsError, env_name, load_settings

__all__ = ["main"]

EXIT_BAD_SETTING = 2
EXIT_ENGINE_ERROR = 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("check", help="print the effective settings and exit")
    chat = commands.add_parser("chat", help="stream one reply to stdout, stats to stderr")
    chat.add_argument("message", help="the user's message")
    demo = commands.add_parser("demo-model", help="write a tiny random ERNIE-shaped model")
    demo.add_argument("path", type=Path)
    kind = demo.add_mutually_exclusive_group()
    kind.add_argument("--byte-level", action="store_true", help="byte-level tokenizer")
    kind.add_argument("--scripted", action="store_true", help="a fixed reply (UI tests)")
    return parser


def _check(settings: Settings) -> int:
    from .prompt import resolve_system_prompt

    resolve_system_prompt(settings.system_prompt)
    given = settings.model_fields_set
    for field in Settings.model_fields:
        value = getattr(settings, field)
        shown = "(unset: model or vLLM default)" if value is None else repr(value)
        source = "set" if field in given else "default"
        print(f"{env_name(field):32} {shown}  # {source}")
    return 0


async def _chat(settings: Settings, message: str) -> int:
    from .core import ChatEngine, new_request_id
    from .errors import EngineError
    from .stream import ReplyEnd, TextChunk

    engine = ChatEngine(settings)
    try:
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
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ENGINE_ERROR
    finally:
        await engine.shutdown()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "demo-model":
        from .demo import write_demo_model

        print(write_demo_model(args.path, byte_level=args.byte_level, scripted=args.scripted))
        return 0
    try:
        settings = load_settings()
        if args.command == "check":
            return _check(settings)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_SETTING
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # keep the reply readable
    return asyncio.run(_chat(settings, args.message))
