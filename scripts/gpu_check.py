"""GPU check: the app's engine, with compilation on, answers chats.

Usage (on a GPU host, from the repository root)::

    python scripts/gpu_check.py --write-model DIR   # ERNIE-4.5-0.3B's architecture
    python scripts/gpu_check.py DIR

``--write-model`` writes the real architecture (``REFERENCE`` config, vocab 103424, 18
layers) with random weights and the demo tokenizer, so no download is needed; it runs
in its own process so that this one never touches CUDA before the engine starts.

The check imports ``app`` (Chainlit, its ``__getattr__`` guard, ``chat.open_app()``)
and calls the app's own startup hook: the engine is built exactly as ``chainlit run
app.py`` builds it, in a process that has imported Chainlit (Chainlit#2499).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# ERNIE-4.5-0.3B-PT's public config.json (a copy of shared/reference/ernie-4.5-0.3b-pt/).
REFERENCE = Path(__file__).resolve().parent / "ernie-4.5-0.3b-pt.config.json"


def write_real_architecture(path: Path) -> Path:
    """The real model's config with random bf16 weights, and the demo tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from engine.model.demo import write_demo_model

    write_demo_model(path)  # tokenizer, chat template, generation config
    config = json.loads(REFERENCE.read_text())
    (path / "config.json").write_text(json.dumps(config, indent=2))
    for stale in path.glob("*.safetensors"):
        stale.unlink()
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path))
    model.to(torch.bfloat16).save_pretrained(path)
    return path


async def chat_once(engine: object, text: str) -> str:
    from engine import ChatOptions, ReplyEnd, TextChunk, new_request_id

    pieces, end = [], None
    events = engine.chat(
        [],
        text,
        request_id=new_request_id(),  # type: ignore[attr-defined]
        options=ChatOptions(max_tokens=64),
    )
    async with contextlib.aclosing(events) as stream:
        async for event in stream:
            if isinstance(event, TextChunk):
                pieces.append(event.text)
            elif isinstance(event, ReplyEnd):
                end = event
    assert end is not None
    return f"[{end.finish_reason}] {end.stats.summary()} | {''.join(pieces)[:60]!r}"


async def main(model: Path) -> None:
    os.environ["ERNIE_MODEL"] = str(model)
    sys.path.insert(0, str(ROOT))
    import app  # noqa: F401  (Chainlit's entry point: builds the engine, registers handlers)
    from chat import lifecycle
    from chat.runtime import runtime

    engine = runtime().engine
    import torch
    import transformers
    import vllm

    print(
        f"vllm {vllm.__version__} | torch {torch.__version__} | transformers "
        f"{transformers.__version__} | CUDA initialised here: {torch.cuda.is_initialized()}"
    )
    print("settings:", runtime().settings.model_dump(exclude_none=True))
    print(
        "chainlit imported:",
        "chainlit" in sys.modules,
        "| enforce_eager setting:",
        runtime().settings.enforce_eager,
    )
    started = time.monotonic()
    await lifecycle.start(runtime())  # what the app's on_app_startup hook runs
    print("status right after start:", engine.status())
    await engine.wait_ready()
    print(f"ready in {time.monotonic() - started:.1f} s:", engine.status())
    config = engine.backend.llm.vllm_config  # type: ignore[attr-defined]  (what vLLM built)
    print(
        "compilation:",
        config.compilation_config.mode,
        "| cudagraph:",
        config.compilation_config.cudagraph_mode,
        "| enforce_eager:",
        config.model_config.enforce_eager,
    )
    print("chat 1:", await chat_once(engine, "你好，请介绍一下你自己。"))
    print("chat 2:", await chat_once(engine, "Hello! Who are you?"))
    for size in (16, 64):
        started = time.monotonic()
        results = await asyncio.gather(*(chat_once(engine, f"问题 {i}") for i in range(size)))
        print(f"{size} chats at once in {time.monotonic() - started:.2f} s; first: {results[0]}")
    await engine.shutdown()


if __name__ == "__main__":
    if sys.argv[1] == "--write-model":
        print(write_real_architecture(Path(sys.argv[2])))
    else:
        asyncio.run(main(Path(sys.argv[1])))
