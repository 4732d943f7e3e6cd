"""Tests that need a program of the system (HAProxy, PostgreSQL) say which. Where it is missing, the
fast loop skips them with the reason and the package to install; ``scripts/test.sh``
installs every one and sets ``TESTS_NEED_PROGRAMS=all``, and there a missing program fails
the test instead: a check that CI skips is no check.

Usage::

    pytestmark = needs("haproxy")
"""

from __future__ import annotations

import glob
import os
import shutil

import pytest

__all__ = ["ALL", "needs"]

ALL = "TESTS_NEED_PROGRAMS"  # "all": every program must be there (scripts/test.sh)


def needs(program: str, package: str | None = None) -> pytest.MarkDecorator:
    """Skip where ``program`` (Debian's ``package``; default: the same name) is neither on
    PATH, in /usr/sbin nor in a version's folder of /usr/lib (PostgreSQL's ``initdb``),
    unless every program is required."""
    found = shutil.which(program) or shutil.which(program, path="/usr/sbin")
    found = found or next(iter(glob.glob(f"/usr/lib/*/*/bin/{program}")), None)
    missing = found is None and os.environ.get(ALL) != "all"
    reason = f"needs {program}: apt-get install {package or program} (scripts/test.sh does)"
    return pytest.mark.skipif(missing, reason=reason)
