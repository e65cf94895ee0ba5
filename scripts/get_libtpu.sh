#!/usr/bin/env bash
# XLA's TPU compiler for this checkout's jax, into .libtpu/ (ignored): what `jaxdev coverage
# --tpu-compile`, `benchmarks/tpu_probe_kernels.py --without-chip` and the deviceless tests use to
# compile programs for a TPU v5e on a machine without one (jaxdev/audit/deviceless.py). libtpu is not
# installed into .venv: beside jax it makes every process try to start a TPU backend. The version is
# the one jax's own `tpu` extra names (libtpu==0.0.42.* for jax 0.10.2); ~210 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
spec=$("$PY" -c "
import importlib.metadata as m, re
req = [r for r in (m.requires('jax') or []) if r.startswith('libtpu') and 'tpu' in r.split(';', 1)[-1]]
print(re.split(r'\s*;', req[0])[0].replace(' ', '') if req else 'libtpu')")
if [ -d .libtpu/libtpu ] && "$PY" -c "import sys; sys.path.insert(0, '.libtpu'); import importlib.metadata as m; from packaging.requirements import Requirement as R; sys.exit(0 if R('$spec').specifier.contains(m.version('libtpu'), prereleases=True) else 1)" 2>/dev/null; then
    echo "get_libtpu: .libtpu holds $spec already"
    exit 0
fi
rm -rf .libtpu
"$PY" -m pip install -q --no-deps --target .libtpu "$spec"
echo "get_libtpu: $spec in .libtpu"
