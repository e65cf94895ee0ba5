"""XLA executables kept on disk by their program's content: a new process that meets a program an
earlier one compiled loads the executable without lowering the program or hashing the lowered module.

Measured on this workload (benchmarks/new_shapes.py: small views, elementwise ops, reductions and
indexing on new shapes, warm persistent cache): every new program still cost 16 ms in a fresh process,
1 ms tracing, 9 ms lowering to StableHLO, 4 ms computing JAX's cache key from the lowered module and
loading the executable. JAX's persistent cache is keyed by the lowered module, so it cannot skip the
lowering. This cache is keyed by what the lowering reads (jaxdev/programs/program_keys.py: the traced jaxpr with
its constants, the arguments' types and placements, the call's shardings, layouts and donations, the
JAX settings), so a hit costs the trace, the key and a load.

The hook sits where JAX compiles a jitted call's program after a miss in jit's own cache
(`pjit._pjit_call_impl_python`): every program jaxdev's kernels run passes there, and the
executable it returns feeds jit's fast path as a compiled one does, so calls after the first cost
what they cost before. A hit runs the executable XLA compiled for the same program in an earlier
process (serialized whole: `jax.experimental.serialize_executable`'s format), so results are the
same bits as compiling it again. Programs with effects (host callbacks), over several devices or
with anything the key cannot encode are compiled as before (and kept in JAX's own cache).

Entries live in `<JAXDEV_CACHE_DIR>/executables/<fingerprint>/` (jax, jaxlib, Python, the backend's
platform and version, XLA_FLAGS) and are trimmed with the rest of the cache (jaxdev/programs/cache.py).
A damaged or unreadable entry is ignored and the program compiled again.

    JAXDEV_EXEC_CACHE=off        no executable cache (JAX's persistent cache stays on)
"""

from __future__ import annotations

import collections
import contextlib
import functools
import hashlib
import io
import os
import sys
import tempfile
import threading
import time

import jax

from jaxdev.programs import cache, compile_effort, exact_programs, executables, program_keys

ENV = "JAXDEV_EXEC_CACHE"
SUBDIR = "executables"
FORMAT = 1  # the entry layout; a change starts a new folder
_OFF = ("0", "off", "none", "false", "no")


class STATS:
    """This process's executable cache traffic."""

    hits = 0  # executables loaded instead of lowered and compiled
    saves = 0  # executables compiled here and written
    unkeyed = 0  # programs the key could not encode (compiled as before)
    failed = 0  # entries that loaded but did not run (compiled again)
    key_s = load_s = save_s = 0.0  # seconds spent keying programs, loading and writing entries


_ORIGINAL = None
_JAX_READS = None  # JAX's persistent cache: (get_executable_and_time, extract_executable_and_time)
# read: (executable, its bytes) JAX's persistent cache gave this thread's last compile, else None;
# pending: the bytes of the entry JAX's cache is reading
_local = threading.local()
# Every executable JAX's persistent cache gave this process, by id: (executable, the bytes it was read
# from). JAX's in-memory compile cache hands the same executable to a later program with the same
# module (a second key: other argument placements), whose entry must hold those bytes too: written
# from the executable it would not run in the next process ("Function wrapped_add not found").
_DESERIALIZED: collections.OrderedDict = collections.OrderedDict()
_DESERIALIZED_KEPT = 4096


def enabled() -> bool:
    return cache.directory() is not None and os.environ.get(ENV, "on").strip().lower() not in _OFF


@functools.cache
def _fingerprint(platform: str, version: str, kinds: tuple, flags: tuple) -> str:
    import jaxlib

    parts = (FORMAT, jax.__version__, jaxlib.__version__, sys.version, platform, version, kinds, flags)
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:24]


def fingerprint(backend) -> str:
    """What an entry is valid for: this format, jax, jaxlib, Python, the backend's platform, version
    and device kinds, and the XLA flags the environment gives."""
    kinds = tuple(sorted({getattr(d, "device_kind", "") for d in backend.devices()}))
    flags = (os.environ.get("XLA_FLAGS", ""), os.environ.get("LIBTPU_INIT_ARGS", ""))
    return _fingerprint(backend.platform, backend.platform_version, kinds, flags)


def directory(backend) -> str | None:
    root = cache.directory()
    if root is None:
        return None
    return os.path.join(root, SUBDIR, fingerprint(backend))


def install() -> None:
    """Put the cache in JAX's compile path (once; `enabled()` is asked at every program)."""
    global _ORIGINAL, _JAX_READS
    from jax._src import compilation_cache, pjit
    from jax.experimental import serialize_executable

    needed = (
        (pjit, ("_pjit_call_impl_python", "convert_to_metaty")),
        (compilation_cache, ("get_executable_and_time", "extract_executable_and_time")),
        (serialize_executable, ("_JaxPjrtPickler", "_JaxPjrtUnpickler")),
    )
    if not all(hasattr(module, name) for module, names in needed for name in names):
        return  # a JAX whose internals moved: its own persistent cache only
    if _ORIGINAL is None:
        _ORIGINAL = pjit._pjit_call_impl_python
        _JAX_READS = compilation_cache.get_executable_and_time, compilation_cache.extract_executable_and_time
        pjit._pjit_call_impl_python = _call_impl_python
        compilation_cache.get_executable_and_time = _read_jax_entry
        compilation_cache.extract_executable_and_time = _jax_entry_bytes


def _read_jax_entry(*args, **kwargs):
    """JAX's persistent cache read, noting the bytes of an executable it gives: an executable XLA:CPU
    deserialized serializes again without its compiled functions (the copy loads, then fails to run:
    "Function ... not found"), so an entry of ours made from it holds the bytes JAX read."""
    _local.pending = None
    executable, compile_time = _JAX_READS[0](*args, **kwargs)
    if executable is not None and _local.pending is not None:
        _local.read = (executable, _local.pending)
        _DESERIALIZED[id(executable)] = _local.read
        _DESERIALIZED.move_to_end(id(executable))
        while len(_DESERIALIZED) > _DESERIALIZED_KEPT:
            _DESERIALIZED.popitem(last=False)
    return executable, compile_time


def _jax_entry_bytes(*args, **kwargs):
    serialized, compile_time = _JAX_READS[1](*args, **kwargs)
    _local.pending = serialized
    return serialized, compile_time


def compiler_options(jaxpr, options: tuple) -> tuple:
    """A new program's compiler options (`options`, its call's own) with jaxdev's choices added: the
    cheaper compile of an exact program (exact_programs.py), the per-op compile effort
    (compile_effort.py). Part of an entry's key: a program compiled otherwise is another entry. The
    stand-in for a TPU compiles with them too (jaxdev/audit/deviceless.py)."""
    if exact_programs.wanted(options) and exact_programs.exact(jaxpr):
        options = (*options, exact_programs.OPTION)
    effort = compile_effort.option(options)
    return options if effort is None else (*options, effort)


def _call_impl_python(*args, **params):
    t0 = time.perf_counter()
    params["compiler_options_kvs"] = compiler_options(params["jaxpr"], params["compiler_options_kvs"])
    path, backend = _entry(args, params)
    t1 = time.perf_counter()
    STATS.key_s += t1 - t0
    if path is not None:
        compiled = _load(path, backend)
        STATS.load_s += time.perf_counter() - t1
        if compiled is not None and _libraries_ready():
            try:
                out = compiled.unsafe_call(*args)
            except jax.errors.JaxRuntimeError:  # an entry XLA cannot run: compiled again, rewritten
                STATS.failed += 1
            else:
                STATS.hits += 1
                executables.counted += 1  # an executable mapped like a compiled one
                return out, compiled, None, []
    _local.read = None
    out = _ORIGINAL(*args, **params)
    if path is not None and len(out) == 4 and not out[3]:  # not when constants travel as arguments
        t0 = time.perf_counter()
        _save(path, out[1], _local.read)
        STATS.save_s += time.perf_counter() - t0
    return out


@functools.cache
def _libraries_ready() -> bool:
    """A loaded executable skips the lowering, and JAX's lowering rules for the CPU's linalg custom calls
    are what load LAPACK's function pointers (jaxlib's `_lapack.initialize()`, called lazily by each
    rule): a cholesky or det loaded before any linalg op was lowered in the process ran through null
    pointers and crashed (SIGSEGV in CI's gate: linalg.cholesky, linalg.det). The first hit of a process
    initializes them (~80 ms, scipy's LAPACK included); where this jaxlib has no such call, no entry is
    used (every program compiles as before)."""
    try:
        from jax._src.lib import lapack

        lapack._lapack.initialize()
    except Exception:
        return False
    return True


def _entry(args, params):
    """(the entry's path, the backend) for this call, or (None, None) where it is not cached."""
    if not enabled() or getattr(jax.config, "jax_enable_pgle", False) or jax.process_count() > 1:
        # several processes (jax.distributed): an executable holds its device assignment over the
        # global device list, which a process alone never had (tests/test_distributed.py failed)
        return None, None
    try:
        name = program_keys.program_key(args, params)
        backend = _backend(args)
    except Exception:  # Unkeyable, or an object the encoding could not read: compiled as before
        STATS.unkeyed += 1
        return None, None
    folder = directory(backend)
    return (os.path.join(folder, name), backend) if folder else (None, None)


def _backend(args):
    """The one backend the call runs on: its arguments' device's, or the default device's."""
    devices = {d for a in args for d in getattr(getattr(a, "sharding", None), "device_set", ())}
    if len(devices) > 1:
        raise program_keys.Unkeyable("several devices")
    device = next(iter(devices)) if devices else (jax.config.jax_default_device or jax.devices()[0])
    if isinstance(device, str):
        raise program_keys.Unkeyable("default device by name")
    return device.client


def _load(path: str, backend):
    from jax.experimental import serialize_executable

    try:
        with open(path, "rb") as f:
            blob = f.read()
        unloaded = serialize_executable._JaxPjrtUnpickler(io.BytesIO(blob), backend).load()
        return unloaded.load()
    except FileNotFoundError:
        return None
    except Exception:  # a damaged entry, or one this jax cannot read: compiled again and rewritten
        return None


@functools.cache
def _pickler():
    from jax.experimental import serialize_executable

    class Pickler(serialize_executable._JaxPjrtPickler):
        """jax's pickler of executables, writing the bytes JAX's cache read for the executable it gave."""

        def __init__(self, file, read):
            super().__init__(file)
            self.read, self.used_read = read, False

        def persistent_id(self, obj):
            if self.read is not None and obj is self.read[0]:
                self.used_read = True
                return ("exec", self.read[1])
            earlier = _DESERIALIZED.get(id(obj))
            if earlier is not None and earlier[0] is obj:  # read from JAX's cache for another program
                return ("exec", earlier[1])
            return super().persistent_id(obj)

    return Pickler


def _save(path: str, compiled, read) -> None:
    """Write `compiled`'s entry; `read`: (executable, bytes) where JAX's persistent cache gave it."""
    unloaded = getattr(compiled, "_unloaded_executable", None)
    if unloaded is None:
        return
    try:
        with io.BytesIO() as buffer:
            pickler = _pickler()(buffer, read)
            pickler.dump(unloaded)
            if read is not None and not pickler.used_read:
                return  # JAX's cache gave an executable this entry would not hold: not kept
            data = buffer.getvalue()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    except Exception:  # not serializable (host callbacks), or the disk refused: compiled, not kept
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # whole or absent: a reader never sees half an entry
        STATS.saves += 1
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(tmp)
