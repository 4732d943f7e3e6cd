"""The chat record the model sees, and the CJK emphasis repair (pure logic)."""

from __future__ import annotations

import pytest

from engine.conversation import Conversation
from engine.markdown import fix_cjk_emphasis
from engine.prompt import Turn


def test_record_and_turns_in_order() -> None:
    conversation = Conversation()
    conversation.record("m1", "你好", "你好！")
    conversation.record("m2", "再见", "再见！")
    assert conversation.turns() == [
        Turn("user", "你好"),
        Turn("assistant", "你好！"),
        Turn("user", "再见"),
        Turn("assistant", "再见！"),
    ]


def test_editing_a_message_forgets_it_and_everything_after() -> None:
    conversation = Conversation()
    for i in range(4):
        conversation.record(f"m{i}", f"q{i}", f"a{i}")
    assert conversation.rewind_to("m1") == 3
    assert [t.content for t in conversation.turns()] == ["q0", "a0"]
    assert conversation.rewind_to("unknown") == 0  # a new message: nothing to forget
    assert len(conversation) == 1


@pytest.mark.parametrize(
    ("text", "fixed"),
    [
        ("**注意：**正文", "**注意**：正文"),
        ("正文**“引用”**结束", "正文“**引用**”结束"),
        ("**注意：** 正文", "**注意：** 正文"),  # CommonMark already renders these
        ("**bold** text", "**bold** text"),
        ("a **b.** c", "a **b.** c"),
        ("**注意**正文", "**注意**正文"),
        ("两处**甲：**乙和**丙！**丁", "两处**甲**：乙和**丙**！丁"),
        ("***", "***"),
    ],
)
def test_cjk_emphasis_renders_bold(text: str, fixed: str) -> None:
    assert fix_cjk_emphasis(text) == fixed
