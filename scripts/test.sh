#!/usr/bin/env bash
# Set up and run every check: `bash scripts/test.sh [pytest args]`.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh test
# The browser tests: Debian's Chromium (Playwright cannot download one here), with fonts
# for Chinese and emoji so screenshots show text, not boxes. The history tests: Debian's
# PostgreSQL server (the tests start their own). The workers' tests: Debian's HAProxy.
# The image test: buildah, podman and mmdebstrap (no Docker engine, no registry here).
if ! command -v chromium >/dev/null 2>&1 || ! fc-list | grep -qi "Noto Sans CJK" \
    || ! fc-list | grep -qi "Noto Color Emoji" || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
    || [[ ! -x /usr/sbin/haproxy ]] || ! command -v buildah >/dev/null 2>&1 \
    || ! command -v podman >/dev/null 2>&1 || ! command -v mmdebstrap >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk \
    fonts-noto-color-emoji postgresql haproxy buildah podman mmdebstrap >/dev/null
fi
# Company sign-in's tests: a real OpenID Connect provider (panva's node-oidc-provider,
# pinned in testing/oidc/package-lock.json) on Node.js.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
[[ -d testing/oidc/node_modules ]] || npm ci --prefix testing/oidc --no-audit --no-fund --silent
export TESTS_NEED_PROGRAMS=all  # installed above: a test that needs one fails without it
.venv/bin/ruff check settings engine chat serve testing bench tests scripts app.py
.venv/bin/ruff format --check settings engine chat serve testing bench tests scripts app.py
# mypy beside pytest, on the CPU the tests leave idle (Linux's idle class); its verdict
# counts the same, printed after pytest's. Its cache is kept between checkouts on this
# machine, as the test environment is: mypy checks each file's hash against it, so a fresh
# clone re-checks only what differs (0.7 s instead of 20 s of CPU, most of it vLLM's and
# torch's modules).
export MYPY_CACHE_DIR="${MYPY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ernie-chat/mypy}"
mypy_log="$(mktemp)"
chrt --idle 0 .venv/bin/mypy > "$mypy_log" 2>&1 &
mypy_pid=$!
trap 'kill "$mypy_pid" 2>/dev/null || true' EXIT
status=0
.venv/bin/python -m pytest "$@" || status=$?
wait "$mypy_pid" || status=1
cat "$mypy_log"
rm -f "$mypy_log"
exit "$status"
