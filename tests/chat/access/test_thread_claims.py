"""Another user's chat through a thread id named in advance, as an attacker tried it on
the real app (sign-in, history) in one process (``signed_app``) and on two workers behind
the group's HAProxy (``signed_group``): two users from loopback addresses of their own.

Mallory opens a socket naming a fresh thread id and sends Ann a link to it. Ann's page
says the chat is not found, and she chats on. Before, her chat was stored under that id:
Mallory's export read her messages, and a reply Mallory wrote while her page reloaded was
shown and adopted as part of her chat (tests/browser/test_thread_link.py: in Chromium).
Now a thread a handshake names is the user's own stored chat or a new one of the
server's (``chat.history.claims``), and the data layer reads and writes only the
requester's chats (``chat.history.data_layer``).
"""

from __future__ import annotations

import asyncio
import re
import uuid

import pytest

from testing.accounts import header_sign_in, listed_threads
from testing.chat_apps import RELOADED_REPLY
from testing.chat_client import ChatClient
from testing.exports import exported
from testing.polling import until
from testing.servers import AppServer
from testing.visitors import visitor

pytestmark = pytest.mark.engine

ANNS_SECRET = "安的秘密：银行卡密码是 2468。"


def prompt_tokens(text: str) -> int:
    found = re.search(r"prompt (\d+) tokens", text)
    assert found, text
    return int(found.group(1))


@pytest.mark.parametrize("app_name", ["signed_app", "signed_group"])
async def test_a_thread_named_in_advance_is_no_way_into_another_users_chat(
    app_name: str, request: pytest.FixtureRequest
) -> None:
    app: AppServer = request.getfixturevalue(app_name)
    url, named_id = app.url, str(uuid.uuid4())
    mallory, ann = (header_sign_in(url, f"{name}-{app_name}") for name in ("mallory", "ann"))
    at_mallory, at_ann = visitor(), visitor()
    async with ChatClient.connect(url, headers=mallory, thread_id=named_id, source=at_mallory) as m:
        assert m.resumed_thread is None  # no such chat: "Thread not found"
        async with ChatClient.connect(url, headers=ann, thread_id=named_id, source=at_ann) as a:
            first = await a.send(ANNS_SECRET, timeout_s=120)  # she chats on, as her page lets
            assert first.error is None and first.final, first
            assert ANNS_SECRET not in (await exported(m))[1]  # his export: not her chat
            assert a.thread_id is not None and a.thread_id != named_id
        # Her chat is hers: under an id of the server's, listed for her alone.
        (thread,) = listed_threads(url, ann)
        assert thread["id"] == a.thread_id and ANNS_SECRET not in str(listed_threads(url, mallory))
        # His reply, being written while her page reloads, is not shown nor adopted there.
        await m.change_settings({"max_tokens": RELOADED_REPLY, "temperature": 0.8})
        writing = asyncio.create_task(m.send("写一篇长文", timeout_s=300))
        await until(lambda: m.reply_id is not None, 60, "his reply streaming")
        async with ChatClient.connect(url, headers=ann, thread_id=a.thread_id, source=at_ann) as b:
            assert b.resumed_thread is not None  # her own chat, resumed
            assert m.reply_id is not None and not b.seen(m.reply_id)
            second = await b.send("我刚才说了什么？", timeout_s=120)
            assert second.error is None and second.final, second
            assert not b.seen(m.reply_id)
        await m.stop()
        await writing
    grown = prompt_tokens(second.final) - prompt_tokens(first.final or "")
    assert grown < 200, grown  # her exchange alone (his adopted: 1,800 tokens more)
