#!/usr/bin/env bash
# Issue 38 item 2: the auditor's sweep on a TPU in shards, within one call of the device tool (10 min).
#   OUT=$OUT bash scripts/tpu_sweep.sh 2 3 4        shards 2, 3, 4 of 32, as many as the budget allows
# Each shard runs `jaxdev coverage --shard K/N --jobs 1 --max-samples 2 --resume` (one process holds the
# chip) into $TPU_SWEEP_STATE/K (kept while the machine stays warm: the same command again resumes a
# cut shard) and its matrix is copied FLAT to $OUT/tpu-shard-K-of-N.yaml, every shard's log into one
# $OUT/tpu-sweep.log: the device tool brings back no file nested deeper than that, and at most 8 files
# (a call's ninth and later files are left behind: 2026-12-06 lost shard 4's matrix so). Here, afterwards:
#   .venv/bin/jaxdev coverage --merge /work/.device/N/tpu-shard-*.yaml --out coverage   # -> coverage/tpu/
# Knobs: TPU_SWEEP_SHARDS (N, 32), TPU_SWEEP_BUDGET (seconds for the call, counted from
# $TPU_TESTS_STARTED when set, else from now: 540), TPU_SWEEP_STATE (/tmp/jaxdev-tpu-sweep).
set -uo pipefail
cd "$(dirname "$0")/.."
export TPU_TESTS_STARTED=${TPU_TESTS_STARTED:-$(date +%s)}
source scripts/tpu_env.sh
N=${TPU_SWEEP_SHARDS:-32} BUDGET=${TPU_SWEEP_BUDGET:-540} STATE=${TPU_SWEEP_STATE:-/tmp/jaxdev-tpu-sweep}
OUT=${OUT:?set OUT to the folder that comes back}
JAXDEV=(jaxdev)
[ -x .venv/bin/jaxdev ] && JAXDEV=(.venv/bin/jaxdev)
mkdir -p "$OUT" "$STATE"
for k in "$@"; do
    left=$((BUDGET - ($(date +%s) - TPU_TESTS_STARTED)))
    if [ "$left" -lt 60 ]; then
        echo "tpu_sweep: shard $k/$N not started, ${left} s left (the same command again resumes)"
        continue
    fi
    echo "tpu_sweep: shard $k/$N, up to ${left} s"
    echo "=== shard $k/$N ===" >>"$OUT/tpu-sweep.log"
    timeout -s TERM -k 10 "$left" "${JAXDEV[@]}" coverage --shard "$k/$N" --jobs 1 --max-samples 2 --resume \
        --out "$STATE/$k" >"$STATE/$k.log" 2>&1
    code=$?
    cat "$STATE/$k.log" >>"$OUT/tpu-sweep.log"
    echo "tpu_sweep: shard $k/$N exit $code: $(grep -E 'units, .* samples in|ETA' "$STATE/$k.log" | tail -1)"
    found=$(find "$STATE/$k" -name matrix.yaml | head -1)
    [ -n "$found" ] && cp "$found" "$OUT/tpu-shard-$k-of-$N.yaml"
done
ls -la "$OUT"
