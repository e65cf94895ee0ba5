"""Which of PyTorch's test files the runner uses, and where they come from.

PyTorch's wheel ships the device-generic test framework (`torch.testing._internal`: OpInfo,
`instantiate_device_type_tests`) but not the test files (`test/*.py`). The runner takes them from a
git copy of PyTorch's repository at the commit the installed torch was built from
(`torch.version.git_version`), extracted into a cache folder at run time: they are never part of
jaxdev's package or commits. A test file's sibling modules that it imports from `test/` come along.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class Suite:
    name: str
    file: str  # in PyTorch's test/ folder
    classes: tuple[str, ...] = ()  # device-generic classes, without the device suffix; () keeps all
    prefixes: tuple[str, ...] = ()  # test methods whose names start so; () keeps all

    @property
    def title(self) -> str:
        scope = f" {'/'.join(self.classes)}" if self.classes else ""
        return f"{self.file[:-3]}{scope}"


SUITES = {
    "view_ops": Suite("view_ops", "test_view_ops.py"),
    "ops": Suite(
        "ops",
        "test_ops.py",
        ("TestCommon",),
        ("test_compare_cpu", "test_out", "test_noncontiguous_samples", "test_variant_consistency_eager"),
    ),
    "torch": Suite("torch", "test_torch.py", ("TestTorchDeviceType",)),
    "nn": Suite("nn", "test_nn.py", ("TestNNDeviceType",)),
}


class SourceError(Exception):
    """A problem with where the test files come from, said in one sentence."""


def installed_torch() -> tuple[str, str]:
    """The installed torch's version and the commit it was built from, read from torch/version.py
    without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise SourceError("torch is not installed in this Python; run the runner with the project's .venv/bin/python.")
    with open(os.path.join(os.path.dirname(spec.origin), "version.py")) as f:
        text = f.read()
    version = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", text, re.M)
    commit = re.search(r"^git_version\s*=\s*['\"]([0-9a-f]+)", text, re.M)
    return (version.group(1) if version else "unknown", commit.group(1) if commit else "")


def _git(repo: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)


def _blob(repo: str, rev: str, path: str) -> str | None:
    shown = _git(repo, "show", f"{rev}:{path}")
    return shown.stdout if shown.returncode == 0 else None


def check_revision(repo: str, rev: str) -> str:
    """The full commit id of `rev` in the git copy at `repo`, or a SourceError saying what to do."""
    if not os.path.isdir(repo):
        raise SourceError(f"{repo} is not a folder: pass --pytorch-git with a git copy of PyTorch's repository.")
    found = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if found.returncode != 0:
        raise SourceError(
            f"commit {rev} is not in {repo}: fetch it there (git -C {repo} fetch origin {rev}), "
            "or pass --rev with a commit it has (its test files then differ from the installed torch's)."
        )
    return found.stdout.strip()


def _sibling_imports(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def extract(repo: str, commit: str, files: list[str], into: str) -> list[str]:
    """Writes test/<file> at `commit` into `into`, with the test/ modules they import, and returns
    the paths written. Files already there (same commit, same folder) are kept."""
    os.makedirs(into, exist_ok=True)
    pending, written, seen = list(files), [], set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        target = os.path.join(into, name)
        if os.path.exists(target):
            with open(target) as f:
                text = f.read()
        else:
            text = _blob(repo, commit, f"test/{name}")
            if text is None:
                if name in files:
                    raise SourceError(f"test/{name} is not in PyTorch's commit {commit[:12]}.")
                continue  # an import of a module that is not a test/ sibling (torch, numpy, ...)
            with open(target + ".part", "w") as f:
                f.write(text)
            os.replace(target + ".part", target)
        written.append(target)
        pending.extend(f"{mod}.py" for mod in _sibling_imports(text) if f"{mod}.py" not in seen)
    with open(os.path.join(into, "SOURCE"), "w") as f:
        f.write(f"PyTorch test files from {os.path.abspath(repo)} at commit {commit}\n")
    return written


def prepare(args, suites: list[Suite]) -> tuple[str, str]:
    """The folder holding the suites' test files, and a line saying where they came from."""
    if args.tests_dir:
        missing = [s.file for s in suites if not os.path.exists(os.path.join(args.tests_dir, s.file))]
        if missing:
            raise SourceError(f"{args.tests_dir} has no {', '.join(missing)}.")
        return args.tests_dir, f"test files as found in {args.tests_dir}"
    version, built_from = installed_torch()
    if not args.pytorch_git:
        raise SourceError(
            "say where PyTorch's test files come from: --pytorch-git DIR (a git copy of PyTorch's repository) "
            "or --tests-dir DIR (a folder holding the test files); see benchmarks/pytorch_suites/README.md."
        )
    rev = args.rev or built_from
    if not rev:
        raise SourceError(f"torch {version} does not say which commit it was built from; pass --rev.")
    commit = check_revision(args.pytorch_git, rev)
    into = os.path.join(args.work_dir, "files", commit)
    extract(args.pytorch_git, commit, [s.file for s in suites], into)
    pinned = "the installed torch's commit" if commit.startswith(built_from or "-") else "NOT the installed torch's"
    return into, f"PyTorch test files at commit {commit[:12]} ({pinned}; torch {version} is {built_from[:12]})"
