#!/usr/bin/env bash
# Issue 41, item 4: the committed matrix's float16/bfloat16 eager cells (forward, backward) re-run with
# XLA_FLAGS=--xla_cpu_max_isa=LEVEL (the coverage workers inherit it), each level into a folder of its
# own with an empty compilation cache, and each cell's status and counts compared with
# coverage/matrix.yaml. Prints one line per level and every cell that differs; exit 1 if one does.
#
#   bash scripts/isa_coverage.sh                       # AVX AVX2 AVX512 AVX512_VNNI, the ops below
#   LEVELS=AVX2 bash scripts/isa_coverage.sh 'special.*' addr   # levels and OpInfos chosen
#
# The default OpInfos are those of the kernels with half-specific code (rounding with
# cpu_numerics.round_to/narrowed, issue 41's fixes: i0e, grid_sample, addr, conversions, fills,
# ranges, indexing writes, scatter, pads, cat/stack, random fills, products, pools, norms, softmax,
# sums): 80 OpInfos, 288 cells. Every half cell (2,004) takes about 40 minutes a level on two cores.
set -uo pipefail
cd "$(dirname "$0")/.."
LEVELS=${LEVELS:-"AVX AVX2 AVX512 AVX512_VNNI"}
if [ "$#" -gt 0 ]; then
    OPS=("$@")
else
    OPS=(addbmm addmm addmv addr arange baddbmm bfloat16 bmm cat constant_pad_nd cross double fill float
        float_power full full_like grid_sampler_2d half hstack i0 igamma igammac index_add index_fill index_put
        linalg.cross linspace linspace.tensor_overload log_softmax logit logspace logspace.tensor_overload
        logsumexp masked.logsumexp masked_fill masked_scatter mm nansum new_full 'nn.functional.avg_pool*'
        nn.functional.batch_norm nn.functional.conv1d nn.functional.conv2d nn.functional.embedding
        nn.functional.gelu nn.functional.grid_sample nn.functional.group_norm nn.functional.layer_norm
        nn.functional.mish 'nn.functional.pad.*' nn.functional.silu nn.functional.softplus normal
        normal.in_place normal.number_mean pow scalar_tensor scatter scatter_add 'scatter_reduce.*' softmax
        special.i0e special.i1e stack sum to uniform vstack zero_)
fi
LOGS=${ISA_LOGS:-$(mktemp -d /tmp/isa_coverage.XXXXXX)}
mkdir -p "$LOGS"
status=0
for level in $LEVELS; do
    cache=$(mktemp -d)
    start=$SECONDS
    XLA_FLAGS="--xla_cpu_max_isa=$level ${XLA_FLAGS:-}" .venv/bin/jaxdev coverage "${OPS[@]}" --mode eager \
        --dtype float16 --dtype bfloat16 --jobs "${JOBS:-1}" --out "$LOGS/$level" --cache-dir "$cache" \
        >"$LOGS/$level.log" 2>&1 || status=1
    rm -rf "$cache"
    .venv/bin/python - "$LOGS/$level/matrix.yaml" "$level" "$((SECONDS - start))" <<'EOF' || status=1
import sys

import yaml

committed = yaml.safe_load(open("coverage/matrix.yaml"))["ops"]
rerun = yaml.safe_load(open(sys.argv[1]))["ops"]
cells, differ = 0, []
for op, entry in rerun.items():
    for dtype, directions in (entry.get("results") or {}).items():
        for direction, cell in directions.items():
            cells += 1
            old = committed.get(op, {}).get("results", {}).get(dtype, {}).get(direction)
            if old is None or (old["status"], old.get("counts")) != (cell["status"], cell.get("counts")):
                was = "no cell" if old is None else f"{old['status']} {old.get('counts')}"
                differ.append(f"  {op} {dtype} {direction}: {was} -> {cell['status']} {cell.get('counts')}")
print(f"{sys.argv[2]}: {cells} cells, {cells - len(differ)} as committed, {len(differ)} differ ({sys.argv[3]} s)")
if differ:
    print("\n".join(differ))
sys.exit(1 if differ else 0)
EOF
done
echo "logs: $LOGS"
exit $status
