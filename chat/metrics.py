"""The chat app's Prometheus metrics, served beside vLLM's own engine metrics.

vLLM registers its metrics (``vllm:*``: requests running and waiting, KV cache use,
token throughput, its own latency histograms) in prometheus_client's default registry
when the engine starts; these join them there, so one scrape of ``/metrics`` has both.
In a group of workers (``ERNIE_WORKERS``) every process writes its values to the folder
``PROMETHEUS_MULTIPROC_DIR`` names, and a scrape of any worker reads them all
(prometheus_client's multiprocess mode): ``/metrics`` speaks for the group.
"""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    multiprocess,
)
from prometheus_client import generate_latest as _generate_latest

from engine import ReplyEnd

__all__ = [
    "CHATS_OPEN",
    "CONTENT_TYPE",
    "ERRORS",
    "LINE_WAIT",
    "MESSAGES",
    "REFUSED",
    "REPLYING",
    "SESSIONS_HELD",
    "STOPS",
    "WAITING",
    "exposition",
    "group_replying",
    "record_cancelled_reply",
    "record_reply",
]

CONTENT_TYPE = CONTENT_TYPE_LATEST

# In a group, one value per worker (label ``pid``): how evenly HAProxy spreads the chats.
CHATS_OPEN = Gauge("ernie_chats_open", "Chat sessions open now.", multiprocess_mode="liveall")
SESSIONS_HELD = Gauge(
    "ernie_sessions_held",
    "Chat sessions in memory: the open ones, and closed ones kept for their socket to come "
    "back (ERNIE_SESSION_KEEP_MINUTES); a worker's value as of its last scrape or disconnect.",
    multiprocess_mode="livesum",
)
REPLYING = Gauge("ernie_replies_running", "Replies being written now.", multiprocess_mode="livesum")
WAITING = Gauge(
    "ernie_line_waiting",
    "Messages waiting in line for a reply (the box runs ERNIE_MAX_REPLIES at once).",
    multiprocess_mode="livesum",
)
LINE_WAIT = Histogram(
    "ernie_line_wait_seconds",
    "How long a message that waited in line waited for its reply to start.",
    buckets=(0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0),
)
MESSAGES = Counter("ernie_messages", "Messages received from users.")
FEEDBACK = Counter("ernie_feedback", "Feedback users gave replies (👍 up, 👎 down).", ["value"])
REPLIES = Counter("ernie_replies", "Replies finished, by how they ended.", ["finish_reason"])
STOPS = Counter("ernie_stops", "Replies stopped by the user.")
ERRORS = Counter("ernie_errors", "Messages answered with an error, by kind.", ["kind"])
REFUSED = Counter(
    "ernie_refused",
    "Requests (door=route) and socket events (door=socket) the front doors refused, by reason.",
    ["door", "reason"],
)
TIME_TO_FIRST_TOKEN = Histogram(
    "ernie_time_to_first_token_seconds",
    "From the message reaching the engine to the reply's first token.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
REPLY_TOKENS = Histogram(
    "ernie_reply_tokens",
    "Tokens per reply.",
    buckets=(1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384),
)


REPLY_TIME = Histogram(
    "ernie_reply_time_seconds",
    "Where a reply's time went, as the engine saw it: waiting (the app's line and the "
    "engine's queue), reading the prompt (prefill), writing (first token to last).",
    ["phase"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
)
PROMPT_CACHED = Histogram(
    "ernie_prompt_cached_ratio",
    "The share of a reply's prompt read from the engine's prefix cache.",
    buckets=(0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0),
)


def record_reply(end: ReplyEnd, waited_s: float = 0.0) -> None:
    REPLIES.labels(finish_reason=end.finish_reason).inc()
    REPLY_TOKENS.observe(end.stats.reply_tokens)
    if end.stats.ttft_s is not None:
        TIME_TO_FIRST_TOKEN.observe(end.stats.ttft_s)
    engine = end.stats.engine
    if engine is not None:
        REPLY_TIME.labels(phase="waiting").observe(waited_s + engine.queued_s)
        REPLY_TIME.labels(phase="reading").observe(engine.reading_s)
        REPLY_TIME.labels(phase="writing").observe(engine.writing_s)
        PROMPT_CACHED.observe(end.stats.cached_share)


def record_cancelled_reply() -> None:
    """A reply whose handler was cancelled (stop button, closed chat) before its end
    arrived: the engine aborts it, and it counts as aborted."""
    REPLIES.labels(finish_reason="abort").inc()


def _group_registry() -> CollectorRegistry | None:
    """The whole group's metrics (read from the workers' files), or None for one process."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return None
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return registry


def exposition() -> bytes:
    """Every registered metric, vLLM's and the app's, in Prometheus' text format."""
    return bytes(_generate_latest(_group_registry() or REGISTRY))


def group_replying() -> int | None:
    """Replies being written over the whole group of workers; None for one process."""
    registry = _group_registry()
    if registry is None:
        return None
    return int(registry.get_sample_value("ernie_replies_running") or 0)
