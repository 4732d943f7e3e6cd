"""Container images built and run without a Docker engine: buildah with chroot isolation.

No registry serves base images on the test machines, and podman cannot set rlimits in
their sandbox, so: a Debian base bootstrapped from Debian's packages (``mmdebstrap``, whose
Python 3.11 is the image's), ``buildah build --isolation chroot`` from the repository's
own Dockerfile, and ``buildah run --isolation chroot`` with the image's own user and
command. A container shares the host's network: its port answers on 127.0.0.1.

Usage::

    image = build_image("localhost/ernie-chat:test", folder, TARGET="cpu")
    with Container.run(image, {"/data": data}, env, log) as box:
        box.process                      # the ``buildah run`` process; the app below it
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from .background import environ, lowest_priority
from .servers import ROOT

__all__ = [
    "BASE",
    "TEST_IMAGE",
    "Container",
    "bootstrap_base",
    "build_image",
    "build_test_image",
    "image_config",
    "pip_settings",
]

BASE_PACKAGES = ("python3", "python3-venv", "python3-dev")
# The base is kept between runs on a machine, keyed by what it holds: another package list
# is another base.
BASE = (
    "localhost/ernie-base:bookworm-"
    + hashlib.sha256(" ".join(BASE_PACKAGES).encode()).hexdigest()[:12]
)
RUN = ["buildah", "run", "--isolation", "chroot"]
TEST_IMAGE = "localhost/ernie-chat:cpu-test"


def _run(*args: str, timeout_s: float = 900) -> str:
    done = subprocess.run(
        args, capture_output=True, text=True, timeout=timeout_s, check=False, env=environ()
    )
    if done.returncode:
        raise RuntimeError(f"{' '.join(args[:3])} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def bootstrap_base(folder: Path) -> str:
    """A minimal Debian 12 with Python 3.11, venv and its headers (torch's Inductor compiles
    C++ against Python.h on the CPU too), imported as ``BASE`` (~1 min)."""
    exists = subprocess.run(["podman", "image", "exists", BASE], check=False, env=environ())
    if exists.returncode == 0:
        return BASE
    tar = folder / "base.tar"
    _run(*lowest_priority(), "mmdebstrap", "--quiet", "--variant=minbase",
         f"--include={','.join(BASE_PACKAGES)}", "bookworm", str(tar))  # fmt: skip
    _run("podman", "import", "--quiet", str(tar), BASE)
    tar.unlink()
    return BASE


def pip_settings(folder: Path) -> tuple[list[str], dict[str, str]]:
    """This machine's pip settings for a build (``--volume`` arguments, build arguments):
    its CA bundle, local wheels and extra indexes, as a build behind a company proxy needs."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=True,
        env=environ(),
    ).stdout
    values = dict(
        (key.split(".", 1)[1], value.strip("'"))
        for key, _, value in (line.partition("=") for line in listed.splitlines())
        if key.startswith("global.")
    )
    conf = folder / "pip.conf"
    kept = {k: v for k, v in values.items() if k in ("cert", "find-links")}
    conf.write_text("[global]\n" + "".join(f"{k} = {v}\n" for k, v in kept.items()))
    paths = {Path(v) for k, v in kept.items()} | {
        Path(url.removeprefix("file://")).parent
        for url in values.get("extra-index-url", "").split()
        if url.startswith("file://")
    }
    volumes = [f"--volume={conf}:/etc/pip.conf:ro"]
    volumes += [f"--volume={p}:{p}:ro" for p in sorted(paths) if p.exists()]
    names = {  # as variables too: uv (scripts/setup.sh) reads no pip.conf
        "extra-index-url": "PIP_EXTRA_INDEX_URL",
        "find-links": "PIP_FIND_LINKS",
        "cert": "PIP_CERT",
    }
    args = {arg: values[key] for key, arg in names.items() if key in values}
    return volumes, args


def uv_cache() -> tuple[list[str], dict[str, str]]:
    """This machine's uv cache lent to a build (``--volume``, build arguments), when there
    is one: ``scripts/setup.sh test`` filled it with the same wheels the CPU lock takes."""
    uv = Path(sys.executable).with_name("uv")
    if not uv.exists():
        return [], {}
    found = subprocess.run(
        [uv, "cache", "dir"], capture_output=True, text=True, check=False, env=environ()
    )
    cache = found.stdout.strip()
    if not cache or not Path(cache).is_dir():
        return [], {}
    return [f"--volume={cache}:/root/.cache/uv"], {"UV_NO_CACHE": "0"}


def build_image(tag: str, folder: Path, **build_args: str) -> str:
    """``tag`` built from the repository's Dockerfile on the bootstrapped base, at the
    lowest priority, with buildah's layer cache (a step whose inputs did not change since
    the last build on this machine, the lock's install most of all, is not run again)."""
    volumes, pip_args = pip_settings(folder)
    cache, cache_args = uv_cache()
    volumes += cache
    args = {"BASE": bootstrap_base(folder), **pip_args, **cache_args, **build_args}
    flags = [f"--build-arg={k}={v}" for k, v in args.items()]
    _run(*lowest_priority(), "buildah", "build", "--isolation", "chroot", "--format", "docker",
         "--layers", *volumes, *flags, "-t", tag, str(ROOT), timeout_s=1800)  # fmt: skip
    return tag


def build_test_image() -> str:
    """The CPU image the tests run (``TEST_IMAGE``), built in a folder of its own."""
    return build_image(TEST_IMAGE, Path(tempfile.mkdtemp(prefix="ernie-image-")), TARGET="cpu")


def image_config(image: str) -> dict[str, Any]:
    """The image's Docker configuration: User, Cmd, Env, Healthcheck, ..."""
    inspected = json.loads(_run("buildah", "inspect", "--type", "image", image))
    return dict(inspected["Docker"]["config"])


@dataclass
class Container:
    """A working container of an image, and the process running its command."""

    name: str
    process: subprocess.Popen[bytes]

    @classmethod
    @contextlib.contextmanager
    def run(
        cls,
        image: str,
        mounts: Mapping[str, Path],
        env: Mapping[str, str],
        log: Path,
        command: Sequence[str] | None = None,
        prefix: Sequence[str] = (),
    ) -> Iterator[Container]:
        """Start ``command`` (default: the image's own) as the image's user, under
        ``prefix`` (``lowest_priority()``, say); removed after."""
        config = image_config(image)
        name = f"ernie-test-{uuid.uuid4().hex[:8]}"
        _run("buildah", "from", "--name", name, image)
        flags = [f"--volume={host}:{inside}" for inside, host in mounts.items()]
        flags += [f"--env={k}={v}" for k, v in env.items()]
        argv = [*prefix, *RUN, "--user", config["User"], *flags, name, "--"]
        argv += command or config["Cmd"]
        with log.open("ab") as out:
            process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=environ()
            )
        box = cls(name, process)
        try:
            yield box
        finally:
            box.stop(grace_s=10)
            _run("buildah", "rm", name)

    def exec(self, *command: str, user: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``command`` in the container beside its process (as ``docker exec``)."""
        user_flag = ["--user", user or image_user(self.name)]
        return subprocess.run(
            [*RUN, *user_flag, self.name, "--", *command],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=environ(),
        )

    def stop(self, grace_s: float) -> int | None:
        """What ``docker stop`` does: SIGTERM to the container's command (``buildah run``
        would SIGKILL it), then its exit code within ``grace_s``, else None (killed)."""
        if self.process.poll() is not None:
            return self.process.returncode
        command = self.command_process()
        if command is not None:
            command.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            return None

    def process_tree(self) -> list[psutil.Process]:
        """Every process of the container now (the app, vLLM's engine core, ...)."""
        return psutil.Process(self.process.pid).children(recursive=True)

    def command_process(self) -> psutil.Process | None:
        """The container's first process (its PID 1 under Docker): the first one below
        ``buildah run`` that is not buildah's own helper."""
        for child in psutil.Process(self.process.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if not child.name().startswith(("memfd:buildah", "buildah")):
                    return child
        return None


def image_user(container: str) -> str:
    inspected = json.loads(_run("buildah", "inspect", "--type", "container", container))
    return str(inspected["Docker"]["config"]["User"])
