#!/usr/bin/env bash
# Set up and start the app: `bash scripts/start.sh [--demo] [chainlit run options]`.
#   --demo   build the offline demo model (random weights) into ./demo-model and use it
# Other options go to `chainlit run`, e.g. `--host 0.0.0.0 --port 8000 --headless`.
set -euo pipefail
cd "$(dirname "$0")/.."  # Chainlit reads .chainlit/ and chainlit.md from here

bash scripts/setup.sh
if [[ "${1:-}" == "--demo" ]]; then
  shift
  [[ -f demo-model/config.json ]] || .venv/bin/python -m engine demo-model demo-model >/dev/null
  export ERNIE_MODEL="$PWD/demo-model"
fi
.venv/bin/python -m engine check >/dev/null  # a bad setting stops here, in one line
exec .venv/bin/python -m chainlit run app.py "$@"
