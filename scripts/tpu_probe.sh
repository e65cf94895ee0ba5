#!/usr/bin/env bash
# The TPU probes of issue 38 in one call of under 9 minutes, results under $OUT:
#   numerics.txt / numerics.json   float32 transcendentals, XLA's against jaxdev's, ulps and time
#                                  (benchmarks/tpu_numerics.py), float64 facts, torch ops on the device
#   kernels.txt / kernels.json     float64 linear algebra and FFT, dtype carriers and raw programs: ok,
#                                  raises or crash, each crash in a worker of its own
#                                  (benchmarks/tpu_probe_kernels.py)
# Setup as scripts/tpu_tests.sh (carry .whl-tpu for expecttest). Budget: TPU_PROBE_SECONDS (default 500).
set -uo pipefail
cd "$(dirname "$0")/.."
began=$(date +%s)  # the setup counts: the call's limit is on the whole command
source scripts/tpu_env.sh
OUT=${OUT:-tpu-probe-out}
mkdir -p "$OUT"
budget=${TPU_PROBE_SECONDS:-500}
left() { echo $((budget - ($(date +%s) - began))); }
timeout $(($(left) / 2)) "$PY" benchmarks/tpu_numerics.py --json "$OUT/numerics.json" >"$OUT/numerics.txt" 2>&1
echo "numerics: exit $? after $(($(date +%s) - began)) s" | tee -a "$OUT/numerics.txt"
"$PY" benchmarks/tpu_probe_kernels.py --budget $(($(left) - 20)) --json "$OUT/kernels.json" >"$OUT/kernels.txt" 2>&1
echo "kernels: exit $? after $(($(date +%s) - began)) s" | tee -a "$OUT/kernels.txt"
tail -n 30 "$OUT/kernels.txt"
