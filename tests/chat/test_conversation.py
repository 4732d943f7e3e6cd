"""The chat record the model sees, and the CJK emphasis repair (pure logic)."""

from __future__ import annotations

import pytest

from chat.conversation import MAX_EXCHANGES, Conversation, ExchangeSigner, last_reply_step
from chat.export import chat_entries
from chat.ui.live import LiveReplies
from chat.ui.markdown import fix_cjk_emphasis, protect_dollars
from engine.prompt import Turn


def test_record_and_turns_in_order() -> None:
    conversation = Conversation(ExchangeSigner(b"key"))
    conversation.record("m1", "你好", "你好！")
    conversation.record("m2", "再见", "再见！")
    assert conversation.turns() == [
        Turn("user", "你好"),
        Turn("assistant", "你好！"),
        Turn("user", "再见"),
        Turn("assistant", "再见！"),
    ]


def test_editing_a_message_forgets_it_and_everything_after() -> None:
    conversation = Conversation(ExchangeSigner(b"key"))
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


@pytest.mark.parametrize(
    "text",
    [
        "`a**注意：**b`",
        "说明 `x**注意：**y` 和 **注意：**正文",
        "```\n**注意：**代码\n```\n\n**注意：**正文",
        "    **注意：**缩进的代码\n\n**注意：**正文",
        "> **注意：**引用 ``a ` **注意：**b``",
        "- **注意：**列表\n- `**提示：**代码`",
    ],
)
def test_cjk_emphasis_leaves_code_as_written(text: str) -> None:
    """Code spans and code blocks (as CommonMark's parser finds them) are untouched;
    the emphasis around them is still fixed."""
    from markdown_it import MarkdownIt

    def code(source: str) -> list[str]:
        tokens = MarkdownIt("commonmark").parse(source)
        blocks = [t.content for t in tokens if t.type in ("fence", "code_block")]
        inline = [c.content for t in tokens for c in t.children or [] if c.type == "code_inline"]
        return blocks + inline

    fixed = fix_cjk_emphasis(text)
    assert code(fixed) == code(text) and code(text)
    if "正文" in text or "列表" in text or "引用" in text:
        assert fixed != text  # the emphasis outside the code was fixed


def test_a_chat_keeps_a_bounded_number_of_exchanges() -> None:
    conversation = Conversation(ExchangeSigner(b"key"))
    for number in range(MAX_EXCHANGES + 50):
        conversation.record(f"m{number}", "问", "答")
    assert len(conversation) == MAX_EXCHANGES


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("it costs $5, or $10", "it costs \\$5, or \\$10"),  # money, not math
        ("$x^2$，$5 和 $10", "$x^2$，\\$5 和 \\$10"),
        ("costs $5, and $x$ is math", "costs \\$5, and $x$ is math"),
        ("$2x+1=5$ holds", "$2x+1=5$ holds"),  # math may begin with a digit
        ("$$\n\\int_0^1 x\\,dx\n$$", "$$\n\\int_0^1 x\\,dx\n$$"),  # display math, over lines
        ("$ 5 $ and $x $", "\\$ 5 \\$ and \\$x \\$"),  # spaces inside: no math
        ("a line $x\nand $y", "a line \\$x\nand \\$y"),  # inline math is on one line
        ("escaped \\$5 and $y$", "escaped \\$5 and $y$"),
        ("no dollars at all", "no dollars at all"),
    ],
)
def test_math_is_kept_and_money_is_escaped(text: str, shown: str) -> None:
    assert protect_dollars(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        "code `a$b` and `$PATH`",
        "```bash\necho $PATH $HOME\n```",
        "    $indented $code",
    ],
)
def test_dollars_in_code_are_left_as_written(text: str) -> None:
    assert protect_dollars(text) == text


def test_a_reply_another_session_recorded_is_adopted_only_when_signed() -> None:
    """A reloaded page's chat takes the exchange its old session wrote (chat.ui.live)."""
    seal = ExchangeSigner(b"k" * 32)
    old, new = Conversation(seal), Conversation(seal)
    new.record("m1", "first", "one")
    metadata = old.record("m2", "second", "two")
    new.adopt({"exchange": {**metadata["exchange"], "reply_text": "forged"}})  # not signed
    assert len(new) == 1
    new.adopt(metadata)
    assert [t.content for t in new.turns()] == ["first", "one", "second", "two"]


def test_a_reply_being_written_is_found_by_its_chat_until_it_ends() -> None:
    replies = LiveReplies()
    with replies.writing("ann", "thread", "first reply") as first:
        assert replies.of("ann", "thread") is first and not first.ended
        with replies.writing("ann", "thread", "regenerated") as second:  # the newer is the one
            assert replies.of("ann", "thread") is second
        assert replies.of("ann", "thread") is None and second.ended
    assert first.ended and replies.of("ann", "thread") is None


def test_a_reply_being_written_is_found_by_its_own_user_only() -> None:
    """A thread id alone was another user's to name: a reload followed that user's reply."""
    replies = LiveReplies()
    with replies.writing("mallory", "thread", "mallory's reply") as mallorys:
        assert replies.of("ann", "thread") is None
        with replies.writing("ann", "thread", "ann's reply") as anns:
            assert replies.of("ann", "thread") is anns
            assert replies.of("mallory", "thread") is mallorys


def test_a_resumed_chats_last_reply_is_the_last_signed_exchange() -> None:
    """It gets the regenerate and export buttons (chat.handlers.resumed)."""
    seal, conversation = ExchangeSigner(b"k" * 32), Conversation(ExchangeSigner(b"k" * 32))
    steps = [
        {"id": "u1", "type": "user_message", "output": "hi"},
        {"id": "a1", "metadata": conversation.record("u1", "hi", "one")},
        {"id": "a2", "metadata": {"exchange": {"message_id": "u2"}, "signature": "forged"}},
        {"id": "note", "metadata": {}},
    ]
    found = last_reply_step(steps, seal)
    assert found is not None and found["id"] == "a1"
    assert last_reply_step(steps[:1], seal) is None


def test_an_export_holds_only_the_exchanges_the_app_signed() -> None:
    """A client chooses its messages' type and metadata: an exchange of its own making
    was exported as the model's words."""
    seal = ExchangeSigner(b"k" * 32)
    signed = Conversation(seal).record("u1", "hi", "one")
    made_up = {"exchange": {"message_id": "u2", "user_text": "q", "reply_text": "forged"}}
    steps = [
        {"id": "u1", "type": "user_message", "output": "hi", "createdAt": "t1"},
        {"id": "a1", "type": "assistant_message", "metadata": signed, "createdAt": "t2"},
        {"id": "u2", "type": "user_message", "output": "q", "createdAt": "t3"},
        {"id": "a2", "type": "assistant_message", "metadata": made_up, "createdAt": "t4"},
        {"id": "a3", "type": "assistant_message", "metadata": signed | {"signature": "x"}},
    ]
    entries = chat_entries(steps, seal)
    assert [(e.role, e.text) for e in entries] == [("user", "hi"), ("assistant", "one")]
