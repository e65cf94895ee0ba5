"""A TPU v5e's compiler without the chip: every program a process runs, also compiled for a TPU.

JAX compiles ahead of time for a TPU topology that libtpu describes with no device attached
("deviceless"): XLA's TPU compiler runs on this CPU and refuses or aborts exactly where it would on
the chip (measured: float64 LU's UNIMPLEMENTED, complex128 FFT's INVALID_ARGUMENT, the SIGABRT on a
complex128 -> complex64 convert, the same messages the chip gave). `install()` makes a process a
stand-in for a TPU that computes on its CPU:

* jax.default_backend() says 'tpu', so jaxdev's kernels take their TPU formulations and its
  capability facts (jaxdev/ops/kit/capabilities.py: gaps served on CPU, float64 emulated);
* every program JAX compiles for the CPU (each jit's first call per signature, each eager
  primitive) is first lowered for the topology's chip and compiled by XLA's TPU compiler; its
  refusal is raised where the chip would raise it (a JaxRuntimeError, or JAX's NotImplementedError
  for a primitive with no TPU lowering), so what jaxdev does with a refusal on the chip happens here
  too. A program compiles once per process (keyed by its jaxpr and argument types).

Values still come from the CPU: a verdict of `jaxdev coverage --tpu-compile` says whether an op's
TPU programs compile and whether its TPU formulation is right, not how the chip rounds.

libtpu is not a dependency (212 MB; installed beside jax it makes every process try to start a TPU
backend): `scripts/get_libtpu.sh` puts the version matching jaxlib in .libtpu/, which `path()`
finds, or $JAXDEV_LIBTPU names a folder holding it.
"""

from __future__ import annotations

import functools
import os
import sys
import warnings

ENV = "JAXDEV_TPU_COMPILE"  # set (to 1) in a process that is to stand in for a TPU (install())
LIBTPU_ENV = "JAXDEV_LIBTPU"  # a folder with libtpu in it (pip install --target)
NAME, KIND = "tpu-compile", "TPU v5 lite, compiled without a chip (values from CPU)"
_TOPOLOGY = dict(platform="tpu", topology_name="v5e:1x1", chips_per_host_bounds=(1, 1, 1), num_slices=1)
_TPU_ENV = {
    "TPU_ACCELERATOR_TYPE": "v5litepod-1",
    "TPU_WORKER_HOSTNAMES": "localhost",
    "TPU_SKIP_MDS_QUERY": "1",
    "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",  # no chip to share: several processes may compile at once
}


class Unavailable(Exception):
    """libtpu cannot be found or cannot describe the topology."""


def path() -> str | None:
    """The folder to put on sys.path for libtpu: $JAXDEV_LIBTPU where set, else the checkout's .libtpu/,
    if it holds libtpu; None otherwise (libtpu may still be importable as installed)."""
    given = os.environ.get(LIBTPU_ENV)
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), ".libtpu")
    folder = given if given is not None else here  # a folder named is the only one looked in
    return folder if os.path.isdir(os.path.join(folder, "libtpu")) else None


def environment(env: dict) -> dict:
    """`env` for a child that is to install() itself: the flag, libtpu's folder on PYTHONPATH, CPU only."""
    env = dict(env, **{ENV: "1", "JAX_PLATFORMS": "cpu"}, **_TPU_ENV)
    folder = path()
    if folder:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (folder, env.get("PYTHONPATH", "")) if p)
    return env


@functools.cache
def device():
    """The topology's one chip (libtpu loaded on first use)."""
    for key, value in _TPU_ENV.items():
        os.environ.setdefault(key, value)
    folder = path()
    if folder and folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        from jax.experimental import topologies

        return topologies.get_topology_desc(**_TOPOLOGY).devices[0]
    except Exception as e:  # no libtpu, or one that does not match jaxlib
        raise Unavailable(
            "XLA's TPU compiler is not available here (libtpu, matching this jaxlib: "
            f"bash scripts/get_libtpu.sh, or {LIBTPU_ENV}=DIR): {str(e).splitlines()[0][:200]}"
        ) from None


def on_tpu(avals):
    """ShapeDtypeStructs of `avals`' shapes and dtypes (a pytree of arrays or avals), placed on the
    topology's chip."""
    import jax
    from jax.sharding import SingleDeviceSharding

    sharding = SingleDeviceSharding(device())
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding), avals)


def compile_for_tpu(fn, *avals, options: tuple = ()):
    """jax.jit(fn) over `avals` (each a pytree) compiled by XLA's TPU compiler (a jax.stages.Compiled),
    with compiler `options` ((name, value) pairs)."""
    import jax
    from jax._src import config

    # not through JAX's persistent cache: a deviceless executable cannot be read back from it
    with config.enable_compilation_cache(False):
        lowered = jax.jit(fn).lower(*on_tpu(avals))
        return lowered.compile(dict(options)) if options else lowered.compile()


class UncheckedWarning(UserWarning):
    """A program deviceless compilation could not compile for a reason of its own (not the chip's):
    it ran on the CPU unchecked."""


# (jaxpr text, argument types) -> the refusal seen compiling it (None: it compiled)
_seen: dict[tuple, Exception | None] = {}


def _check(jaxpr, args, options: tuple = ()) -> None:
    """Compile `jaxpr` over `args`' types for the TPU with compiler `options`, once; raise what the TPU's
    compiler raised."""
    import jax
    from jax._src import core

    avals = [jax.typeof(a) for a in args]
    key = (str(jaxpr), tuple((tuple(a.shape), str(a.dtype)) for a in avals), options)
    if key not in _seen:
        _seen[key] = None
        try:
            compile_for_tpu(core.jaxpr_as_fun(jaxpr), *avals, options=options)
        except (jax.errors.JaxRuntimeError, NotImplementedError) as error:
            _seen[key] = error
        except Exception as error:  # deviceless compilation's own limit (not what the chip would say)
            warnings.warn(
                f"not compiled for the TPU: {type(error).__name__}: {str(error).splitlines()[0][:200]}",
                UncheckedWarning,
                stacklevel=2,
            )
    if _seen[key] is not None:
        raise _seen[key]


def install() -> None:
    """This process stands in for a TPU (the module's docstring), from now on."""
    import jax
    from jax._src import pjit

    from jaxdev.programs import exec_cache

    if not os.environ.get("JAX_PLATFORMS"):  # libtpu on the path must not start a TPU backend here
        jax.config.update("jax_platforms", "cpu")
    device()  # Unavailable now rather than at the first program
    jax.default_backend = lambda: "tpu"
    usual = pjit._pjit_call_impl_python

    def checked(*args, jaxpr, **params):
        if all(hasattr(a, "shape") for a in args):  # arrays only: a token or effect is the CPU's own
            # compiled as the chip would compile it: with the options jaxdev adds for it there
            _check(jaxpr, args, exec_cache.compiler_options(jaxpr, params.get("compiler_options_kvs", ())))
        return usual(*args, jaxpr=jaxpr, **params)

    checked.usual = usual
    pjit._pjit_call_impl_python = checked
    forget_platform()


def forget_platform() -> None:
    """What jaxdev worked out from the platform so far, forgotten, when the platform it sees changes
    (install(); benchmarks/tpu_aot.py's as_tpu): JAX's caches, and jaxdev's functools caches
    (capabilities.platform, dtypes.refused_here, the kit's jitted bodies, whose traces a later
    program would inline), and JAXDEV_MATH's reading: unset, it is the platform's default (auto on CPU,
    near on a TPU), and a step recorded on CPU then traced as_tpu took auto's functions; and the keys the
    per-op memo and foreach kernels learned (their programs were traced for the platform before)."""
    import jax

    jax.clear_caches()
    math_mode = sys.modules.get("jaxdev.ops.kit.math_mode")
    if math_mode is not None:
        math_mode.forget()
    native = sys.modules.get("jaxdev.native")
    if native is not None and native.module is not None:
        native.module.forget_replays()  # the memo and foreach kernels' keys hold no platform facts
    for name, module in list(sys.modules.items()):
        if name.startswith("jaxdev") and module is not None:
            for value in list(vars(module).values()):
                if isinstance(value, functools._lru_cache_wrapper):
                    value.cache_clear()


def installed() -> bool:
    from jax._src import pjit

    return hasattr(pjit._pjit_call_impl_python, "usual")


def probe() -> None:
    """Print what a probe of a worker's platform prints (platforms.Probe): name, then device kind;
    where libtpu is missing, the sentence that says so, as the child's last word."""
    try:
        device()
    except Unavailable as e:
        sys.exit(str(e))
    print(NAME)
    print(KIND)
