#!/usr/bin/env bash
# All of tests/ on a TPU in chunks of under 10 minutes, one pytest process each, merged into $OUT
# (tpu-tests-summary.txt, tpu-tests-failures.txt, tpu-tests.json). scripts/tpu_tests.py says how.
#   scripts/tpu_tests.sh 3/12          chunk 3 of 12 (several may be named: 3/12 4/12)
#   scripts/tpu_tests.sh --resume 3/12 only what chunk 3 has not finished (the tests past a crash)
#   scripts/tpu_tests.sh --marker tpu_fact --chunks 2   the TPU facts alone, in 2 chunks (a state of their own)
#   scripts/tpu_tests.sh               every chunk of 40 (many calls' worth on a TPU)
# Rehearsal here: OUT=/tmp/tt bash scripts/tpu_tests.sh 1/40
set -euo pipefail
cd "$(dirname "$0")/.."
export TPU_TESTS_STARTED=${TPU_TESTS_STARTED:-$(date +%s)}  # the budget counts the setup too
source scripts/tpu_env.sh
export JAXDEV_EAGER=${JAXDEV_EAGER:-op}  # the suite is per-op's (a TPU's default is fused; CI runs a fused subset)
# the suite holds kernels to CPU's bits, which JAXDEV_MATH=auto gives a TPU (its default, near, is a few ulps
# from them: the auditor's TPU sweep measures near against the OpInfo tolerances)
export JAXDEV_MATH=${JAXDEV_MATH:-auto}
exec "$PY" scripts/tpu_tests.py "$@"
