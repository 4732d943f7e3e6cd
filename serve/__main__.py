"""``python -m serve [--host HOST] [--port PORT]``: start the chat app.

``ERNIE_WORKERS=1`` (the CPU default): the web app and its engine in this process.
More, or ``ERNIE_ENGINES`` above 1: a group of workers on engine cores behind HAProxy
(``serve.group``).
A bad setting stops here with one line naming it, as ``python -m engine check`` does.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from .console import to_log_file
from .web import configure_logging, raise_open_files

logger = logging.getLogger("serve")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m serve", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on")
    parser.add_argument(
        "--headless", action="store_true", help="accepted for chainlit run's sake (no effect)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    os.umask(0o077)  # the log, the history, the caches: this user's alone
    raise_open_files()
    from settings.loader import load_settings
    from settings.settings import SettingsError

    try:
        settings = load_settings()
        log_file = configure_logging(settings)  # before vLLM is imported
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    logger.info("starting on http://%s:%d; the full log: %s", args.host, args.port, log_file)
    from chat.access.oidc import check_oidc
    from chat.history.reach import check_history
    from engine import preflight

    try:
        check_history(settings)  # first: a second, where the engine's checks import vLLM
        check_oidc(settings)
        plan = preflight(settings)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        to_log_file(str(exc))  # the log says why the start stopped, too
        return 2
    if plan.workers == 1 and plan.engines == 1:
        from .web import serve_app

        serve_app(plan, (args.host, args.port))
        return 0
    from .group import Group

    return Group(plan, (args.host, args.port)).run()


if __name__ == "__main__":
    sys.exit(main())
