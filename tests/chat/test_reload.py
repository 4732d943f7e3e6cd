"""A reply that survives a reload, on the real app (sign-in and history) and the real
engine: the page goes away mid-reply, the reloaded page (a new session resuming the
thread) is shown the reply as it stands, then in full; the history holds it once; the
chat goes on with it. (In Chromium: tests/browser/test_chat_tools.py.)"""

from __future__ import annotations

import asyncio
import json
import re

import httpx

from testing.accounts import OPS_TOKEN, PROXY, named, session_cookie
from testing.chat_apps import RELOADED_REPLY
from testing.chat_client import ChatClient
from testing.polling import until
from testing.servers import AppServer
from testing.shapes import reload, thread_owned
from testing.visitors import visitor

LONG = {"temperature": 0.5, "top_p": 0.9, "max_tokens": RELOADED_REPLY, "system_prompt": "zh"}
BEARER = {"Authorization": f"Bearer {OPS_TOKEN}"}


def stored_replies(url: str, cookie: dict[str, str], thread_id: str) -> list[str]:
    thread = httpx.get(f"{url}/project/thread/{thread_id}", headers=cookie, timeout=10)
    steps = json.loads(thread.text)["steps"]
    return [s["output"] for s in steps if "注意" in s["output"]]  # the model's, not notices


async def test_a_page_reloaded_mid_reply_shows_it_as_it_stands_then_in_full(
    signed_app: AppServer,
) -> None:
    url, here = signed_app.url, visitor()
    cookie = session_cookie(httpx.post(f"{url}/auth/header", headers=named("rosa") | PROXY))
    async with ChatClient.connect(url, headers=cookie, source=here) as page:
        await page.change_settings(LONG)
        sending = asyncio.create_task(page.send("写一篇长文"))
        await until(lambda: page.reply and len(page.reply.frames) >= 2, 60, "the reply's text")
        thread_id = page.thread_id
        sending.cancel()
    # The page is gone (its socket closed, its session kept): the reply goes on.
    assert thread_id is not None
    await until(lambda: thread_owned(url, thread_id, cookie), 30, "the thread stored")
    async with ChatClient.connect(url, headers=cookie, thread_id=thread_id, source=here) as again:
        assert again.resumed_thread is not None
        shown = [s for s in again.resumed_thread["steps"] if "注意" in s["output"]]
        assert len(shown) == 1 and shown[0]["output"], "the reply as it stood, with the thread"
        await signed_app.wait_for_running(0, within_s=120, headers=BEARER)
        final = await again.wait_for_message(lambda m: "tokens/s" in m, timeout_s=10)
        partial = shown[0]["output"]  # unfinished: no footer yet, shorter than the whole
        assert "tokens/s" not in partial and len(final) > len(partial)
        assert stored_replies(url, cookie, thread_id) == [final]  # stored once, in full
        more = await again.send("再写一段")  # the chat goes on, with that reply in it
        assert more.error is None and more.text
    await until(lambda: len(stored_replies(url, cookie, thread_id)) == 2, 10, "the next reply")


def replies_written(url: str) -> float:
    """Replies the engine wrote, however they ended, per ``/metrics``."""
    text = httpx.get(f"{url}/metrics", headers=BEARER, timeout=10).text
    return sum(float(v) for v in re.findall(r"^ernie_replies_total\{[^}]*\} (\S+)$", text, re.M))


async def test_pages_reloaded_under_load_lose_nothing_and_nothing_is_written_twice(
    signed_app: AppServer,
) -> None:
    url, users = signed_app.url, ("uma", "vera", "wes", "xena")  # one reply at once each
    cookies = [
        session_cookie(httpx.post(f"{url}/auth/header", headers=named(u) | PROXY)) for u in users
    ]
    before = replies_written(url)
    tally = await reload(url, chats=len(users), headers=lambda i: cookies[i])
    assert (tally.sent, tally.answered, tally.lost) == (4, 4, 0), tally
    await signed_app.wait_for_running(0, within_s=60, headers=BEARER)
    assert replies_written(url) - before == 4  # each reply written once, by its old page
