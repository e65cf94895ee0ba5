#!/usr/bin/env bash
# Issue 37 item 1: everything measured on a TPU in one command, from the repository root of a bare
# TPU v5e machine, within 9 minutes (the device call's hard limit is 10):
#     OUT=/tmp/out bash benchmarks/tpu_check.sh [quick] [fresh] [lm] [fwd] [decode] [cnn] [opt] [cold]
# jaxdev (compiled, compiled under fused eager, fused eager, per-op eager) against torchax 0.0.13's
# jitted path and hand-written `jax.jit`: the GPT LM's training step (bfloat16, float32), its batch-1
# forward and decoding loop, a ResNet-18 step, AdamW over 100 tensors and in-place writes; then first
# steps cold and warm in fresh processes. One implementation per process, one process on the chip at
# a time. Rows print as they are measured; the table, results.json and the logs land in $OUT.
#
# * Setup (each half skipped when /tmp/site holds it already): scripts/tpu_env.sh's (torch 2.13.0, click,
#   rich, pyyaml, optax, pytest from the machine's wheels into /tmp/site, expecttest from .whl-tpu/), then
#   torchax 0.0.13 from .whl-tpu/ with --no-index --no-deps; the machine's own JAX stays first on PYTHONPATH.
# * Environment knobs: TPUCHECK_LM_DTYPES ("bf16 f32"), TPUCHECK_LM_MODES (jaxdev's modes in the lm
#   section: "compiled compiled+fused model-compiled+fused fused"; model-compiled+fused compiles forward+backward
#   only, the optimizer recorded by fused eager), TPUCHECK_LM_MATHS (the
#   JAXDEV_MATH settings each lm mode runs under, a row each, "fused [auto]": "default auto fast", default
#   meaning unset: the platform's, near on a TPU; default the environment's), TPUCHECK_LM_OP (0: no per-op lm unit), TPUCHECK_COLD (the impl:mode pairs of the cold
#   section), TPUCHECK_COLD_DTYPES (bf16), TPUCHECK_TOTAL (530 s), TPUCHECK_STATE; JAXDEV_* pass through.
# * Units run in priority order, each under `timeout` (what is left of the 9 minutes, at most its own
#   limit); a unit cut short keeps the rows it finished, and the row it was in says "> N s (cut)".
# * Calls add up: compile caches (per implementation) and rows live in $TPUCHECK_STATE (default
#   /tmp/tpu_check) while the machine stays up, so a second call of the same command skips the units
#   already done, runs the rest on warm caches, and prints the whole table. `fresh` starts over.
#   Naming sections runs those units whatever was done before.
# * quick: the CPU rehearsal (tiny sizes, no setup, always fresh):
#       JAX_PLATFORMS=cpu OUT=/tmp/tpucheck bash benchmarks/tpu_check.sh quick
#   with torchax and optax importable from $TPUCHECK_TORCHAX_PATH (a throwaway --target folder).
set -u
cd "$(dirname "$0")/.."
START=$SECONDS
QUICK=0 FRESH=0 NAMED=()
for a in "$@"; do
    case $a in
        quick) QUICK=1 ;;
        fresh) FRESH=1 ;;
        lm | fwd | decode | cnn | opt | cold) NAMED+=("$a") ;;
        *) echo "unknown argument: $a (quick, fresh, lm, fwd, decode, cnn, opt, cold)"; exit 2 ;;
    esac
done
SECTIONS=" ${NAMED[*]:-lm fwd decode cnn opt cold} "
OUT=${OUT:-/tmp/tpu_check_out}
PY=${PYTHON:-python3}
if [ $QUICK = 1 ]; then
    export TPUCHECK_SIZE=quick
    STATE=${TPUCHECK_STATE:-/tmp/tpu_check_quick} FRESH=1 TOTAL=${TPUCHECK_TOTAL:-1800} SCALE=4
else
    export TPUCHECK_SIZE=full
    STATE=${TPUCHECK_STATE:-/tmp/tpu_check} TOTAL=${TPUCHECK_TOTAL:-530} SCALE=1
fi
[ $FRESH = 1 ] && rm -rf "$STATE"
mkdir -p "$OUT" "$STATE/cache"
export TPUCHECK_RUN TPUCHECK_ROWS=$STATE/rows.jsonl PYTHONUNBUFFERED=1
TPUCHECK_RUN=$(date -u +%Y%m%dT%H%M%S)
LOG=$OUT/tpu_check.log ERR=$OUT/errors.log
exec > >(tee -a "$LOG") 2>&1
echo "tpu_check $TPUCHECK_RUN: size $TPUCHECK_SIZE, sections:$SECTIONS state $STATE, $TOTAL s in all"
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo '(no git here)'); $(nproc) cores; $(uname -n)"

setup() {  # ../shared/DESIGN.md's recipe; each half skipped when /tmp/site already holds it
    if [ $QUICK = 1 ] || [ "${TPUCHECK_SETUP:-}" = skip ]; then
        echo "setup: skipped (the current interpreter's packages)"
    else
        local t0=$SECONDS
        # torch, the tools, expecttest and jaxdev's entry points into /tmp/site, once per machine: the
        # same set-up as scripts/tpu_tests.sh and tpu_sweep.sh, so a later call of those skips it
        source scripts/tpu_env.sh
        if [ -d /tmp/site/torchax ]; then
            echo "setup: torchax in /tmp/site already"
        elif ls .whl-tpu/torchax-*.whl >/dev/null 2>&1; then
            PIP_CONFIG_FILE=/dev/null $PY -m pip install --isolated -q --no-index --no-deps --target /tmp/site \
                .whl-tpu/torchax-*.whl 2>&1 | tail -5
        else
            echo "setup: .whl-tpu/ is missing (pass carry [\".whl-tpu\"]): no torchax rows"
        fi
        echo "setup: $((SECONDS - t0)) s"
    fi
    # tpu_env.sh put /tmp/site and the checkout after the machine's JAX on PYTHONPATH
    # jaxdev's native fast paths build here (once, ~10 s), off the chip: JAX on CPU for this check
    JAX_PLATFORMS=cpu $PY -c "import jaxdev, torch, jax; print('jaxdev', jaxdev.__file__, 'torch', torch.__version__, 'jax', jax.__version__, 'native', jaxdev.native.module is not None)" 2>>"$ERR" | tail -2
    [ "${PIPESTATUS[0]}" = 0 ] || { echo "jaxdev does not import here (see $ERR)"; exit 1; }
}

note() {  # note EVENT UNIT IMPL [LIMIT]: a line of the rows file from the shell
    printf '{"run": "%s", "t": %s, "event": "%s", "unit": "%s", "impl": "%s", "limit": %s}\n' \
        "$TPUCHECK_RUN" "$(date +%s.%N)" "$1" "$2" "$3" "${4:-0}" >>"$TPUCHECK_ROWS"
}

done_before() { grep -qx "$1" "$STATE/done" 2>/dev/null; }

left() { echo $((TOTAL - (SECONDS - START) - 22)); }  # a kill's 10 s grace and the report's 12

unit() {  # unit NAME LIMIT IMPL CACHE COMMAND...: one process under its limit
    local name=$1 limit=$(($2 * SCALE)) impl=$3 cache=$4
    shift 4
    if [ ${#NAMED[@]} = 0 ] && done_before "$name"; then
        echo "=== $name: done by an earlier call (fresh redoes it)"
        return 0
    fi
    local rest
    rest=$(left)
    if [ "$rest" -lt 30 ]; then
        echo "=== $name: not started, ${rest} s left"
        note skipped "$name" "$impl"
        PENDING+=("$name")
        return 3
    fi
    [ "$limit" -gt "$rest" ] && limit=$rest
    mkdir -p "$cache"
    local state=empty
    [ -n "$(ls -A "$cache" 2>/dev/null)" ] && state=reused
    echo "=== $name (limit ${limit} s, compile cache $state) ==="
    note unit-start "$name" "$impl" "$limit"
    local t0=$SECONDS
    TPUCHECK_CACHE_STATE=$state JAXDEV_CACHE_DIR=$cache TPUCHECK_JAX_CACHE=$cache \
        TORCHINDUCTOR_CACHE_DIR=$cache/inductor timeout -k 10 "$limit" "$@" --budget $((limit * 4 / 5)) 2>>"$ERR"
    local rc=$?
    echo "=== $name: exit $rc after $((SECONDS - t0)) s ==="
    if [ $rc = 124 ] || [ $rc = 137 ]; then
        note killed "$name" "$impl" "$limit"
        PENDING+=("$name")
    elif [ $rc = 0 ]; then
        echo "$name" >>"$STATE/done"
    fi
    return $rc
}

TORCHAX_ENV=(env TORCH_DEVICE_BACKEND_AUTOLOAD=0)
[ -n "${TPUCHECK_TORCHAX_PATH:-}" ] && TORCHAX_ENV+=(PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$TPUCHECK_TORCHAX_PATH")
JAXDEV=($PY benchmarks/tpu_jaxdev.py)
TORCHAX=("${TORCHAX_ENV[@]}" $PY benchmarks/tpu_torchax.py)
JAXJIT=(env TORCH_DEVICE_BACKEND_AUTOLOAD=0 $PY benchmarks/tpu_jaxjit.py)
C=$STATE/cache
PENDING=()
has() { [[ $SECTIONS == *" $1 "* ]]; }
joined() { local IFS=,; echo "$*"; }

setup
if has lm; then  # the headline rows first: the training step in every mode and on every side, bf16 first
    for dt in ${TPUCHECK_LM_DTYPES:-bf16 f32}; do
        # a mode a process: the protocol builds every mode before timing any, so one first step that
        # overran the limit (fused, > 77 s on a TPU) lost the other modes' timings too
        for m in ${TPUCHECK_LM_MODES:-compiled compiled+fused model-compiled+fused fused}; do
            # a compiled mode's first step took 127-139 s on the chip (2026-12-07: its program 117 s in
            # XLA's compiler), fused eager's 62 s
            limit=110
            [[ $m == *compiled* ]] && limit=180
            # each its own row, "fused [auto]"; "default": JAXDEV_MATH unset (the platform's, near on a TPU)
            for math in ${TPUCHECK_LM_MATHS:-${JAXDEV_MATH:-default}}; do
                suffix= setting=(env -u JAXDEV_MATH)
                [ "$math" != default ] && suffix="-$math" setting=(env JAXDEV_MATH="$math")
                unit "lm-$dt-jaxdev-$m$suffix" $limit jaxdev "$C/jaxdev" "${setting[@]}" \
                    "${JAXDEV[@]}" --sections lm --dtypes "$dt" --modes "$m"
            done
        done
        unit "lm-$dt-torchax" 90 torchax "$C/torchax" "${TORCHAX[@]}" --sections lm --dtypes "$dt"
        unit "lm-$dt-jax" 70 jax.jit "$C/jax" "${JAXJIT[@]}" --sections lm --dtypes "$dt"
    done
    # per-op: a first step compiles one program per op signature (125-200+ s cold on the TPU)
    [ "${TPUCHECK_LM_OP:-1}" = 1 ] && unit lm-op 240 jaxdev "$C/jaxdev" "${JAXDEV[@]}" --sections lm --dtypes "$(joined ${TPUCHECK_LM_DTYPES:-bf16 f32})" --modes op
fi
# the rest, one process a side, sections in priority order inside it (the ResNet step last: its per-op
# first step is the longest and a cut keeps the others)
MINE=() THEIRS=()
for s in fwd decode opt cnn; do
    has $s || continue
    [ $s = opt ] && MINE+=(opt writes) || MINE+=($s)
    [ $s = opt ] || THEIRS+=($s)
done
if [ ${#MINE[@]} -gt 0 ]; then
    unit "$(joined "${MINE[@]}" | tr , +)-jaxdev" 300 jaxdev "$C/jaxdev" "${JAXDEV[@]}" --sections "$(joined "${MINE[@]}")"
fi
if [ ${#THEIRS[@]} -gt 0 ]; then
    unit "$(joined "${THEIRS[@]}" | tr , +)-torchax" 120 torchax "$C/torchax" "${TORCHAX[@]}" --sections "$(joined "${THEIRS[@]}")"
    unit "$(joined "${THEIRS[@]}" | tr , +)-jax" 90 jax.jit "$C/jax" "${JAXJIT[@]}" --sections "$(joined "${THEIRS[@]}")"
fi
if has cold; then  # fresh processes: cold over empty caches, then warm over what the cold run left
    DT=${TPUCHECK_COLD_DTYPES:-bf16}
    for v in ${TPUCHECK_COLD:-jax:hand-written torchax:jitted jaxdev:fused jaxdev:compiled+fused jaxdev:compiled jaxdev:op}; do
        impl=${v%%:*} mode=${v#*:}
        case $impl in
            jax) cmd=("${JAXJIT[@]}") impl=jax.jit ;;
            torchax) cmd=("${TORCHAX[@]}") ;;
            *) cmd=("${JAXDEV[@]}") ;;
        esac
        dir=$STATE/first/${impl}-${mode}
        if [ ${#NAMED[@]} -gt 0 ] || ! done_before "warm-$impl-$mode"; then  # a warm run needs its own cold one
            rm -rf "$dir"
            sed -i "/^cold-$impl-$mode\$/d" "$STATE/done" 2>/dev/null
        fi
        limit=120
        [ "$mode" = op ] && limit=240
        TPUCHECK_FIRST=cold unit "cold-$impl-$mode" $limit "$impl" "$dir" "${cmd[@]}" --sections first --modes "$mode" --dtypes "$DT" &&
            TPUCHECK_FIRST=warm unit "warm-$impl-$mode" 60 "$impl" "$dir" "${cmd[@]}" --sections first --modes "$mode" --dtypes "$DT"
    done
fi
cp "$TPUCHECK_ROWS" "$OUT/rows.jsonl"
# the chip's runtime logs can be long: the last 4 MB of them come back
[ "$(stat -c %s "$ERR" 2>/dev/null || echo 0)" -gt 4000000 ] && { tail -c 4000000 "$ERR" >"$ERR.tail" && mv "$ERR.tail" "$ERR"; }
JAX_PLATFORMS=cpu $PY benchmarks/tpu_report.py "$TPUCHECK_ROWS" --run "$TPUCHECK_RUN" --json "$OUT/results.json"
echo "tpu_check: $((SECONDS - START)) s in all; $OUT holds tpu_check.log, errors.log, rows.jsonl, results.json"
if [ ${#PENDING[@]} -gt 0 ]; then
    echo "not finished: ${PENDING[*]}: the same command again continues (caches and rows are kept in $STATE)"
fi
