#!/usr/bin/env bash
# The H200 run issue #42 owes, one bench invocation a device call (each well inside 10 minutes).
# Staged as ../shared/gpu/README.md says (.gpu/p0..p6 copied, then `source .gpu/install.sh` once);
# the HAProxy bundle (.gpu/hap, .gpu/bin) for the group paths; today's sizing is the parent
# commit's code in .base (git archive b7c0149 | tar -x -C .base; ignored, carried).
#   bash scripts/h200_capacity.sh A1    # engine (the new sizing) and engine@256 (the old cap)
#   bash scripts/h200_capacity.sh A2    # vllm (vllm serve with its defaults) and http
#   bash scripts/h200_capacity.sh B     # engines (the default start) and engines@base (today's)
#   bash scripts/h200_capacity.sh C     # the default start at one rate under py-spy
#   bash scripts/h200_capacity.sh L     # #44's line: the default start beside it at a cap of
#                                       # 256 (ERNIE_MAX_REPLIES), at the cap's rate and twice it
#   bash scripts/h200_capacity.sh L2    # ... and at a cap of 128 with a long line: 70/s is
#                                       # about twice what 128 replies at once serve
# Each writes NAME.json, NAME.png and NAME-logs.tgz into $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1
export PATH="$PWD/.gpu/bin:/tmp/site/bin:$PATH" VLLM_LOGGING_LEVEL=WARNING
export ERNIE_MODEL=/tmp/ernie-arch ERNIE_LOAD_FORMAT=dummy  # the real architecture, dummy weights
[ -f /tmp/ernie-arch/config.json ] || python3 -c "import sys; sys.path.insert(0, 'scripts'); \
from pathlib import Path; from measure_profiles import write_model; write_model(Path('/tmp/ernie-arch'))"
loop=(--reply-tokens 256 --rate 60 120 180 240 --duration-s 6 --warm-up-s 2 --turns 2 --think-s 1)
run() {  # NAME ARGS...: one invocation into /tmp/NAME, its report and logs into $OUT
  local name=$1; shift
  mkdir -p "/tmp/$name"
  python3 -m bench "$@" --out "/tmp/$name" > "/tmp/$name/console.txt" 2>&1; local rc=$?
  cp "/tmp/$name/bench.json" "$OUT/$name.json"; cp "/tmp/$name/bench.png" "$OUT/$name.png"
  tar czf "$OUT/$name-logs.tgz" -C "/tmp/$name" .
  tail -c 6000 "/tmp/$name/console.txt"
  return $rc
}
case "${1:-}" in
  A1) run A1 --paths engine engine@256 --concurrency 256 "${loop[@]}" ;;
  A2) run A2 --paths vllm http --concurrency 256 "${loop[@]}" ;;
  B) run B --paths engines --baseline .base --concurrency 256 "${loop[@]}" ;;
  C) run C --paths engines --reply-tokens 256 --rate 180 --duration-s 6 --warm-up-s 2 \
       --turns 2 --think-s 1 --profile ;;
  L) run L --paths engines --caps 256 --rate 35 70 --duration-s 6 --warm-up-s 2 --turns 2 \
       --think-s 1 ;;
  L2) export ERNIE_MAX_WAITING=1024
      run L2 --paths engines --caps 128 --rate 70 --duration-s 6 --warm-up-s 2 --turns 2 \
        --think-s 1 ;;
  *) echo "usage: bash scripts/h200_capacity.sh A1|A2|B|C|L|L2" >&2; exit 2 ;;
esac
