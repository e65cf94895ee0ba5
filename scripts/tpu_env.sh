# Sourced by scripts/tpu_tests.sh and scripts/tpu_probe.sh: the Python to run jaxdev with, in $PY.
# Here (a checkout with .venv): .venv/bin/python, nothing installed. On the bare TPU machine
# (../shared/DESIGN.md, "On a TPU v5e"), once per machine: torch and the tools from the machine's own
# wheel index into $TPU_SITE (default /tmp/site), expecttest from .whl-tpu/ (carried: the index has
# none), and jaxdev's entry points (torch's autoload of the device, the dynamo backend, the `jaxdev`
# script) written as a dist-info there from pyproject.toml, since `pip install` of the checkout fails
# there. The machine's own JAX stays first on PYTHONPATH.
if [ -x .venv/bin/python ]; then
    PY=.venv/bin/python
else
    PY=python3
    TPU_SITE=${TPU_SITE:-/tmp/site}
    if [ ! -e "$TPU_SITE/.jaxdev-ready" ]; then
        echo "tpu_env: installing torch and the test tools into $TPU_SITE (about 75 s)" >&2
        PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --only-binary=:all: \
            --index-url file:///opt/pypi/simple --find-links /opt/wheels --target "$TPU_SITE" \
            torch==2.13.0 click rich pyyaml optax pytest
        if ls .whl-tpu/expecttest-*.whl >/dev/null 2>&1; then
            PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps \
                --target "$TPU_SITE" .whl-tpu/expecttest-*.whl
        else
            echo "tpu_env: no .whl-tpu/expecttest-*.whl (carry .whl-tpu): tests importing expecttest will fail" >&2
        fi
        python3 - "$TPU_SITE" <<'PYEOF'
import pathlib, sys, tomllib
project = tomllib.loads(pathlib.Path("pyproject.toml").read_text())["project"]
site = pathlib.Path(sys.argv[1])
info = site / f"jaxdev-{project['version']}.dist-info"
info.mkdir(exist_ok=True)
(info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: jaxdev\nVersion: {project['version']}\n")
groups = {"console_scripts": project["scripts"], **project["entry-points"]}
lines = [f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()) for g, entries in groups.items()]
(info / "entry_points.txt").write_text("\n".join(lines))
bin_dir = site / "bin"
bin_dir.mkdir(exist_ok=True)
(bin_dir / "jaxdev").write_text("#!/usr/bin/env python3\nimport sys\nfrom jaxdev_cli import main\nsys.exit(main())\n")
(bin_dir / "jaxdev").chmod(0o755)
PYEOF
        touch "$TPU_SITE/.jaxdev-ready"
    fi
    export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$TPU_SITE:$PWD"
    export PATH="$TPU_SITE/bin:$PATH"
fi
export TPU_TESTS_PYTHON=$PY
