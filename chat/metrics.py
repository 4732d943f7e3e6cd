"""The chat app's Prometheus metrics, served beside vLLM's own engine metrics.

vLLM registers its metrics (``vllm:*``: requests running and waiting, KV cache use,
token throughput, its own latency histograms) in prometheus_client's default registry
when the engine starts; these join them there, so one scrape of ``/metrics`` has both.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Gauge, Histogram
from prometheus_client import generate_latest as _generate_latest

from engine import ReplyEnd

__all__ = [
    "CHATS_OPEN",
    "CONTENT_TYPE",
    "ERRORS",
    "MESSAGES",
    "STOPS",
    "exposition",
    "record_cancelled_reply",
    "record_reply",
]

CONTENT_TYPE = CONTENT_TYPE_LATEST

CHATS_OPEN = Gauge("ernie_chats_open", "Chat sessions open now.")
MESSAGES = Counter("ernie_messages", "Messages received from users.")
REPLIES = Counter("ernie_replies", "Replies finished, by how they ended.", ["finish_reason"])
STOPS = Counter("ernie_stops", "Replies stopped by the user.")
ERRORS = Counter("ernie_errors", "Messages answered with an error, by kind.", ["kind"])
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


def record_reply(end: ReplyEnd) -> None:
    REPLIES.labels(finish_reason=end.finish_reason).inc()
    REPLY_TOKENS.observe(end.stats.reply_tokens)
    if end.stats.ttft_s is not None:
        TIME_TO_FIRST_TOKEN.observe(end.stats.ttft_s)


def record_cancelled_reply() -> None:
    """A reply whose handler was cancelled (stop button, closed chat) before its end
    arrived: the engine aborts it, and it counts as aborted."""
    REPLIES.labels(finish_reason="abort").inc()


def exposition() -> bytes:
    """Every registered metric, vLLM's and the app's, in Prometheus' text format."""
    return bytes(_generate_latest(REGISTRY))
