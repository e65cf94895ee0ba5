"""`python -m jaxdev_cli.peer_worker IN_FD OUT_FD SERVER`: an auditor worker (jaxdev.audit.runner's)
that tests a peer backend (jaxdev/audit/peers: torchax) instead of jaxdev's device; with `--probe`
it prints the peer's version and the JAX platform as JSON instead (peers.Selected asks before a run).

The peer renames PrivateUse1 to `jax` as jaxdev does, so this process never runs jaxdev/__init__.py,
which registers jaxdev's device: the jaxdev package goes into sys.modules with its __init__ not run
(as jaxdev_cli does for the light commands), and a finder refuses every jaxdev module outside the
auditor (jaxdev.audit), so a change that would load jaxdev's kernels here fails at once instead of
measuring a mixture. Kept outside the jaxdev package for that reason. $JAXDEV_PEER names the peer's
adapter; the parent sets TORCH_DEVICE_BACKEND_AUTOLOAD=0 (jaxdev's autoload entry point) in the env.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

AUDITOR = "jaxdev.audit"
# modules outside the auditor that it reads and that import nothing of jaxdev's (the JAXDEV_MATH rule a
# platform's record names)
STANDALONE = ("jaxdev.math_settings",)


class _AuditorOnly:
    """A meta-path finder that finds nothing: it refuses jaxdev modules outside the auditor."""

    def find_spec(self, name, path=None, target=None):
        if name in STANDALONE:
            return None
        if name.startswith("jaxdev.") and name != AUDITOR and not name.startswith(AUDITOR + "."):
            raise ImportError(f"{name} would load jaxdev's device into a peer backend's worker")
        return None


def bare_jaxdev() -> None:
    """The jaxdev package importable for its auditor only, its __init__ (the device) never run."""
    spec = importlib.util.find_spec("jaxdev")
    sys.modules["jaxdev"] = importlib.util.module_from_spec(spec)
    sys.meta_path.insert(0, _AuditorOnly())


def main(argv: list[str]) -> None:
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # before torch is imported: no jaxdev autoload
    bare_jaxdev()
    from jaxdev.audit import devices, peers, platforms

    version, device = peers.load_in_worker()
    devices.use(device)
    if argv[:1] == ["--probe"]:
        p = platforms.current()
        print(json.dumps({"version": version, "platform": p.name, "device_kind": p.device_kind}))
        return
    from jaxdev.audit import runner

    runner.worker_main(int(argv[0]), int(argv[1]), argv[2])


if __name__ == "__main__":
    main(sys.argv[1:])
