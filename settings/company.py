"""Company sign-in with OpenID Connect: the provider (issuer) and this app's client there.

The three go together; the provider's endpoints come from its discovery document, and its
answer to this client is checked at start (``chat.access.oidc``): a wrong secret stops the
app in one line, not at the first user's sign-in.
"""

from __future__ import annotations

from typing import Self

from pydantic import Field, SecretStr, model_validator

from settings.names import env_name
from settings.origins import RecordedSettings

__all__ = ["CompanySignInSettings"]

OIDC = ("oidc_issuer", "oidc_client_id", "oidc_client_secret")


class CompanySignInSettings(RecordedSettings):
    """OpenID Connect sign-in (part of ``settings.settings.Settings``)."""

    oidc_issuer: str | None = Field(
        None,
        description="Company sign-in with OpenID Connect: the provider's issuer URL (e.g. "
        "https://login.example.com/realms/staff); its users sign in on its own page. The "
        "redirect URI to register there: https://CHAT-HOST/auth/oauth/oidc/callback.",
    )
    oidc_client_id: str | None = Field(
        None, description="This app's client id at the OpenID Connect provider."
    )
    oidc_client_secret: SecretStr | None = Field(
        None, description="This app's client secret at the OpenID Connect provider."
    )
    oidc_scopes: str = Field(
        "openid email profile", description="The scopes asked of the OpenID Connect provider."
    )
    oidc_user_claim: str = Field(
        "email",
        description="The claim of the provider's user info that names the user here (email, "
        "preferred_username, sub).",
    )

    @model_validator(mode="after")
    def _oidc_together(self) -> Self:
        given = [name for name in OIDC if getattr(self, name)]
        if given and len(given) < len(OIDC):
            missing = ", ".join(env_name(name) for name in OIDC if name not in given)
            raise ValueError(
                f"{env_name(given[0])} turns company sign-in on, which needs {missing} too "
                "(the client registered for this app at the provider)"
            )
        return self
