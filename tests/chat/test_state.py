"""A chat's state alone (``chat.state.ChatState``): a reply's life and what a dropped
socket does to it, transition by transition, as chat/state.py's docstring writes them."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from chat.ui.state import ChatState

REPLY = cast(Any, object())  # a reply as the UI holds it (a Chainlit message)
OTHER = cast(Any, object())


def test_a_reply_begins_and_ends_and_is_delivered_to_a_page_that_stayed() -> None:
    state = ChatState()
    state.begin_reply("r1")
    assert state.request_id == "r1"
    state.ended()
    state.delivered(REPLY)
    assert state.request_id is None and state.undelivered is None
    assert not state.was_lost("r1")


def test_a_reply_finished_while_the_socket_was_gone_is_shown_on_its_return() -> None:
    state = ChatState()
    state.begin_reply("r1")
    assert state.dropped() == []  # no page task to cancel
    state.ended()
    state.delivered(REPLY)
    assert state.undelivered is REPLY
    assert state.returned() == (REPLY, False)
    assert state.returned() == (None, False)  # said once
    assert not state.gone


async def test_a_dropped_socket_names_the_page_tasks_and_a_lost_reply_says_so() -> None:
    state = ChatState()
    state.announcer = asyncio.get_running_loop().create_task(asyncio.sleep(0))
    state.begin_reply("r2")
    assert state.dropped() == [state.announcer]
    state.lose_reply()  # nothing will show it: stopped, and its footer says why
    assert state.was_lost("r2") and not state.was_lost("r3")
    await state.announcer


def test_a_message_that_left_the_line_is_said_once_when_the_socket_returns() -> None:
    state = ChatState()
    state.dropped()
    state.left_line = True
    assert state.returned() == (None, True)
    assert state.returned() == (None, False)


def test_the_last_reply_is_replaced_and_the_one_before_returned() -> None:
    state = ChatState()
    assert state.replace_last_reply(REPLY) is None
    assert state.replace_last_reply(OTHER) is REPLY
    assert state.replace_last_reply(None) is OTHER and state.last_reply is None
