"""A real OpenID Connect provider for the sign-in tests: panva's node-oidc-provider (OpenID
Certified), started from ``testing/oidc/`` (``npm ci`` there: ``scripts/test.sh``), with
its own login and consent pages; any login name signs in as ``NAME@example.com``.

Usage::

    with oidc_provider("chat-app", secret, f"{app_url}/auth/oauth/oidc/callback") as issuer:
        ...   # ERNIE_OIDC_ISSUER=issuer
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx

from .polling import until_sync
from .servers import ROOT, free_port

__all__ = ["PROVIDER_DIR", "oidc_provider"]

PROVIDER_DIR = ROOT / "testing" / "oidc"


@contextlib.contextmanager
def oidc_provider(client_id: str, secret: str, redirect_uri: str, log: Path) -> Iterator[str]:
    """The provider until the block ends, knowing one client; its issuer URL."""
    assert (PROVIDER_DIR / "node_modules").is_dir(), "npm ci --prefix testing/oidc (test.sh)"
    port = free_port()
    command = ["node", "provider.js", str(port), client_id, secret, redirect_uri]
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=PROVIDER_DIR, stdout=out, stderr=subprocess.STDOUT)
    issuer = f"http://127.0.0.1:{port}"
    try:

        def answers() -> bool:
            assert process.poll() is None, log.read_text()
            try:
                return httpx.get(f"{issuer}/.well-known/openid-configuration").is_success
            except httpx.HTTPError:
                return False

        until_sync(answers, 30, "the OpenID Connect provider", interval_s=0.2)
        yield issuer
    finally:
        process.terminate()
        process.wait(timeout=10)
