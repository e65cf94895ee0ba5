#!/usr/bin/env bash
# Creates .venv with jaxdev and its test dependencies. torch is pinned to the CPU build 2.13.0
# first, so that no dependency can pull a CUDA build of torch.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q "torch==2.13.0"
.venv/bin/pip install -q -e ".[test]"
