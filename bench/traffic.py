"""Open-loop traffic: conversations that arrive over time, as people come to a chat.

Arrivals are a Poisson process at ``rate`` new conversations a second over ``duration_s``
(exponential gaps, a fixed seed: every path of a run meets the same visitors at the same
moments). A conversation has ``turns`` messages; before each later one its visitor reads
and types for a think time drawn from an exponential around ``think_s``, and the app (or
the bench, for the bare engines) keeps its history, so later prompts grow and share their
prefix. A conversation's replies have one length, drawn from a log-normal distribution:
median ``reply_median`` tokens, sigma ``reply_sigma`` (0.6: 80% between 0.46x and 2.2x the median),
clipped to ``16 .. reply_max`` and rounded to the settings panel's step of 16; the replies
run to that length (``ignore_eos``), so every path writes the same tokens.

Usage::

    visitors = Traffic(rate=4.0, duration_s=30).conversations()
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

__all__ = ["QUESTIONS", "Conversation", "Traffic"]

# A Chinese chat's first message and its follow-ups (the first is the bench's PROMPT).
QUESTIONS = (
    "我下个月要去杭州出差三天，第一次去。工作日白天都在滨江开会，晚上和周末有空。"
    "请帮我安排一下：晚上可以去哪里走走、吃什么本地菜比较地道、从滨江过去方便吗？",
    "谢谢！周末那两天能再具体一点吗？按上午、下午、晚上分开写。",
    "如果下雨的话，有哪些室内的去处可以替换？",
    "最后帮我列一个要带的东西的清单。",
)
STEP = 16  # the settings panel's step for the reply length


@dataclass(frozen=True)
class Conversation:
    """One visitor's conversation: when it starts, its messages and the pauses between."""

    index: int
    start_s: float  # from the run's start
    reply_tokens: int  # every reply of it
    questions: tuple[str, ...]
    think_s: tuple[float, ...]  # before each message after the first


@dataclass(frozen=True)
class Traffic:
    rate: float  # new conversations a second
    duration_s: float
    turns: int = 2
    think_s: float = 2.0
    reply_median: int = 256
    reply_max: int = 1024
    seed: int = 7
    reply_sigma: float = 0.6  # 0: every reply reply_median tokens

    def conversations(self) -> list[Conversation]:
        """The visitors of the run, in order of arrival."""
        draw = random.Random(self.seed)
        visitors: list[Conversation] = []
        at = draw.expovariate(self.rate)
        while at < self.duration_s:
            visitors.append(self._one(len(visitors), at, draw))
            at += draw.expovariate(self.rate)
        return visitors

    def _one(self, index: int, start_s: float, draw: random.Random) -> Conversation:
        length = self.reply_median * math.exp(draw.gauss(0, self.reply_sigma))
        tokens = min(self.reply_max, max(STEP, round(length / STEP) * STEP))
        questions = tuple(QUESTIONS[i % len(QUESTIONS)] for i in range(self.turns))
        pauses = tuple(draw.expovariate(1 / self.think_s) for _ in range(self.turns - 1))
        return Conversation(index, start_s, tokens, questions, pauses)
