#!/usr/bin/env bash
# Set up and start the app: `bash scripts/start.sh [--demo] [--host H] [--port P]`.
#   --demo   build the offline demo model (random weights) into ./demo-model and use it
# The app listens on 127.0.0.1:8000 unless --host/--port say otherwise. ERNIE_WORKERS=N
# (N > 1) puts N web workers on one engine behind HAProxy, installed here if missing.
# Developers can still run `chainlit run app.py` (one process, Chainlit's own server).
set -euo pipefail
cd "$(dirname "$0")/.."  # Chainlit reads .chainlit/ and chainlit.md from here

# The first line names the log (ERNIE_LOG_FILE, from the environment or the settings file).
log="${ERNIE_LOG_FILE:-$(sed -n 's/^ERNIE_LOG_FILE=//p' "${ERNIE_ENV_FILE:-.env}" 2>/dev/null | tail -n1 || true)}"
echo "start: set-up, then the app on its port; the full log: ${log:-logs/ernie-chat.log}"
bash scripts/setup.sh
if [[ "${1:-}" == "--demo" ]]; then
  shift
  [[ -f demo-model/config.json ]] || .venv/bin/python -m engine demo-model demo-model >/dev/null
  export ERNIE_MODEL="$PWD/demo-model"
fi
if [[ "${ERNIE_WORKERS:-1}" != 1 ]] && ! command -v haproxy >/dev/null 2>&1 \
    && [[ ! -x /usr/sbin/haproxy ]]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null
fi
# The launcher checks the settings first: a bad one stops it there, in one line (no
# separate `python -m engine check`, which cost every start a second import of vLLM).
# It runs in a process group of its own (job control), and this script hands it one
# SIGTERM for a Ctrl-C or a SIGTERM: the launcher stops the engine in order. Ctrl-C
# reached every process of the terminal's group at once before, and vLLM's engine core,
# signalled twice, ended before its model's worker let go of their shared memory (Python's
# resource tracker then printed a "leaked shared_memory" warning at every stop).
set -m  # the launcher's own process group
.venv/bin/python -m serve "$@" &
launcher=$!
set +m  # and no job notices on the console
trap 'kill -TERM "$launcher" 2>/dev/null || true' INT TERM
wait "$launcher" || true  # a trapped signal ends a wait early: wait until it has ended
while kill -0 "$launcher" 2>/dev/null; do wait "$launcher" || true; done
status=0
wait "$launcher" || status=$?
exit "$status"
