"""Peer backends: the other PyTorch-on-JAX backends the auditor measures beside jaxdev, from the same
OpInfo samples and direct trials, judged by the same check (`jaxdev coverage --backend torchax`).

A peer renames PrivateUse1 to `jax` as jaxdev does, so the two never share a process: a peer's
workers are `python -m jaxdev_cli.peer_worker`, which imports the peer and never jaxdev's device
(TORCH_DEVICE_BACKEND_AUTOLOAD=0 keeps jaxdev's autoload entry point out). The peer is no dependency
of jaxdev: install it with `pip install --no-deps ...` (pip must not replace the pinned torch), in
jaxdev's environment or apart (`--target DIR`, then name DIR with --peer-path or $JAXDEV_PEER_PATH:
the workers put it first on their PYTHONPATH).

Each peer is an adapter module (ADAPTERS; more through $JAXDEV_AUDIT_PEERS, `name=module` or
`name=path.py`, comma-separated: the tests' fake backend), light to import, with NAME, INSTALL (what
to install, a phrase), DIRECTIONS (those it runs), HOW (how a sample runs through it, recorded in the
file) and load() (in the worker: imports the peer, returns (its version, a devices.Device)). Its
files are OUT/peers/NAME/matrix.yaml and aten.yaml (OUT/peers/NAME/PLATFORM/... off CPU), never
jaxdev's (matrix.check_peer).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

from jaxdev.audit import AuditError, load_module
from jaxdev.audit.model import Peer, Platform

ADAPTERS = {"torchax": "jaxdev.audit.peers.torchax_backend"}
PEERS_ENV = "JAXDEV_AUDIT_PEERS"  # more adapters: name=module or name=path.py, comma-separated
PATH_ENV = "JAXDEV_PEER_PATH"  # where the peer is installed (a --target folder), for the workers only
ADAPTER_ENV = "JAXDEV_PEER"  # the workers': the adapter to load (a module name or a .py path)
FOLDER = "peers"  # OUT/peers/NAME/: a peer's files
JAXDEV = "jaxdev"  # --backend's name for jaxdev itself
WORKER = ("-m", "jaxdev_cli.peer_worker")
PROBE_TIMEOUT_S = 300.0


def adapters() -> dict[str, str]:
    """Peer name -> its adapter (module name or .py path): ADAPTERS and $JAXDEV_AUDIT_PEERS's."""
    out = dict(ADAPTERS)
    for item in filter(None, (x.strip() for x in os.environ.get(PEERS_ENV, "").split(","))):
        name, sep, spec = item.partition("=")
        if not sep or not name or not spec:
            raise AuditError(f"${PEERS_ENV} takes name=module or name=path.py, comma-separated, not {item!r}")
        out[name.strip()] = spec.strip()
    return out


def load_adapter(spec: str):
    """The adapter module named by `spec` (a module name, or a .py path)."""
    return load_module(spec, "jaxdev_peer_")


def folder(out_dir: str, name: str) -> str:
    """Where peer `name`'s files go under `out_dir` (platforms.folder adds a platform's below it)."""
    return os.path.join(out_dir, FOLDER, name)


def path(out_dir: str, file_name: str, name: str | None, platform: Platform) -> str:
    """`file_name` for `name`'s cells (None: jaxdev's) on `platform` under `out_dir`."""
    from jaxdev.audit import platforms

    return platforms.path(folder(out_dir, name) if name else out_dir, file_name, platform)


def beside(main: str | None, file_name: str) -> list[tuple[str, str]]:
    """(peer name, its file) for each peer's `file_name` of main's platform beside `main`
    (coverage/matrix.yaml: coverage/peers/*/matrix.yaml), by name; [] without `main`."""
    from jaxdev.audit import platforms

    if not main or not os.path.exists(main):
        return []
    root = os.path.join(os.path.dirname(os.path.abspath(main)), FOLDER)
    if not os.path.isdir(root):
        return []
    platform = platforms.recorded(main)
    found = []
    for name in sorted(os.listdir(root)):
        candidate = path(os.path.dirname(main), file_name, name, platform)
        if os.path.isfile(candidate):
            found.append((name, candidate))
    return found


@dataclasses.dataclass
class Selected:
    """A peer chosen for a run (parent side): its adapter (imported here: light), the folder it is
    installed in, and the probe that asks a worker-like child for its version and platform
    (started at once: it overlaps the parent's own start-up)."""

    name: str
    spec: str
    peer_path: str | None
    adapter: object = None
    probe: subprocess.Popen | None = None
    record: Peer | None = None

    argv = WORKER

    def worker_env(self, env: dict | None = None) -> dict:
        """The peer's workers' environment: no jaxdev autoload, its adapter, its folder on the path."""
        env = dict(os.environ if env is None else env)
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
        env[ADAPTER_ENV] = self.spec
        if self.peer_path:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, (self.peer_path, env.get("PYTHONPATH"))))
        return env

    def start_probe(self) -> None:
        self.probe = subprocess.Popen(
            [sys.executable, *WORKER, "--probe"],
            env=self.worker_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def result(self) -> tuple[Peer, Platform]:
        """(the peer as its workers import it, the platform they run on), or one AuditError sentence
        saying it does not import and what to install."""
        try:
            out, err = self.probe.communicate(timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.probe.kill()
            self.probe.communicate()
            raise AuditError(f"{self.name} did not import within {PROBE_TIMEOUT_S:g} s in a peer worker") from None
        lines = out.strip().splitlines()
        if self.probe.returncode != 0 or not lines:
            last = (err.strip().splitlines() or ["no output"])[-1][:300]
            where = f" (peer path {self.peer_path})" if self.peer_path else f" (no --peer-path or ${PATH_ENV} given)"
            raise AuditError(
                f"{self.name} does not import in a peer worker{where}: {last}; install it with "
                f"`{self.adapter.INSTALL}` (--no-deps: pip leaves torch as it is), or into a folder with --target DIR "
                f"and pass --peer-path DIR (or set ${PATH_ENV}=DIR)"
            )
        said = json.loads(lines[-1])
        self.record = Peer(self.name, said["version"], tuple(self.adapter.HOW))
        return self.record, Platform(said["platform"], said["device_kind"])


def select(name: str, peer_path: str | None) -> Selected | None:
    """The peer `name` (None for jaxdev itself), its probe started; an unknown name is one sentence."""
    if name == JAXDEV:
        return None
    known = adapters()
    if name not in known:
        raise AuditError(f"unknown backend {name!r}; known: {', '.join([JAXDEV, *sorted(known)])}")
    if peer_path and not os.path.isdir(peer_path):
        raise AuditError(f"--peer-path {peer_path} is not a folder (the peer's --target install)")
    try:
        adapter = load_adapter(known[name])
    except Exception as e:
        raise AuditError(f"cannot load the adapter of backend {name!r} ({known[name]}): {type(e).__name__}: {e}") from e
    chosen = Selected(name, known[name], os.path.abspath(peer_path) if peer_path else None, adapter)
    chosen.start_probe()
    return chosen


def load_in_worker():
    """In a peer's worker (jaxdev_cli/peer_worker.py): (the peer's version, its devices.Device), from
    the adapter $JAXDEV_PEER names."""
    return load_adapter(os.environ[ADAPTER_ENV]).load()
