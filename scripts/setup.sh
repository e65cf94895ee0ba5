#!/usr/bin/env bash
# Creates .venv with jaxdev and its test dependencies. torch is pinned to the CPU build 2.13.0
# first, so that no dependency can pull a CUDA build of torch.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q "torch==2.13.0"
.venv/bin/pip install -q -e ".[test]"
# jaxdev's native fast paths (jaxdev/native.py) compile on first import; build them now, so that no
# later command pays the ~10 s. Optional: without a C++ compiler jaxdev runs the same in Python.
.venv/bin/python -c "from jaxdev import native; print('setup: jaxdev native fast paths', native.unavailable or 'ready')"
# XLA's TPU compiler (libtpu, matching jax) into .libtpu/ for the tests and `jaxdev coverage --tpu-compile`
# that compile for a TPU without one (jaxdev/audit/deviceless.py); best effort: they skip without it.
bash scripts/get_libtpu.sh || echo "setup: could not fetch libtpu; the TPU-compiler tests will be skipped" >&2
# The HTML report's browser test (tests/audit/test_report_browser.py) needs Debian's chromium; it is
# skipped without one. CI installs it, best effort: setup does not fail where apt is unavailable.
if [ "${CI:-}" = "true" ] && ! command -v chromium >/dev/null 2>&1; then
    sudo=""
    if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; fi
    if command -v apt-get >/dev/null 2>&1 \
        && $sudo apt-get update -qq >/dev/null 2>&1 \
        && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null 2>&1; then
        echo "setup: installed chromium for the report's browser test"
    else
        echo "setup: could not install chromium; the report's browser test will be skipped" >&2
    fi
fi
