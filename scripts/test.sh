#!/usr/bin/env bash
# Set up and run every check: `bash scripts/test.sh [pytest args]`.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh test
.venv/bin/ruff check engine tests
.venv/bin/ruff format --check engine tests
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
