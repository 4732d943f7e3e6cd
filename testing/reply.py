"""One reply as a chat client saw it (``testing.chat_client``): its frames, its times, its
final form or its error."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Reply"]


@dataclass
class Reply:
    """One reply as the tab saw it (times from ``time.monotonic()``)."""

    sent_at: float
    first_text_at: float | None = None
    ended_at: float | None = None
    frames: list[str] = field(default_factory=list)  # stream_start output and stream_token
    frame_at: list[float] = field(default_factory=list)  # when each of them arrived
    final: str | None = None  # the complete reply message, when the app sends one
    error: str | None = None  # an error message the app sent instead of (or during) a reply
    after_reconnect: bool = False  # the final form came after the socket came back

    @property
    def text(self) -> str:
        return self.final if self.final is not None else "".join(self.frames)

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_text_at is None else self.first_text_at - self.sent_at
