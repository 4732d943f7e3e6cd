"""Tests that need a program of the system (HAProxy, PostgreSQL, Chromium, buildah) say
which. Where it is missing, the fast loop skips them with the reason and the package to
install; ``scripts/test.sh`` installs every one and sets ``TESTS_NEED_PROGRAMS=all``, and
there a missing program fails the test instead: a check that CI skips is no check.

Usage::

    pytestmark = needs("haproxy")
"""

from __future__ import annotations

import os
import shutil

import pytest

__all__ = ["ALL", "needs"]

ALL = "TESTS_NEED_PROGRAMS"  # "all": every program must be there (scripts/test.sh)
PACKAGES = {"haproxy": "haproxy", "initdb": "postgresql", "chromium": "chromium"}
PACKAGES |= {"buildah": "buildah"}


def _found(program: str) -> bool:
    """On PATH, or in /usr/sbin (Debian's HAProxy) or PostgreSQL's own folder."""
    if shutil.which(program) or shutil.which(program, path="/usr/sbin"):
        return True
    return program == "initdb" and any(
        os.access(os.path.join(root, version, "bin", "initdb"), os.X_OK)
        for root in ("/usr/lib/postgresql",)
        if os.path.isdir(root)
        for version in os.listdir(root)
    )


def needs(program: str) -> pytest.MarkDecorator:
    """Skip where ``program`` is missing, unless every program is required."""
    missing = not _found(program) and os.environ.get(ALL) != "all"
    package = PACKAGES.get(program, program)
    reason = f"needs {program}: apt-get install {package} (scripts/test.sh installs it)"
    return pytest.mark.skipif(missing, reason=reason)
