#!/usr/bin/env bash
# What one lent GPU session runs, in one call (issue 25 item 6, issue 8): every benchmark that has
# accelerator rows, each under its own time limit so a slow one cannot starve the rest, output kept
# under $OUT. Run from the repository root with the checkout on PYTHONPATH (the device machine has its
# own torch and jax; nothing is installed there):
#     OUT=/tmp/out bash benchmarks/device_session.sh [quick]
set -u
export PYTHONPATH="$PWD:$PWD/benchmarks${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/jaxdev-device}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
if [ "${1:-}" = quick ]; then  # a CPU rehearsal: the same script, small sizes
    ACC="--size 256 --repeat 3 --steps 2"; FUSED="--rounds 1 --steps 2 --only mlp"; DEC="--tokens 4 --rounds 1 --layers 1"
else
    ACC="--repeat 10 --steps 8"; FUSED="--rounds 3 --steps 5 --only mlp"; DEC="--tokens 32 --rounds 3"
fi
run() {  # run NAME SECONDS COMMAND...: one section, its output to the screen and $OUT/NAME.log
    local name=$1 limit=$2; shift 2
    echo "=== $name (limit ${limit}s) ==="
    local t0=$SECONDS
    timeout -k 5 "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
    echo "=== $name: exit ${PIPESTATUS[0]} after $((SECONDS - t0)) s ==="
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
# Stop at once when jaxdev does not import under this machine's torch and jax: every section needs it.
$PY -c "import jaxdev, torch, jax; print('jaxdev', jaxdev.__file__, 'torch', torch.__version__, 'jax', jax.__version__, jax.devices())" 2>&1 | tail -4
[ "${PIPESTATUS[0]}" = 0 ] || { echo "jaxdev does not import here"; exit 1; }
run accelerator_check 280 $PY benchmarks/accelerator_check.py $ACC
run fused_step 120 $PY benchmarks/fused_step.py $FUSED
run decode_loop 90 $PY benchmarks/decode_loop.py $DEC
# (the LM's fused, compiled+fused, compiled and per-op rows are accelerator_check's; its torch CUDA rows
# come from cuda_reference.py in a process without jaxdev)
