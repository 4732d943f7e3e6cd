"""The Docker files: hadolint passes, and the image is the README's set-up and start.

No Docker engine runs here, so the image is held to the README by reading the files:
it installs a lock through ``scripts/setup.sh`` (the README's set-up) for each build
target, copies in what the app needs and no secrets, and starts with the README's start
command; the compose file reserves a GPU for the GPU image.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from settings.settings import Settings
from testing.servers import ROOT

DOCKERFILES = sorted(ROOT.glob("Dockerfile*"))
HADOLINT = Path(sys.executable).parent / "hadolint"


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            pairs.append((word.upper(), rest.strip()))
    return pairs


def setup_locks() -> dict[str, str]:
    """scripts/setup.sh's kinds and the lock each installs."""
    text = (ROOT / "scripts" / "setup.sh").read_text()
    return dict(re.findall(r"^\s*(\w+)\) lock=(\S+) ;;", text, re.MULTILINE))


def dockerignore_excludes(path: str) -> bool:
    """Docker's rule: the last pattern matching the path or a folder above it decides."""
    excluded = False
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        raw = raw.strip()
        if not raw or raw.startswith("#"):
            continue
        negate, pattern = raw.startswith("!"), raw.lstrip("!").rstrip("/")
        regex = re.escape(pattern).replace(r"\*\*", ".*").replace(r"\*", "[^/]*")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(re.fullmatch(regex, prefix) for prefix in prefixes):
            excluded = not negate
    return excluded


def test_hadolint_passes_on_every_dockerfile() -> None:
    assert DOCKERFILES, "no Dockerfile"
    for dockerfile in DOCKERFILES:
        result = subprocess.run(
            [str(HADOLINT), "--no-color", str(dockerfile)], capture_output=True, text=True
        )
        assert result.returncode == 0, f"{dockerfile.name}:\n{result.stdout}{result.stderr}"


def test_the_image_installs_the_readme_locks_and_starts_the_readme_command() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "bash scripts/start.sh" in readme and "bash scripts/setup.sh" in readme
    locks = setup_locks()
    assert locks["gpu"] == "requirements.txt" and locks["cpu"] == "requirements/cpu.txt"
    for dockerfile in DOCKERFILES:
        steps = instructions(dockerfile)
        args = dict(a.split("=", 1) for k, a in steps if k == "ARG" and "=" in a)
        runs = [a for k, a in steps if k == "RUN"]
        assert 'bash scripts/setup.sh "${TARGET}"' in runs, runs
        assert args["TARGET"] in locks  # the default target is one setup.sh knows
        copied = " ".join(a for k, a in steps if k == "COPY")
        for lock in ("scripts/setup.sh", "requirements.txt", "requirements/"):
            assert lock in copied  # every lock a target can name is in the image
        command = json.loads(next(a for k, a in steps if k == "CMD"))
        assert command[:2] == ["bash", "scripts/start.sh"]
        options = " ".join(command[2:])
        assert options == "--host 0.0.0.0 --port 8000 --headless"
        assert f"bash scripts/start.sh {options}" in readme  # the README says so
        health = next(a for k, a in steps if k == "HEALTHCHECK")
        assert "/readyz" in health and "EXPOSE" in dict(steps) and dict(steps)["EXPOSE"] == "8000"
        assert dict(steps)["USER"] != "root" and not dict(steps)["USER"].startswith("0")
        assert "/data" in dict(steps)["VOLUME"]
        env = " ".join(a for k, a in steps if k == "ENV")
        assert "HF_HOME=/data/" in env and "SETUP_KIND=${TARGET}" in env


def test_start_uses_the_image_lock_not_a_guess() -> None:
    """In the image, start.sh's set-up must find the lock the image was built with
    (SETUP_KIND), not guess from nvidia-smi and try to install another."""
    start = (ROOT / "scripts" / "start.sh").read_text()
    assert "bash scripts/setup.sh\n" in start  # no kind: SETUP_KIND or the guess
    assert 'kind="${1:-${SETUP_KIND:-}}"' in (ROOT / "scripts" / "setup.sh").read_text()


def test_the_image_gets_the_app_and_no_local_state_or_secrets() -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    needed = [
        p
        for p in tracked
        if p.startswith(("chat/", "deploy/", "engine/", "serve/", "prompts/", "requirements/"))
        or p in ("app.py", "chainlit.md", "chainlit_zh-CN.md", "requirements.txt")
        or p in ("scripts/setup.sh", "scripts/start.sh", ".chainlit/config.toml")
        or p.startswith(".chainlit/translations/")
    ]
    assert len(needed) > 20
    assert [p for p in needed if dockerignore_excludes(p)] == []
    for local in (".env", ".venv/bin/python", "demo-model/config.json", "history.db", ".git/HEAD"):
        assert dockerignore_excludes(local), local
    assert dockerignore_excludes("engine/__pycache__/replies.cpython-311.pyc")


def test_compose_runs_both_targets_and_reserves_a_gpu() -> None:
    compose: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    gpu, cpu = compose["services"]["chat"], compose["services"]["chat-cpu"]
    assert gpu["build"]["args"]["TARGET"] == "gpu" and cpu["build"]["args"]["TARGET"] == "cpu"
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and devices[0]["capabilities"] == ["gpu"]
    assert "deploy" not in cpu and cpu["profiles"] == ["cpu"]
    for service in (gpu, cpu):
        assert service["volumes"] == ["hub-cache:/data"]
        # This host only, unless the operator publishes it (CHAT_BIND).
        assert service["ports"] == ["${CHAT_BIND:-127.0.0.1}:${CHAT_PORT:-8000}:8000"]
        assert service["init"] is True
        # Listening on every address in the container, it answers localhost only (DNS
        # rebinding) until the operator lists the names it is reached by.
        assert service["environment"]["ERNIE_ALLOWED_HOSTS"] == "${ERNIE_ALLOWED_HOSTS:-localhost}"
        # Every ERNIE_* name it passes is a setting (a misspelled one stops the app).
        for name in service["environment"]:
            if name.startswith("ERNIE_"):
                assert name.removeprefix("ERNIE_").lower() in Settings.model_fields, name
