#!/usr/bin/env bash
# Issue #52's runs on a lent GPU, one bench invocation a device call (each inside 10 minutes).
# Staged as ../shared/gpu/README.md says (.gpu/p0..p6 copied, then `source .gpu/install.sh`
# once; FlashInfer carried: its parts made without it in the skip list), the HAProxy bundle
# (.gpu/hap, .gpu/bin) carried. The app is pinned to CPUs 0-9, six client processes to 10-15.
#   bash scripts/gpu_levers.sh L    # the default start (every lever) beside today's (none:
#                                   # "before") and each lever alone on today's
#   bash scripts/gpu_levers.sh P    # the default start beside vllm serve (1 and 4 API
#                                   # servers), each path's capacity at the SLO by the sweep
#   bash scripts/gpu_levers.sh B    # the default start beside the version #52 was filed on
#                                   # (git archive 6d7ee8b | tar -x -C .base; ignored, carried)
#   bash scripts/gpu_levers.sh E    # the default start (4 engine cores on 16 CPUs) beside 2
#                                   # (results/2026-12-06-h100-levers/E ran before the default
#                                   # moved: its engines path was 2 cores, beside e4=4)
#   bash scripts/gpu_levers.sh S    # the default start at one rate under py-spy
# Each writes NAME.json, NAME.png, NAME-console.txt (as it runs) and NAME-logs.tgz into $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 VLLM_LOGGING_LEVEL=WARNING
export VLLM_USE_FLASHINFER_SAMPLER=${VLLM_USE_FLASHINFER_SAMPLER:-1}  # as vLLM 0.29 uses it
export PATH="$PWD/.gpu/bin:/tmp/site/bin:$PATH"
export ERNIE_MODEL=/tmp/ernie-arch ERNIE_LOAD_FORMAT=dummy  # the real architecture, dummy weights
[ -f /tmp/ernie-arch/config.json ] || python3 -c "import sys; sys.path.insert(0, 'scripts'); \
from pathlib import Path; from measure_profiles import write_model; write_model(Path('/tmp/ernie-arch'))"
pin=(--client-procs 6 --client-cpus 10-15 --app-cpus 0-9)
loop=(--reply-median 256 --reply-sigma 0 --turns 1 --duration-s 4 --warm-up-s 2 "${pin[@]}")
off=ERNIE_STREAM_INTERVAL=1,ERNIE_CUDA_GRAPH_MAX=512  # vLLM's own: every token, graphs to 512
levers=(before:$off,VLLM_USE_FLASHINFER_SAMPLER=0 fi:$off si4:ERNIE_CUDA_GRAPH_MAX=512,VLLM_USE_FLASHINFER_SAMPLER=0
        graphs:ERNIE_STREAM_INTERVAL=1,VLLM_USE_FLASHINFER_SAMPLER=0)
run() {  # NAME SECONDS ARGS...: one invocation into /tmp/NAME, its report and logs into $OUT
  local name=$1 limit=$2; shift 2
  mkdir -p "/tmp/$name"
  timeout "$limit" python3 -m bench "$@" --out "/tmp/$name" 2>&1 | tee "$OUT/$name-console.txt" \
    | grep -E "at [0-9.]+/s: \{|done in|capacity|Error|error" | cut -c1-400
  cp "/tmp/$name/bench.json" "$OUT/$name.json"; cp "/tmp/$name/bench.png" "$OUT/$name.png"
  tar czf "$OUT/$name-logs.tgz" -C "/tmp/$name" --exclude='*.json' --exclude='*.png' .
}
case "${1:-}" in
  L) run L 570 --paths engines --lever "${levers[@]}" --rate 150 300 "${loop[@]}" ;;
  P) run P 570 --paths engines vllm --peer-api-servers 4 --rate --first-rate 75 "${loop[@]}" ;;
  B) run B 330 --paths engines --baseline .base --rate 150 300 "${loop[@]}" ;;
  E) run E 330 --paths engines --lever e2:ERNIE_ENGINES=2 --rate 300 400 "${loop[@]}" ;;
  S) run S 240 --paths engines --rate 300 --profile engines "${loop[@]}" ;;
  *) echo "usage: bash scripts/gpu_levers.sh L|P|B|E|S" >&2; exit 2 ;;
esac
