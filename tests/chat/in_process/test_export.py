"""Export on the mock engine: the button gives the tab its links; the files hold the
exchanges (who, what, when, the reply's notes) and nothing else, through the app's real
routes (in-process, over ASGI)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest
from chainlit.server import app as chainlit_app

from testing.in_process import Page, app_on, message_payload, mock_engine


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=chainlit_app, client=("127.0.0.2", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


async def export_links(page: Page) -> str:
    await page.click("export")
    return await page.wait_for_text("/export/", kind="assistant_message")


async def test_the_files_hold_the_exchanges_and_their_notes(http: httpx.AsyncClient) -> None:
    async with app_on(mock_engine(["你好", "，世界"])) as app:
        page = app.open_page()
        await page.connect()
        await page.send("第一句")
        await page.receive("client_message", message_payload(""))  # refused: not exported
        await page.wait_for_text("Your message is empty")
        await page.send("第二句")
        links = await export_links(page)
        base = re.search(r"\((/export/[\w-]+)/chat\.md\)", links)
        assert base, links
        markdown = await http.get(f"{base.group(1)}/chat.md")
        exported = (await http.get(f"{base.group(1)}/chat.json")).json()
    assert markdown.status_code == 200 and markdown.text.startswith("# ERNIE chat")
    assert "### You ·" in markdown.text and "### ERNIE ·" in markdown.text
    assert markdown.headers["cache-control"] == "no-store"
    texts = [(m["role"], m["text"]) for m in exported["messages"]]
    assert texts == [
        ("user", "第一句"),
        ("assistant", "你好，世界"),
        ("user", "第二句"),
        ("assistant", "你好，世界"),
    ]
    assert all(m["time"] for m in exported["messages"])
    assert any("tokens" in note for note in exported["messages"][1]["notes"])
    assert "empty" not in markdown.text


async def test_the_links_come_in_chinese_and_the_file_titles_too(http: httpx.AsyncClient) -> None:
    async with app_on(mock_engine()) as app:
        page = app.open_page(language="zh-CN")
        await page.connect()
        await page.send("你好")
        links = await export_links(page)
        assert links.startswith("下载这段对话")
        base = re.search(r"\((/export/[\w-]+)/chat\.md\)", links)
        assert base, links
        markdown = (await http.get(f"{base.group(1)}/chat.md")).text
    assert markdown.startswith("# ERNIE 对话") and "### 你 ·" in markdown


async def test_a_link_names_its_own_chat_only(http: httpx.AsyncClient) -> None:
    async with app_on(mock_engine()) as app:
        mine, theirs = app.open_page(), app.open_page(address="127.0.0.3")
        for page, words in ((mine, "mine"), (theirs, "theirs")):
            await page.connect()
            await page.send(words)
        base = re.search(r"\((/export/[\w-]+)/chat\.md\)", await export_links(mine))
        assert base, mine.texts()
        markdown = (await http.get(f"{base.group(1)}/chat.md")).text
        assert "mine" in markdown and "theirs" not in markdown
        assert (await http.get("/export/not-a-token/chat.md")).status_code == 404
        await mine.close()  # the tab closed: its session, and its link, are gone
        assert (await http.get(f"{base.group(1)}/chat.md")).status_code == 404
