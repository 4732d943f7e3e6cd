"""ERNIE_ENGINE=remote against a real ``vllm serve`` (CPU backend, the scripted demo
model) started here: streaming, stop ids, the stop button and a closed stream aborting
on the server, stats, the capacity report; and the app on it through Chainlit."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import time
import unittest.mock
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine import ChatEngine, ChatOptions, EngineState, ReplyEnd, TextChunk
from engine.completions import (
    Collector,
    RemoteCompletion,
    RemoteOutput,
    RemoteServerError,
    completion_body,
)
from engine.model.demo import SCRIPTED_REPLY
from engine.remote import RemoteBackend
from engine.sampling import build_sampling_params
from settings.loader import load_settings
from settings.settings import SettingsError
from testing.browser import STATS_LINE
from testing.chat_client import ChatClient, wait_ready
from testing.demo import hermetic_settings
from testing.engines import collect, text_of
from testing.polling import until
from testing.relay import relay
from testing.servers import AppServer, Server, free_port
from testing.visitors import closed, idle_connections, visitor

SCRIPT = "".join(SCRIPTED_REPLY)


@pytest.fixture(scope="module")
async def remote(vllm_server: Server, scripted_model: Path) -> AsyncIterator[ChatEngine]:
    engine = ChatEngine.from_settings(
        hermetic_settings(
            model=str(scripted_model),
            engine="remote",
            remote_url=f"{vllm_server.url}/",
            max_model_len=4096,
            stream_interval_ms=0,
        )
    )
    engine.start()
    await engine.wait_ready()
    yield engine
    await engine.shutdown()


async def running_on_server(server: Server) -> float:
    """Requests the vLLM server runs now (its Prometheus gauge)."""
    async with httpx.AsyncClient(timeout=5) as client:
        text = (await client.get(f"{server.url}/metrics")).text
    gauges = [
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "vllm:num_requests_running"
        for sample in family.samples
    ]
    assert gauges, "no vllm:num_requests_running in /metrics"
    return sum(gauges)


async def until_idle(server: Server, engine: ChatEngine, within_s: float = 10) -> None:
    async def idle() -> bool:
        return not (await running_on_server(server) or engine.running_requests)

    await until(idle, within_s, "idle server", interval_s=0.1)


async def test_outputs_wait_merged_for_a_slow_reader() -> None:
    """A reader sleeping until its next flush gets every token of the meantime at once."""
    outputs = Collector()
    outputs.put([1], None)
    outputs.put([2, 3], None)
    assert await outputs.take() == RemoteOutput([RemoteCompletion([1, 2, 3], None)], False)
    outputs.put([4], "length")
    outputs.end()
    assert await outputs.take() == RemoteOutput([RemoteCompletion([4], "length")], True)
    assert await outputs.take() is None
    failed = Collector()
    failed.put([5], None)
    failed.fail(RemoteServerError("gone"))
    failed.end()
    assert (await failed.take()).outputs[0].token_ids == [5]  # what came is not lost
    with pytest.raises(RemoteServerError, match="gone"):
        await failed.take()


async def test_a_reply_streams_with_stats_and_the_capacity_names_the_server(
    remote: ChatEngine, vllm_server: Server
) -> None:
    assert remote.status().state is EngineState.READY
    assert any(vllm_server.url in line for line in remote.capacity.lines())
    assert remote.capacity.as_dict()["servers"][0]["max_model_len"] == 2048
    assert remote.backend.max_model_len == 2048  # what prompts and the settings panel use
    events = await collect(
        remote.chat([], "你好", request_id="remote-1", options=ChatOptions(max_tokens=40))
    )
    assert text_of(events).startswith(SCRIPT)  # decoded here, from the server's token ids
    assert len(events) > 5  # streamed, not in one piece
    end = events[-1]
    assert isinstance(end, ReplyEnd) and end.finish_reason == "length"
    assert end.stats.reply_tokens == 40 and end.stats.ttft_s is not None
    assert end.stats.prompt_tokens > 10
    await until_idle(vllm_server, remote)


async def test_the_models_stop_ids_go_to_the_server(
    remote: ChatEngine, vllm_server: Server
) -> None:
    model = remote.model
    body = completion_body("m", [1, 2], build_sampling_params(remote.settings, model), "r")
    assert body["stop_token_ids"] == list(model.stop_token_ids) and body["return_token_ids"]
    assert body["prompt"] == [1, 2] and body["stream"] is True
    # A stop id the scripted reply reaches: the server stops there.
    stop_at = model.tokenizer.convert_tokens_to_ids(SCRIPTED_REPLY[1])
    params = build_sampling_params(remote.settings, model, stop_token_ids=[stop_at])
    prompt = remote.build_prompt([], "你好").token_ids
    events = await collect(remote.stream(prompt, params, request_id="remote-stop"))
    # Ended at the stop id, which vLLM returns as the last token (as the in-process engine
    # does: the model's real stop ids are special tokens, which the decoder never shows).
    assert text_of(events) == SCRIPTED_REPLY[0] + SCRIPTED_REPLY[1]
    assert isinstance(events[-1], ReplyEnd) and events[-1].finish_reason == "stop"


@pytest.mark.parametrize("how", ["abort", "close"])
async def test_stopping_a_reply_aborts_it_on_the_server(
    remote: ChatEngine, vllm_server: Server, how: str
) -> None:
    events = remote.chat(
        [], "你好", request_id=f"remote-{how}", options=ChatOptions(max_tokens=1500)
    )
    first = await anext(events)
    assert isinstance(first, TextChunk)
    assert await running_on_server(vllm_server) == 1 and remote.running_requests == 1
    if how == "abort":  # the stop button
        await remote.abort(f"remote-{how}")
        rest = [event async for event in events]
        end = rest[-1]
        assert isinstance(end, ReplyEnd) and end.finish_reason == "abort"
        assert end.stats.reply_tokens < 1500
    else:  # a closed tab: the app closes the stream
        await events.aclose()
    await until_idle(vllm_server, remote)


async def test_a_server_that_never_comes_up_fails_the_engine_in_one_line(
    scripted_model: Path,
) -> None:
    """Asked again for ERNIE_REMOTE_WAIT_S, then failed, in one line that says so."""
    remote = {"engine": "remote", "remote_url": "http://127.0.0.1:9", "remote_wait_s": 3}
    engine = ChatEngine.from_settings(hermetic_settings(model=str(scripted_model), **remote))
    started = time.monotonic()
    engine.start()
    with contextlib.suppress(Exception):
        await engine.wait_ready()
    status = engine.status()
    assert status.state is EngineState.FAILED and time.monotonic() - started >= 3
    assert status.reason and "http://127.0.0.1:9" in status.reason
    assert "for 3 s (ERNIE_REMOTE_WAIT_S)" in status.reason and "\n" not in status.reason
    await engine.shutdown()


def test_remote_settings_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ERNIE_ENGINE", "remote")
    with pytest.raises(SettingsError, match="ERNIE_ENGINE=remote needs ERNIE_REMOTE_URL"):
        load_settings()
    monkeypatch.setenv("ERNIE_REMOTE_URL", "gpu-1:8000")
    with pytest.raises(SettingsError, match=r"ERNIE_REMOTE_URL='gpu-1:8000'.*http"):
        load_settings()
    monkeypatch.setenv("ERNIE_REMOTE_URL", " http://a:8000/ , https://b ")
    assert load_settings().remote_urls == ["http://a:8000", "https://b"]


async def test_the_app_waits_for_its_server_then_chats_and_stops(
    vllm_server: Server, scripted_model: Path, tmp_path: Path
) -> None:
    """Started before its server (one compose file, a reboot), the app said "failed" at
    once and stayed so: it waits, loading, until the server answers on its port."""
    port = free_port()  # nothing listens there yet
    env = {
        "ERNIE_MODEL": str(scripted_model),
        "ERNIE_ENGINE": "remote",
        "ERNIE_REMOTE_URL": f"http://127.0.0.1:{port}",
        "ERNIE_MAX_MODEL_LEN": "2048",
        "ERNIE_MAX_TOKENS": "1024",
        "ERNIE_REPLY_TOKENS": "48",
        "ERNIE_HISTORY_URL": "off",
        "ERNIE_REQUEST_TIMEOUT_S": "2",
    }
    # A developer's start command (the others use scripts/start.sh's launcher).
    with AppServer.run(env, tmp_path / "app.log", app="app.py") as app:
        waiting = "waiting up to 600 s (ERNIE_REMOTE_WAIT_S)"  # on its console
        await until(lambda: waiting in app.log.read_text(), 120, "the waiting line")
        assert app.readyz()[1]["state"] == "loading"
        # Chainlit's own server closes a connection that says nothing, as python -m serve
        opened, _ = await idle_connections(app.url, visitor(), 1)
        assert await closed(opened[0][0], within_s=6)
        async with relay(port, vllm_server.url):  # the server comes up on its port
            await ready_and_chatting(app, vllm_server)


async def ready_and_chatting(app: AppServer, vllm_server: Server) -> None:
    """The app on the remote engine: a reply with its stats, and a stop that frees the
    server's request."""
    ready = await wait_ready(app.url, 120)
    assert ready["capacity"]["backend"] == "remote"
    async with ChatClient.connect(app.url) as chat:
        reply = await chat.send("你好", timeout_s=120)
        assert reply.error is None and reply.final is not None
        assert reply.final.startswith("**注意**：正文")  # the app's fix moves the colon
        assert STATS_LINE in reply.final and "48 tokens" in reply.final
        thinking = [m for m in chat.messages if "Thinking" in m]
        assert thinking, chat.messages  # the thinking state came before the text
        await chat.change_settings(
            {"temperature": 0.5, "top_p": 0.9, "max_tokens": 1024, "system_prompt": "zh"}
        )
        long = asyncio.create_task(chat.send("再来", timeout_s=120))
        await until(lambda: chat.reply is not reply and chat.reply.frames, 60, "new text")
        await chat.stop()
        stopped = await long
    assert stopped.error is None and len(stopped.text) < 1024
    await app.wait_for_running(0, within_s=10)  # the app let the request go
    assert await running_on_server(vllm_server) == 0  # and so did the server
    # Each reply has its line in the app's log, the stopped one too (it had none).
    ended = functools.partial(re.findall, r"request chat-\w+ (\w+): \d+ tokens")
    await until(lambda: len(ended(app.log.read_text())) == 2, 10, "a line for each reply")
    assert ended(app.log.read_text())[0] == "length"


async def test_credentials_in_a_server_url_stop_the_app_in_one_line(
    vllm_server: Server, scripted_model: Path, tmp_path: Path
) -> None:
    """A server URL with a password reached the unauthenticated /readyz, the log and the
    chat's error through httpx's error text: it is refused at start, pointing to the key's
    own setting; a history URL's password stays out of its one-line error."""
    host = vllm_server.url.removeprefix("http://")
    env = {
        "ERNIE_MODEL": str(scripted_model),
        "ERNIE_ENGINE": "remote",
        "ERNIE_REMOTE_URL": f"http://ops:hunter2-secret@{host}",
        "ERNIE_HISTORY_URL": "off",
    }
    with AppServer.run(env, tmp_path / "app.log") as app, pytest.raises(RuntimeError):
        app.wait("/", timeout_s=120)  # it exits
    console = (tmp_path / "app.log").read_text()
    line = console.strip().splitlines()[-1]
    assert (
        "hunter2" not in console
        and line.startswith("error: ERNIE_REMOTE_URL='http://***@")
        and "hunter2" not in line
    )
    assert "ERNIE_REMOTE_API_KEY" in line
    bad = {"ERNIE_MODEL": str(scripted_model), "ERNIE_HISTORY_URL": "mysql://u:hunter2@db/x"}
    with AppServer.run(bad, tmp_path / "bad.log") as app, pytest.raises(RuntimeError):
        app.wait("/", timeout_s=120)  # it exits
    line = (tmp_path / "bad.log").read_text().strip().splitlines()[-1]
    assert line.startswith("error: ERNIE_HISTORY_URL=") and "hunter2" not in line


async def test_the_api_key_goes_to_the_servers_as_a_bearer_token() -> None:
    """A pure unit test of the header (vllm serve --api-key itself was not started here)."""
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization", ""))
        return httpx.Response(200, json={"data": [{"id": "m", "max_model_len": 2048}]})

    settings = hermetic_settings(
        engine="remote", remote_url="http://gpu-1:8000", remote_api_key="sk-test-key"
    )
    transport = httpx.MockTransport(answer)
    with unittest.mock.patch(
        "httpx.AsyncClient", functools.partial(httpx.AsyncClient, transport=transport)
    ):
        backend = await RemoteBackend.connect(settings)
    assert seen == ["Bearer sk-test-key"] and backend.max_model_len == 2048
    await backend.close()
