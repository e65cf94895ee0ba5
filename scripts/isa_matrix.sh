#!/usr/bin/env bash
# Issue 41: jaxdev's half-precision results must not depend on the x86 CPU that XLA generates code for.
# XLA:CPU compiles for the host's instruction set; XLA_FLAGS=--xla_cpu_max_isa=LEVEL caps it. This runs
# the half-precision kernels' tests uncapped and once per level that changes this host's code, each a
# fresh pytest with an empty compilation cache (every program compiled under the cap), and with the
# plugin tests/half_scan.py: any program a test compiles whose half rounding can differ between CPUs
# in jaxdev's own code fails that test. That check is the part that stands for AVX512-FP16 (native
# float16), which no level can give a host without it. Prints one line per level; exit 1 on a failure.
#
#   bash scripts/isa_matrix.sh                        # uncapped + the levels that change this host's code
#   LEVELS="AVX2 AVX512" bash scripts/isa_matrix.sh tests/ops/test_special.py   # levels, tests chosen
#
# Levels are XLA's x86 names (xla/backends/cpu/codegen/cpu_features.cc): SSE4_2 AVX AVX2 AVX512
# AVX512_VNNI AVX512_BF16 AMX AMX_FP16 (AMX_FP8 in newer XLA; an unknown name is warned about and
# ignored). A level caps by turning off the host's features newer than it, and one that turns off
# nothing the host has leaves the code as uncapped (the same objects, checked on a Zen 4 host), so it
# is listed as such, not run. SSE4_2, which XLA accepts, is left out: it turns off F16C too, and XLA
# then cannot run any float16 program ("Symbols not found: __extendhfsf2, __truncsfhf2": its JIT links
# no half conversion routines; jax 0.10.2), jaxdev's or not. Only AVX2 and below turn AVX512-FP16 off
# (the AVX512* caps keep it).
set -uo pipefail
cd "$(dirname "$0")/.."
# each level, and the /proc/cpuinfo flags of the features it turns off
declare -A OFF=(
    [AVX]='avx2|fma|avx512.*|amx.*'
    [AVX2]='avx512.*|amx.*'
    [AVX512]='avx512_vnni|avx512_bf16|amx.*'
    [AVX512_VNNI]='avx512_bf16|amx.*'
    [AVX512_BF16]='amx.*'
    [AMX]='amx_fp16|amx_fp8|amx_tf32|amx_avx512|amx_movrs'
    [AMX_FP16]='amx_fp8|amx_tf32|amx_avx512|amx_movrs|avx10_2.*|apx.*'
)
ORDER="AVX AVX2 AVX512 AVX512_VNNI AVX512_BF16 AMX AMX_FP16"
FLAGS=$(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2 | tr ' ' '\n')
if [ -z "${LEVELS+x}" ]; then
    LEVELS="uncapped"
    for level in $ORDER; do
        if grep -qxE "${OFF[$level]}" <<<"$FLAGS"; then
            LEVELS="$LEVELS $level"
        else
            echo "$level: turns off nothing this CPU has (the code of uncapped), not run"
        fi
    done
fi
LOGS=${ISA_LOGS:-$(mktemp -d /tmp/isa_matrix.XXXXXX)}
mkdir -p "$LOGS"
if [ "$#" -gt 0 ]; then
    SELECTION=("$@")
else
    # the half-precision kernels: the files of the kernels whose half results are CPU's bit for bit by
    # stated arithmetic (issue 41's failures: i0e, grid_sampler_2d, addr, the conversions; complex32)
    # and of the rounding helpers, whole, and every other test of the suite whose id names a half dtype
    {
        printf '%s\n' tests/ops/test_cpu_numerics.py tests/test_dtypes.py tests/ops/test_special.py \
            tests/ops/test_grid_sample.py tests/ops/test_products.py tests/ops/test_complex_half.py
        .venv/bin/python -m pytest -q --co -p no:cacheprovider tests \
            -k "half or float16 or bfloat16 or f16 or bf16 or complex32 or chalf" 2>/dev/null |
            grep '::' | grep -vE '^tests/(ops/test_(cpu_numerics|special|grid_sample|products|complex_half)|test_dtypes)\.py::'
    } >"$LOGS/tests.txt"
    SELECTION=("@$LOGS/tests.txt")
fi
summary=()
status=0
for level in $LEVELS; do
    log="$LOGS/$level.log"
    cache=$(mktemp -d)
    flags=${XLA_FLAGS:-}
    [ "$level" = uncapped ] || flags="--xla_cpu_max_isa=$level $flags"
    start=$SECONDS
    XLA_FLAGS="$flags" JAXDEV_CACHE_DIR="$cache" PYTHONPATH="tests${PYTHONPATH:+:$PYTHONPATH}" \
        .venv/bin/python -m pytest -q -p no:cacheprovider -p half_scan "${SELECTION[@]}" >"$log" 2>&1
    rc=$?
    rm -rf "$cache"
    [ "$rc" = 0 ] || status=1
    summary+=("$level: $(grep -E '(passed|failed|error)' "$log" | tail -1 | tr -d '=') ($((SECONDS - start)) s)")
    grep -E '^(FAILED|ERROR)' "$log" | sed "s/^/  $level /"
done
printf '%s\n' "${summary[@]}"
echo "logs: $LOGS"
exit $status
