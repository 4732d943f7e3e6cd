"""Every HTTP route passes the route door and gets the security headers, on the real app
(``open_app`` without sign-in, ``signed_app`` with it), each visitor from an address of
its own: another site's form cannot sign a visitor in, the page cannot be framed or load
images from elsewhere, routes of what the app does not do are refused before they write,
one address cannot flood, and a cookie set behind a TLS proxy is ``Secure``."""

from __future__ import annotations

import base64
import hashlib
import math
import re
import time

from testing.accounts import PASSWORD, forwarded
from testing.chat_client import ChatClient
from testing.servers import AppServer
from testing.visitors import http_client, visitor

EVIL = "http://evil.example"


def test_another_sites_form_cannot_sign_a_visitor_in(signed_app: AppServer) -> None:
    """A form posted to /login from another origin got 200 and the cookie: the visitor was
    signed into the attacker's account (login CSRF)."""
    url, form = signed_app.url, {"username": "alice", "password": PASSWORD}
    with http_client(visitor()) as http:
        crossed = http.post(f"{url}/login", data=form, headers={"Origin": EVIL})
        assert crossed.status_code == 403 and not crossed.cookies
        for method in ("put", "delete"):  # any change another page would ask for
            answer = http.request(method, f"{url}/project/thread", headers={"Origin": EVIL})
            assert answer.status_code == 403
        own = http.post(f"{url}/login", data=form, headers={"Origin": url})
        assert own.status_code == 200 and own.cookies


def inline_hashes(page: str) -> set[str]:
    found = re.findall(r"<script(?![^>]*\ssrc=)[^>]*>(.*?)</script>", page, re.S)
    return {base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() for s in found}


def test_every_answer_says_what_the_page_may_do(open_app: AppServer) -> None:
    """No CSP, no frame rule, no nosniff, no referrer rule: the chat could be framed, and
    a Markdown image sent the chat's text to any host."""
    with http_client(visitor()) as http:
        page = http.get(f"{open_app.url}/")
        api = http.get(f"{open_app.url}/auth/config")
    for answer in (page, api):
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "same-origin"
        assert answer.headers["x-frame-options"] == "SAMEORIGIN"
        policy = answer.headers["content-security-policy"]
        assert "img-src 'self' data: blob:;" in policy and "frame-ancestors 'self'" in policy
        assert "connect-src 'self'" in policy and "object-src 'none'" in policy
    scripts = page.headers["content-security-policy"].split("script-src ")[1].split(";")[0]
    assert {f"'sha256-{h}'" for h in inline_hashes(page.text)} <= set(scripts.split())
    assert "'unsafe-inline'" not in scripts


async def test_routes_of_what_the_app_does_not_do_are_refused_before_they_write(
    open_app: AppServer,
) -> None:
    """``PUT /project/element`` with uploads off wrote a file per request into the session's
    folder (+35 MB a second) and a 12-line traceback per request into the log."""
    url = open_app.url
    async with ChatClient.connect(url, source=visitor()) as chat:
        element = {"id": "e1", "type": "custom", "name": "x", "display": "inline", "props": {}}
        body = {"element": element, "sessionId": chat.session_id}
        with http_client(visitor()) as http:
            for _ in range(20):
                assert http.put(f"{url}/project/element", json=body).status_code == 404
            action = {"action": {"name": "x", "payload": {}}, "sessionId": chat.session_id}
            assert http.post(f"{url}/project/action", json=action).status_code == 404
            assert http.post(f"{url}/mcp", json={"sessionId": chat.session_id}).status_code == 404
        assert (await chat.send("你好")).error is None
    assert "Traceback" not in open_app.log.read_text(errors="replace")


def test_one_address_cannot_flood_the_routes(open_app: AppServer) -> None:
    """ERNIE_REQUESTS_PER_MINUTE (600, 200 at once) per address; the health checks apart."""
    url, flood, started = open_app.url, visitor(), time.monotonic()
    with http_client(flood) as http:
        codes = [http.get(f"{url}/auth/config").status_code for _ in range(300)]
        refused = http.get(f"{url}/auth/config")
        assert http.get(f"{url}/healthz").status_code == 200  # load balancers' polls pass
    allowed = 200 + 10 * math.ceil(time.monotonic() - started) + 1  # this machine's speed aside
    assert codes.count(429) >= max(1, 300 - allowed) and refused.status_code == 429
    assert int(refused.headers["retry-after"]) >= 1
    with http_client(visitor()) as other:
        assert other.get(f"{url}/auth/config").status_code == 200


def test_a_cookie_set_behind_a_tls_proxy_is_secure(signed_app: AppServer) -> None:
    """Behind the trusted proxy's TLS (X-Forwarded-Proto: https) the session cookie had no
    ``Secure`` flag: a browser would send it over plain HTTP too."""
    url, form = signed_app.url, {"username": "alice", "password": PASSWORD}
    tls = forwarded(visitor()) | {"X-Forwarded-Proto": "https"}
    with http_client(visitor()) as http:
        secure = http.post(f"{url}/login", data=form, headers=tls)
        plain = http.post(f"{url}/login", data=form, headers=forwarded(visitor()))
        claimed = http.post(f"{url}/login", data=form, headers={"X-Forwarded-Proto": "https"})
    assert secure.status_code == 200 and "secure" in secure.headers["set-cookie"].lower()
    assert plain.status_code == 200 and "secure" not in plain.headers["set-cookie"].lower()
    # a client that is not the proxy does not decide it (nor does it matter: it is no TLS)
    assert "secure" not in claimed.headers["set-cookie"].lower()


def test_a_session_id_in_a_route_must_be_a_uuid(open_app: AppServer) -> None:
    with http_client(visitor()) as http:
        cookie = http.post(f"{open_app.url}/set-session-cookie", json={"session_id": "/data"})
        files = http.get(f"{open_app.url}/project/file/x", params={"session_id": "../.."})
    assert cookie.status_code == 400 and "set-cookie" not in cookie.headers
    assert files.status_code in (400, 404)
    page_id = "00000000-0000-4000-8000-000000000000"  # what the page sends: its session's id
    with http_client(visitor()) as http:
        assert http.post(
            f"{open_app.url}/set-session-cookie", json={"session_id": page_id}
        ).is_success
