"""Helpers for the jaxdev device tests: compare the `jax` device against CPU PyTorch.

* `assert_same(actual, expected)`: a jax tensor against its CPU twin (device, dtype, shape, values,
  bit-exact unless a tolerance is given), judged by the auditor's own `compare`.
* `on_both(fn)`: run a scenario once with device="cpu" and once with device="jax"; if CPU raises,
  the jax run must raise the same exception type, otherwise every returned value must match.
* `same_outcome(fn)`: stricter on errors: the same exception type and CPU's very message.
* `like_cpu(fn)`: as `on_both`, strides compared, and an error must carry CPU's very message (a
  message naming the device names the other one).
* `run_python(code)`: a fresh interpreter, for what must not run in the test process.

(A module of its own, not `conftest`: several conftest.py files live under tests/.)
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import jax
import pytest
import torch

import jaxdev  # registers the device
from jaxdev import fallback, native
from jaxdev.audit.check import compare

JAX = torch.device("jax", 0)
CPU = torch.device("cpu")
# The JAX platform jaxdev's arrays live on: cpu here and in CI, tpu on a TPU machine.
PLATFORM = jax.default_backend()  # "tpu" in a stand-in for one too (jaxdev/audit/deviceless.py)


def cpu_fact(reason: str) -> None:
    """Skip the calling test off XLA's CPU backend: what it checks next is a fact of that backend
    (`reason` names it), not of jaxdev's semantics (the `cpu_fact` marker does it for a whole test)."""
    if PLATFORM != "cpu":
        pytest.skip(f"a fact of XLA's CPU backend, not of {PLATFORM}: {reason}")


ALL_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
]


# --- comparing against CPU ------------------------------------------------------------------------


@contextlib.contextmanager
def foreach_in_python():
    """Every foreach call runs its Python kernel (foreach._run) meanwhile: the native replay of a key met
    before (jaxdev/ops/kit/foreach_replay.py) is off, so a test that spies on or replaces _run sees every
    call, also where an earlier test in the same process taught the replay that key."""
    replaying = native.module.foreach_replay(False) if native.module is not None else None
    try:
        yield
    finally:
        if replaying is not None:
            native.module.foreach_replay(replaying)


def to_cpu(t: torch.Tensor) -> torch.Tensor:
    """The CPU copy of a tensor's values, without autograd history."""
    return t.detach().to("cpu")


def bits_list(t: torch.Tensor) -> list:
    """A tensor's values as their bits (signs of zeros and NaNs included; a complex's parts each)."""
    t = t.detach().cpu().contiguous()
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]).tolist()


def assert_same(actual, expected, *, rtol=0.0, atol=0.0, check_stride=False, msg=""):
    """`actual` (a jax tensor) holds what `expected` (a CPU tensor) holds."""
    assert isinstance(actual, torch.Tensor), f"{msg} expected a tensor, got {type(actual).__name__}"
    assert actual.device.type == "jax", f"{msg} result is on {actual.device}, not on jax"
    assert actual.dtype == expected.dtype, f"{msg} dtype {actual.dtype} != CPU's {expected.dtype}"
    assert actual.shape == expected.shape, f"{msg} shape {tuple(actual.shape)} != CPU's {tuple(expected.shape)}"
    if check_stride:
        assert actual.stride() == expected.stride(), f"{msg} stride {actual.stride()} != CPU's {expected.stride()}"
        assert actual.storage_offset() == expected.storage_offset(), (
            f"{msg} storage_offset {actual.storage_offset()} != CPU's {expected.storage_offset()}"
        )
    bad = compare(to_cpu(actual), expected.detach(), atol, rtol, floor=False)
    assert bad is None, f"{msg} {bad['reason']}"


def _compare(jax_out, cpu_out, path, rtol, atol, check_stride):
    if isinstance(cpu_out, torch.Tensor):
        assert_same(jax_out, cpu_out, rtol=rtol, atol=atol, check_stride=check_stride, msg=f"[{path}]")
    elif isinstance(cpu_out, (list, tuple)):
        assert isinstance(jax_out, (list, tuple)) and len(jax_out) == len(cpu_out), f"[{path}] {jax_out!r}"
        for i, (j, c) in enumerate(zip(jax_out, cpu_out)):
            _compare(j, c, f"{path}.{i}", rtol, atol, check_stride)
    elif isinstance(cpu_out, dict):
        assert isinstance(jax_out, dict) and jax_out.keys() == cpu_out.keys(), f"[{path}] {jax_out!r}"
        for k in cpu_out:
            _compare(jax_out[k], cpu_out[k], f"{path}.{k}", rtol, atol, check_stride)
    elif isinstance(cpu_out, torch.device):
        assert jax_out == (JAX if cpu_out.type == "cpu" else cpu_out), f"[{path}] {jax_out} vs {cpu_out}"
    else:
        assert jax_out == cpu_out, f"[{path}] jax gave {jax_out!r}, CPU gave {cpu_out!r}"


def fn_synced(fn):
    """fn(JAX), then a sync: an error that depends on values (an index out of range) raises at the op in
    per-op mode and at the next sync in fused mode (README, "Eager modes"), CPU's exception either way."""
    out = fn(JAX)
    torch.jax.synchronize()
    return out


def on_both(fn, *, rtol=0.0, atol=0.0, check_stride=False, match=None):
    """Run `fn(device)` on CPU and on jax and compare. Returns the jax result.

    If CPU raises, jax must raise the same exception type (and `match`, when given, must be found in
    the jax message); a jax error where CPU succeeds fails the test with that error.
    """
    try:
        cpu_out = fn(CPU)
    except Exception as cpu_err:
        try:
            fn_synced(fn)
        except type(cpu_err) as jax_err:
            if isinstance(jax_err, (jaxdev.PlatformDtypeError, fallback.PlatformGapError)):
                raise  # the platform refuses the dtype or lacks the kernel before CPU's own check: a skip (conftest)
            if match is not None:
                assert match in str(jax_err), f"jax error {jax_err!r} lacks {match!r} (CPU: {cpu_err!r})"
            return jax_err
        pytest.fail(f"CPU raised {cpu_err!r}, jax raised nothing", pytrace=False)
    jax_out = fn(JAX)
    _compare(jax_out, cpu_out, "result", rtol, atol, check_stride)
    return jax_out


def same_outcome(fn, *, values=True, rtol=0.0):
    """`fn(device)` raises on jax CPU's exception type with CPU's very words, or gives what CPU gives:
    the same values (a tuple: each), or with `values=False` (random draws) the same dtype and shape.
    Warnings either side raises are not the point here and are silenced."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = fn(CPU)
    except Exception as cpu_error:
        with pytest.raises(type(cpu_error)) as raised, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn_synced(fn)
        assert str(raised.value) == str(cpu_error)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        actual = fn(JAX)
    pairs = zip(actual, expected) if isinstance(expected, tuple) else [(actual, expected)]
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
    for a, e in pairs:
        if values:
            assert_same(a, e, rtol=rtol)
        else:
            assert (a.dtype, a.shape) == (e.dtype, e.shape)


# --- child processes --------------------------------------------------------------------------------


def _tensors(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors(o)]
    return []


def _run(fn, inputs, device, grad):
    args = [
        x.detach().to(device).requires_grad_(grad and x.is_floating_point()) if isinstance(x, torch.Tensor) else x
        for x in inputs
    ]
    return args, _tensors(fn(*args))


def _real(t):
    return torch.view_as_real(t.resolve_conj()) if t.is_complex() else t


def check(fn, *inputs, grad=True, rtol=1.3e-6, atol=1e-5):
    """fn(*inputs) on jax equals fn(*inputs) on CPU; so do the inputs' gradients of a random
    projection of the floating outputs."""
    cpu_args, cpu_out = _run(fn, inputs, CPU, grad)
    jax_args, jax_out = _run(fn, inputs, JAX, grad)
    assert len(jax_out) == len(cpu_out)
    for i, (j, c) in enumerate(zip(jax_out, cpu_out)):
        assert_same(j, c, rtol=rtol, atol=atol, msg=f"output {i}")
    if not grad:
        return
    differentiable = [k for k, c in enumerate(cpu_out) if c.requires_grad]
    if not differentiable:
        return
    cpu_out, jax_out = [_real(t) for t in cpu_out], [_real(t) for t in jax_out]
    weights = [torch.randn(cpu_out[k].shape, dtype=cpu_out[k].dtype) for k in differentiable]
    sum((cpu_out[k] * w).sum() for k, w in zip(differentiable, weights)).backward()
    sum((jax_out[k] * w.to(JAX)).sum() for k, w in zip(differentiable, weights)).backward()
    for i, (j, c) in enumerate(zip(jax_args, cpu_args)):
        if isinstance(c, torch.Tensor) and c.requires_grad:
            assert (j.grad is None) == (c.grad is None), f"input {i}: gradient presence differs"
            if c.grad is not None:
                assert_same(j.grad, c.grad, rtol=max(rtol, 1e-5), atol=max(atol, 1e-5), msg=f"grad of input {i}")


ROOT = Path(__file__).resolve().parent.parent


def run_python(code: str, *, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter (with the repo's venv and tests/ on the path)."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), full_env.get("PYTHONPATH", "")])
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=ROOT,
    )


def describe_exit(proc: subprocess.CompletedProcess) -> str:
    how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit code {proc.returncode}"
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
    return f"child process died with {how}:\n{tail}"


def like_cpu(fn, *, rtol=0.0, atol=0.0, check_stride=True):
    """fn(device) on CPU and on jax: equal results (strides too), or the same error type and message."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resize and complex-cast warnings: both sides give them
        try:
            expected = fn(CPU)
        except Exception as cpu_err:
            with pytest.raises(type(cpu_err)) as jax_err:
                fn_synced(fn)
            if isinstance(jax_err.value, (jaxdev.PlatformDtypeError, fallback.PlatformGapError)):
                raise jax_err.value from None  # refused before CPU's own check could speak: a skip (conftest)
            # a message that names the device names the other one
            assert str(jax_err.value).replace("device=jax:0", "device=cpu") == str(cpu_err)
            return None
        return on_both(fn, rtol=rtol, atol=atol, check_stride=check_stride) if expected is not None else None


@functools.cache
def no_sockets() -> str | None:
    """Why this machine cannot run a multi-process test (its ranks rendezvous over TCP on 127.0.0.1),
    or None. The TPU machine this project borrows gives a process no socket at all."""
    import socket

    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
    except OSError as e:
        return f"this machine gives a process no TCP socket on 127.0.0.1 ({e}), and the ranks rendezvous over one"
    return None


def run_ranks(argv: list[str], *, deadline_s: float, env: dict | None = None, world: int = 2) -> list[dict]:
    """`world` processes of `argv` (a torch.distributed job on this host: DDP_RANK, DDP_PORT and
    JAX_PORT set, JAXDEV_FALLBACK=error), waited for together up to `deadline_s`; each rank's last
    `RESULT{json}` line, parsed. A rank that fails or prints none fails the test with every rank's
    output's tail. A rank still running at the deadline, or 30 s after another rank failed, is sent
    SIGABRT first: with PYTHONFAULTHANDLER set it prints where each of its threads stood."""
    import json
    import signal
    import socket
    import tempfile
    import time

    if no_sockets():
        pytest.skip(no_sockets())
    with socket.socket() as s, socket.socket() as s2:
        s.bind(("127.0.0.1", 0))
        s2.bind(("127.0.0.1", 0))
        port, jax_port = str(s.getsockname()[1]), str(s2.getsockname()[1])
    procs = []
    for rank in range(world):
        rank_env = dict(os.environ)
        rank_env.update(
            PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests"), rank_env.get("PYTHONPATH", "")]),
            PYTHONFAULTHANDLER="1",
            JAXDEV_FALLBACK="error",
            DDP_RANK=str(rank),
            DDP_PORT=port,
            JAX_PORT=jax_port,
            **(env or {}),
        )
        out = tempfile.TemporaryFile()  # noqa: SIM115  (a file, not a pipe: a rank never blocks on it)
        procs.append((subprocess.Popen(argv, env=rank_env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT), out))
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        codes = [p.poll() for p, _ in procs]
        if None not in codes:
            break
        if any(code not in (None, 0) for code in codes):
            deadline = min(deadline, time.monotonic() + 30)  # its peers may wait on it forever
        time.sleep(0.2)
    for p, _ in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGABRT)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    results = []
    for p, out in procs:
        out.seek(0)
        text = out.read().decode(errors="replace")
        out.close()
        results.append((p.returncode, text, [line for line in text.splitlines() if line.startswith("RESULT")]))
    if not all(code == 0 and lines for code, _, lines in results):
        tails = [
            f"rank {r}: exit {code}:\n" + "\n".join(text.splitlines()[-40:])
            for r, (code, text, _) in enumerate(results)
        ]
        pytest.fail("\n\n".join(tails), pytrace=False)
    return [json.loads(lines[-1][len("RESULT") :]) for _, _, lines in results]


# --- helpers the op test modules share -------------------------------------------------------------


def seeded_randn(*shape, dtype=torch.float32, scale=1.0, seed=0):
    """A normal sample from its own generator (not the global RNG: test order does not change it)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(dtype)


def raises_as_cpu(fn):
    """fn(device) raises on CPU, and on jax with the same class and message."""
    err = on_both(fn)
    assert isinstance(err, Exception), "CPU did not raise"
    cpu = None
    try:
        fn(torch.device("cpu"))
    except Exception as e:
        cpu = e
    assert str(err) == str(cpu), f"jax: {err!r}, CPU: {cpu!r}"


def result_or_error_as_cpu(fn, *, rtol=1e-5, atol=1e-5):
    """fn(device) on CPU and on jax: the same values (dtype, shape) or the same exception and message."""
    try:
        expected = fn(CPU)
    except Exception as cpu_err:
        with pytest.raises(type(cpu_err)) as jax_err:
            fn(JAX)
        if isinstance(jax_err.value, (jaxdev.PlatformDtypeError, fallback.PlatformGapError)):
            raise jax_err.value from None  # refused before CPU's own check could speak: a skip (conftest)
        assert str(jax_err.value).splitlines()[0] == str(cpu_err).splitlines()[0]
        return None
    got = fn(JAX)
    assert_same(got, expected, rtol=rtol, atol=atol)
    return got


def reshape_matrix_with_unsupported_cells(path) -> str:
    """coverage/matrix.yaml's reshape entry alone, its complex32 cells made `unsupported` (as they were
    before jaxdev held complex32): the note such cells get, in a file of its own."""
    import yaml

    m = yaml.safe_load((Path(__file__).resolve().parents[1] / "coverage" / "matrix.yaml").read_text())
    entry = m["ops"]["reshape"]
    for cell in entry["results"]["complex32"].values():
        cell.update(status="unsupported", counts={"unsupported": cell["samples"]})
        cell["reason"] = "UnsupportedDtypeError: dtype torch.complex32 is not supported on device 'jax'"
    out = path / "matrix.yaml"
    out.write_text(yaml.safe_dump({**m, "ops": {"reshape": entry}}))
    return str(out)
