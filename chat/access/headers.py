"""What every answer tells the browser the page may do.

Chainlit sends none of these, so the chat could be framed by any site, a reply's Markdown
image (``![](http://elsewhere/?chat=...)``) was fetched from any host, sending the chat's
text with it, and a cookie set behind a TLS proxy was not marked ``Secure``. Here every
HTTP answer gets:

* ``Content-Security-Policy``: scripts from the app only (the page's own inline scripts
  by their hashes, computed from the page as served); images from the app, ``data:`` and
  ``blob:`` and ``ERNIE_IMAGE_SOURCES``; styles and fonts from the app and the two CDNs
  Chainlit's page names (Google Fonts, jsDelivr for KaTeX); connections to the app only;
  no plugins, no ``<base>``, forms to the app only; framed only by the app and
  ``ERNIE_ALLOWED_ORIGINS`` (``X-Frame-Options: SAMEORIGIN`` when there are none);
* ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: same-origin``;
* ``Secure`` on every cookie it sets when the visitor came over TLS (its own, or as the
  trusted proxy says with ``X-Forwarded-Proto``).

Usage::

    app.add_middleware(SecurityHeaders, policy=Policy(trust, image_sources, allowed_origins))
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .peers import ProxyTrust

__all__ = ["Policy", "SecurityHeaders", "inline_script_hashes"]

INLINE_SCRIPT = re.compile(rb"<script(?![^>]*\ssrc=)[^>]*>(.*?)</script>", re.S | re.I)
STYLE_HOSTS = "https://fonts.googleapis.com https://cdn.jsdelivr.net"
FONT_HOSTS = "https://fonts.gstatic.com https://cdn.jsdelivr.net"


def inline_script_hashes(page: bytes) -> list[str]:
    """CSP hash sources of the inline scripts of an HTML page."""
    found = (hashlib.sha256(body).digest() for body in INLINE_SCRIPT.findall(page))
    return [f"'sha256-{base64.b64encode(digest).decode()}'" for digest in found]


@dataclass(frozen=True)
class Policy:
    trust: ProxyTrust
    image_sources: str | None
    frame_origins: Sequence[str]

    def csp(self, script_hashes: Sequence[str] = ()) -> bytes:
        images = " ".join(filter(None, ["'self' data: blob:", self.image_sources]))
        frames = " ".join(["'self'", *self.frame_origins])
        directives = [
            "default-src 'self'",
            " ".join(["script-src 'self'", *script_hashes]),
            f"style-src 'self' 'unsafe-inline' {STYLE_HOSTS}",
            f"font-src 'self' data: {FONT_HOSTS}",
            f"img-src {images}",
            "media-src 'self' data: blob:",
            "connect-src 'self'",
            f"frame-ancestors {frames}",
            "form-action 'self'",
            "base-uri 'self'",
            "object-src 'none'",
        ]
        return "; ".join(directives).encode()

    def headers(self, script_hashes: Sequence[str]) -> list[tuple[bytes, bytes]]:
        headers = [
            (b"content-security-policy", self.csp(script_hashes)),
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"same-origin"),
        ]
        if not self.frame_origins:
            headers.append((b"x-frame-options", b"SAMEORIGIN"))
        return headers


def _secure_cookies(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """Every ``Set-Cookie`` marked ``Secure``."""
    marked = []
    for name, value in headers:
        if name.lower() == b"set-cookie" and b"secure" not in value.lower():
            value += b"; Secure"
        marked.append((name, value))
    return marked


class SecurityHeaders:
    """The headers above on every HTTP answer; an HTML page is held until its end (a few
    KiB: Chainlit's page) so its inline scripts' hashes go into its policy."""

    def __init__(self, app: ASGIApp, *, policy: Policy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        https = self.policy.trust.https(scope)
        start: dict[str, Any] = {}
        page: list[bytes] = []

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                start.update(message, headers=_secure_cookies(headers) if https else headers)
                if not _is_html(headers):
                    await send(self._with(start, []))
                return
            if message["type"] == "http.response.body" and _is_html(start.get("headers", [])):
                page.append(message.get("body", b""))
                if message.get("more_body", False):
                    return
                body = b"".join(page)
                await send(self._with(start, inline_script_hashes(_plain(start, body))))
                message = {**message, "body": body}
            await send(message)

        await self.app(scope, receive, sending)

    def _with(self, start: dict[str, Any], hashes: list[str]) -> Message:
        return {**start, "headers": [*start["headers"], *self.policy.headers(hashes)]}


def _plain(start: dict[str, Any], body: bytes) -> bytes:
    """The page as written (Chainlit's own middleware may have compressed it already)."""
    encoding = dict((k.lower(), v) for k, v in start["headers"]).get(b"content-encoding")
    return gzip.decompress(body) if encoding == b"gzip" else body


def _is_html(headers: list[tuple[bytes, bytes]]) -> bool:
    return any(
        name.lower() == b"content-type" and value.startswith(b"text/html")
        for name, value in headers
    )
