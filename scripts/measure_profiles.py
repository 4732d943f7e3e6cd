"""Measure the three ``ERNIE_PROFILE`` presets: capacity, throughput, long prompts.

Usage (on a GPU host, from the repository root)::

    python scripts/measure_profiles.py DIR [--profiles balanced ...] [--reply-tokens 256]

Writes ERNIE-4.5-0.3B's architecture (config from ``scripts/ernie-4.5-0.3b-pt.config.json``,
demo tokenizer) to DIR and loads it with random weights (``ERNIE_LOAD_FORMAT=dummy``).
Each profile runs in its own process. For each it prints the capacity report, then one
JSON line per load: chats at once, each a 2,000-token prompt and a fixed-length reply;
the long-context profile also times one prompt near its full length.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = Path(__file__).resolve().parent / "ernie-4.5-0.3b-pt.config.json"
PROMPT_TOKENS = 2000
CONCURRENCY = {"high-concurrency": (64, 512), "balanced": (64, 256), "long-context": (8, 32)}


def write_model(path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from engine.model.demo import write_demo_model

    write_demo_model(path)  # tokenizer, chat template, generation config
    (path / "config.json").write_text(REFERENCE.read_text())
    for weights in path.glob("*.safetensors"):
        weights.unlink()


async def one_reply(engine: Any, prompt: list[int], reply_tokens: int) -> tuple[float, float]:
    """(time to first token, tokens per second) of one reply through the app's stream."""
    from vllm import SamplingParams

    from engine import TextChunk, new_request_id

    params = SamplingParams(max_tokens=reply_tokens, ignore_eos=True, detokenize=False)
    started, first = time.monotonic(), None
    events = engine.stream(prompt, params, request_id=new_request_id())
    async with contextlib.aclosing(events) as stream:
        async for event in stream:
            if isinstance(event, TextChunk) and first is None:
                first = time.monotonic()
    done = time.monotonic()
    first = first or done
    return first - started, reply_tokens / max(done - first, 1e-9)


async def load(engine: Any, chats: int, prompt_tokens: int, reply_tokens: int) -> dict[str, Any]:
    rng = random.Random(chats)
    prompts = [[rng.randrange(1000, 20000) for _ in range(prompt_tokens)] for _ in range(chats)]
    started = time.monotonic()
    results = await asyncio.gather(*(one_reply(engine, p, reply_tokens) for p in prompts))
    wall = time.monotonic() - started
    ttfts = sorted(r[0] for r in results)
    return {
        "chats": chats,
        "prompt_tokens": prompt_tokens,
        "reply_tokens": reply_tokens,
        "total_tokens_per_s": round(chats * reply_tokens / wall, 1),
        "per_chat_tokens_per_s_p50": round(statistics.median(r[1] for r in results), 1),
        "ttft_p50_ms": round(statistics.median(ttfts) * 1000, 1),
        "ttft_max_ms": round(ttfts[-1] * 1000, 1),
    }


async def measure(profile: str, reply_tokens: int) -> None:
    from engine import ChatEngine
    from settings.loader import load_settings

    engine = ChatEngine.from_settings(load_settings())
    started = time.monotonic()
    await engine.wait_ready()
    print(f"== {profile}: ready in {time.monotonic() - started:.1f} s", flush=True)
    for line in engine.capacity.lines():
        print(line, flush=True)
    await load(engine, 4, PROMPT_TOKENS, 16)  # not counted
    for chats in CONCURRENCY[profile]:
        result = await load(engine, chats, PROMPT_TOKENS, reply_tokens)
        print(json.dumps({"profile": profile, **result}), flush=True)
    if profile == "long-context":
        longest = engine.settings.max_model_len - reply_tokens - 16
        result = await load(engine, 1, longest, reply_tokens)
        print(json.dumps({"profile": profile, **result}), flush=True)
    await engine.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--profiles", nargs="+", default=list(CONCURRENCY))
    parser.add_argument("--reply-tokens", type=int, default=256)
    parser.add_argument("--run", help=argparse.SUPPRESS)  # one profile, in a child process
    args = parser.parse_args()
    if args.run:
        asyncio.run(measure(args.run, args.reply_tokens))
        return 0
    write_model(args.model_dir)
    for profile in args.profiles:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "ERNIE_MODEL": str(args.model_dir),
            "ERNIE_LOAD_FORMAT": "dummy",
            "ERNIE_PROFILE": profile,
            "ERNIE_WARMUP": "true",
        }
        command = [sys.executable, __file__, str(args.model_dir), "--run", profile]
        command += ["--reply-tokens", str(args.reply_tokens)]
        if subprocess.run(command, env=env, cwd=ROOT).returncode != 0:
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
