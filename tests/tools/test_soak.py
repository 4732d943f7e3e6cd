"""The soak, short: chats held open against the real app, none failed or cut.

The full run (100 chats for 10 minutes, its own app) is ``python -m bench.soak``; its
numbers are in docs/benchmarks.md. Here the load runs against the session's demo app,
whose scripted model writes every reply to the length the settings panel sets.
"""

from __future__ import annotations

import pytest

from bench.soak import Load, soak
from testing.chat_client import wait_ready
from testing.engines import DemoApp

pytestmark = pytest.mark.engine

PANEL = {"temperature": 0.8, "top_p": 0.8, "system_prompt": "zh"}


async def test_a_short_soak_has_no_failed_or_truncated_reply(demo_app: DemoApp) -> None:
    server = demo_app.server
    await wait_ready(server.url, 300)
    # Replies of 32 tokens, as the settings panel sets them (the app's own are 100).
    load = Load(32, think_s=0.2, panel={**PANEL, "max_tokens": 32})
    result = await soak(server.url, server.process.pid, chats=8, seconds=12, load=load)
    assert result.replies >= 16 and result.problems == []  # every chat went round twice+
    assert result.failed == 0 and result.truncated == 0
    assert result.memory_growth <= 0.10
    assert result.passed(max_growth=0.10)
