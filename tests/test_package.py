"""The package surface and the layering rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import engine

ENGINE_DIR = Path(engine.__file__).parent


def test_every_exported_name_resolves() -> None:
    for name in engine.__all__:
        assert getattr(engine, name) is not None


def test_unknown_names_raise_attribute_error() -> None:
    assert not hasattr(engine, "no_such_name")
    with pytest.raises(AttributeError):
        _ = engine.no_such_name  # type: ignore[attr-defined]


def test_engine_never_imports_chainlit() -> None:
    for source in ENGINE_DIR.glob("*.py"):
        text = source.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(import|from)\s+chainlit", text, re.M), source.name
