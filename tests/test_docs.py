"""What the docs cite exists: every file path, ``path::name`` and dotted name of the
project's packages in backticks in the README and docs/ (the archive in results/ is kept
as written)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from testing.servers import ROOT

DOCS = sorted([ROOT / "README.md", ROOT / "README.zh-CN.md", *(ROOT / "docs").glob("*.md")])
DOCS.append(ROOT / "results" / "README.md")
PACKAGES = ("settings", "engine", "chat", "serve", "testing", "bench", "tests", "scripts")
CODE = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"^([\w./-]+\.(?:py|sh|md|toml|json|yml|txt|cfg|jinja))(?:::([\w.]+))?")
DOTTED = re.compile(rf"^((?:{'|'.join(PACKAGES)})(?:\.\w+)+)(?:\(\))?$")
FILE_NAME = re.compile(r"\.(?:png|json|db|log|html|txt|cfg|md)$")  # ``bench.png``: a file's name


@cache
def defined(path: Path) -> set[str]:
    """The names a module defines or imports at its top, and its classes' members."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
            names |= {t.attr for t in targets if isinstance(t, ast.Attribute)}
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def module_file(parts: list[str]) -> Path | None:
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py", base / "__main__.py"):
        if candidate.is_file():
            return candidate
    return None


def missing(cited: str) -> str | None:
    """Why ``cited`` names nothing in the tree (None: it does)."""
    if match := PATH.match(cited):
        file, name = ROOT / match.group(1), match.group(2)
        if match.group(1).startswith("../"):
            return None  # beside the checkout (shared/): not the tree's to vouch for
        if "/" not in match.group(1) and not file.exists():
            return None  # a bare file name (``bench.json``) is not a path in the tree
        if not file.exists():
            return f"no file {match.group(1)}"
        if name and file.suffix == ".py" and not set(name.split(".")) <= defined(file):
            return f"{match.group(1)} defines no {name}"
        return None
    if (match := DOTTED.match(cited)) and not FILE_NAME.search(cited):
        parts = match.group(1).split(".")
        for cut in range(len(parts), 0, -1):
            if (file := module_file(parts[:cut])) is not None:
                rest = parts[cut:]
                if rest and rest[0] not in defined(file):
                    return f"{'.'.join(parts[:cut])} defines no {rest[0]}"
                return None
        return f"no module {match.group(1)}"
    return None


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_path_and_name_the_docs_cite_exists(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    wrong = {f"`{c}`: {why}" for c in CODE.findall(text) if (why := missing(c.strip()))}
    assert not wrong, f"{doc.relative_to(ROOT)} cites what is not there:\n" + "\n".join(
        sorted(wrong)
    )


def test_the_check_finds_what_is_not_there() -> None:
    assert missing("chat/handlers.py::on_message") == "chat/handlers.py defines no on_message"
    assert missing("deploy/plan.py") == "no file deploy/plan.py"
    assert missing("chat.compat.guard_module_getattr") is not None
    assert missing("chat.chainlit_door.guard_module_getattr") is None
    assert missing("tests/chat/test_chainlit_door.py::moved") is None
