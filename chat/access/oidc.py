"""Company sign-in with OpenID Connect (``ERNIE_OIDC_*``), through Chainlit's OAuth.

The provider's endpoints come from its discovery document; Chainlit's generic OAuth
provider, named ``oidc``, takes them and this app's client. A user signed in there is one
of this app's users as any other (``chat.access.sign_in``): the session's lifetime from
the sign-in, sign-out ending its copies, the history theirs.

At start (``check_oidc``, before anything loads) the provider is reached and asked, with
this client's id and secret and a code that is none, for a token: a provider that knows
the client answers ``invalid_grant``; one that does not, ``invalid_client``: a wrong
secret stops the start in one line naming the setting, not the first user's sign-in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import chainlit as cl
import httpx

from settings.names import SettingsError, env_name
from settings.settings import Settings

from ..chainlit_door import use_oauth_provider

__all__ = ["PROVIDER", "check_oidc", "register"]

PROVIDER = "oidc"  # Chainlit's routes: /auth/oauth/oidc and its /callback
TIMEOUT_S = 10


def _discovered(issuer: str) -> dict[str, Any]:
    """The provider's discovery document; ``SettingsError`` naming the issuer if none."""
    url = f"{issuer.rstrip('/')}/.well-known/openid-configuration"
    try:
        answer = httpx.get(url, timeout=TIMEOUT_S)
        answer.raise_for_status()
        document = dict(answer.json())
        for key in ("authorization_endpoint", "token_endpoint", "userinfo_endpoint"):
            assert isinstance(document.get(key), str), f"no {key}"
    except (httpx.HTTPError, ValueError, AssertionError) as exc:
        raise SettingsError(
            f"{env_name('oidc_issuer')}={issuer!r}: no OpenID Connect provider answers there "
            f"({type(exc).__name__}: {exc}); set the issuer URL the provider states"
        ) from None
    return document


def check_oidc(settings: Settings) -> None:
    """The provider reached, and this client known to it (see the module's text)."""
    if settings.oidc_issuer is None or settings.oidc_client_secret is None:
        return
    token_url = _discovered(settings.oidc_issuer)["token_endpoint"]
    form = {
        "grant_type": "authorization_code",
        "code": "a-code-that-is-none",
        "redirect_uri": "http://localhost/",
        "client_id": settings.oidc_client_id,
        "client_secret": settings.oidc_client_secret.get_secret_value(),
    }
    try:
        answer = httpx.post(token_url, data=form, timeout=TIMEOUT_S)
        error = answer.json().get("error") if answer.content else None
    except (httpx.HTTPError, ValueError) as exc:
        raise SettingsError(
            f"{env_name('oidc_issuer')}: its token endpoint {token_url} did not answer "
            f"({type(exc).__name__})"
        ) from None
    if error == "invalid_client" or answer.status_code == 401:
        raise SettingsError(
            f"{env_name('oidc_client_secret')}: the provider at {settings.oidc_issuer} refused "
            f"client {settings.oidc_client_id!r} (invalid_client); set the client id and "
            "secret the provider has for this app"
        )


def register(settings: Settings, user_of: Callable[[str, str], cl.User]) -> None:
    """Sign-in on the provider's page, where the settings name one; ``user_of(name,
    provider)``: the app's user for a name signed in."""
    if settings.oidc_issuer is None or settings.oidc_client_secret is None:
        return
    found = _discovered(settings.oidc_issuer)
    client = (str(settings.oidc_client_id), settings.oidc_client_secret.get_secret_value())
    urls = (found["authorization_endpoint"], found["token_endpoint"], found["userinfo_endpoint"])
    use_oauth_provider(
        PROVIDER, client, urls, scopes=settings.oidc_scopes, user_claim=settings.oidc_user_claim
    )

    @cl.oauth_callback
    async def signed_in(
        provider_id: str, token: str, raw: dict[str, Any], default_user: cl.User, *_: Any
    ) -> cl.User | None:
        """The provider named a user: this app's user of that name (none without one)."""
        name = default_user.identifier
        return user_of(name, PROVIDER) if provider_id == PROVIDER and name else None
