"""A read-only link to a chat (``ERNIE_SHARE_LINKS``), made by its owner from the button
under the last reply, and the page it opens.

The link (``/shared/<token>``, ``chat.history.shares``) shows the chat's exchanges as they
were when it was made, to anyone holding it (``anyone``) or to signed-in users only
(``signed-in``, the default), for ``ERNIE_SHARE_DAYS``; the owner stops every link of a
chat with the button under the link's notice. Only the chat's own user can make one (the
chat of the session that asks, and stored as that user's); the page has no form, no
script and no link to anything else.

Usage::

    register(settings, lambda: runtime().seal)   # from chat.runtime.configure
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from dataclasses import asdict
from typing import Annotated, Any

import chainlit as cl
from fastapi import Depends, Request
from fastapi.responses import HTMLResponse

from settings.settings import Settings

from .chainlit_door import add_routes_first, data_layer, get_current_user, send_step
from .conversation import ExchangeSigner
from .export import entries_of
from .history.shares import create_share, read_share, stop_shares
from .ui.streaming import SHARE
from .words import DEFAULT_LANGUAGE, Strings, strings_for, t

__all__ = ["STOP_SHARING", "register"]

STOP_SHARING = "stop_sharing"  # the button under a link's notice (SHARE: under a reply)
SHARED_PATH = "/shared/{token}"
RequestUser = Annotated[Any, Depends(get_current_user)]


def register(settings: Settings, seal: Callable[[], ExchangeSigner]) -> None:
    """The buttons' actions and the link's page, where the settings share (idempotent)."""
    if settings.share_links == "off" or settings.kept_history_url is None:
        return
    days = settings.share_days

    async def share(_: cl.Action) -> None:
        await _share(seal(), days)

    async def stop(_: cl.Action) -> None:
        await _stop()

    cl.action_callback(SHARE)(share)
    cl.action_callback(STOP_SHARING)(stop)
    if settings.share_links == "signed-in":

        async def signed_in_page(token: str, request: Request, user: RequestUser) -> HTMLResponse:
            return await _page(token, request)

        add_routes_first({SHARED_PATH: signed_in_page})
    else:
        add_routes_first({SHARED_PATH: _page})


async def _own_chat() -> tuple[Any, str] | None:
    """The data layer and the user, where this session's chat is stored as its user's."""
    session, layer = cl.context.session, data_layer()
    user = getattr(session.user, "identifier", None)
    if layer is None or user is None or await layer.author_of(session.thread_id) != user:
        return None
    return layer, user


async def _share(seal: ExchangeSigner, days: float) -> None:
    """A new link to this chat as it is now, said with the button that stops it."""
    owned, session = await _own_chat(), cl.context.session
    entries = [] if owned is None else await entries_of(session, seal)
    if owned is None or not entries:
        await _notice(t("share_nothing"))
        return
    snapshot = json.dumps([asdict(entry) for entry in entries], ensure_ascii=False)
    token = await create_share(owned[0], session.thread_id, owned[1], snapshot, days=days)
    path = SHARED_PATH.format(token=token)
    stop = cl.Action(name=STOP_SHARING, payload={}, label=t("stop_sharing"), icon="link-2-off")
    await _notice(t("share_link", link=path, days=f"{days:g}"), stop)


async def _stop() -> None:
    owned = await _own_chat()
    thread = cl.context.session.thread_id
    stopped = 0 if owned is None else await stop_shares(owned[0], thread, owned[1])
    await _notice(t("sharing_stopped", count=stopped))


async def _notice(text: str, *actions: cl.Action) -> None:
    """A passing notice (not stored), with its buttons."""
    notice = cl.Message(content=text)
    await send_step(notice.to_dict())
    for action in actions:
        await action.send(for_id=notice.id)


def _language(request: Request) -> str:
    accepted = request.headers.get("accept-language", "").lower()
    return "zh-CN" if accepted.startswith("zh") else DEFAULT_LANGUAGE


async def _page(token: str, request: Request) -> HTMLResponse:
    """The shared chat, read-only; the same 404 for a link that never was, ended or was
    stopped."""
    t_ = strings_for(_language(request))
    layer = data_layer()
    shared = None if layer is None else await read_share(layer, token)
    headers = {"Cache-Control": "no-store", "X-Robots-Tag": "noindex"}
    if shared is None:
        return HTMLResponse(_html(t_, t_("shared_gone"), []), status_code=404, headers=headers)
    page = _html(t_, t_("shared_title"), json.loads(shared[0]), shared[1][:10])
    return HTMLResponse(page, headers=headers)


def _html(t_: Strings, title: str, entries: list[dict[str, Any]], day: str = "") -> str:
    """The page: each message escaped, in order, with who wrote it and when."""
    names = {"user": t_("shared_user"), "assistant": t_("export_model")}
    parts = []
    for entry in entries:
        when = str(entry.get("time") or "").replace("T", " ")[:16]
        parts.append(
            f"<article><h2>{html.escape(names.get(entry['role'], ''))} · {html.escape(when)}"
            f"</h2><p>{html.escape(str(entry.get('text', '')))}</p></article>"
        )
    note = t_("shared_note", day=day) if entries else ""
    return (
        f'<!doctype html><html lang="{html.escape(t_("html_lang"))}"><head><meta charset="utf-8">'
        '<meta name="robots" content="noindex"><meta name="viewport" '
        'content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p><small>{html.escape(note)}</small></p>"
        f"{''.join(parts)}</body></html>"
    )


STYLE = (
    "body{font-family:system-ui,'Noto Sans CJK SC',sans-serif;max-width:46rem;margin:2rem auto;"
    "padding:0 1rem;line-height:1.6;color:#222}article{border-bottom:1px solid #ddd;"
    "padding:.75rem 0}h2{font-size:.85rem;color:#666;margin:0}p{white-space:pre-wrap;"
    "margin:.25rem 0}small{color:#777}"
)
