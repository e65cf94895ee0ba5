"""AOTAutograd's graphs kept on disk for the `jax` backend: a second process compiling the same
model skips AOTAutograd's functionalisation, joint-graph trace and partition.

PyTorch keeps AOTAutograd's results between processes (AOTAutogradCache) for a backend whose
compilers return a serializable `OutputCode`: inductor's, and any backend that hands AOTAutograd a
`SerializableAOTDispatchCompiler` while the cache runs "bundled" (the compiled graph pickled into the
entry itself rather than looked up in inductor's FX graph cache). `GraphProgram` pickles as its aten
graph (no traced or compiled state), so jaxdev's compilers qualify: a hit gives the forward, backward
or inference graph back, and its XLA program is then traced, and loaded from JAX's persistent cache,
at its first call as after a miss.

What the backend changes, only while it compiles (config patches, nothing global):
* `bundled_autograd_cache`, so entries hold jaxdev's graphs;
* `force_non_lazy_backward_lowering`, so the backward graph is handed over, and the entry written,
  while the forward compiles (a backward compiled later, lazily, would be compiled outside this
  patch and could not be saved);
* inductor's `post_grad_custom_post_pass` names jaxdev (`_Key`): the pass never runs (inductor does
  not), but its uuid enters the cache key, so an entry of jaxdev's is never an inductor entry and
  changes with jaxdev's source, torch, jax and jaxlib;
* the entries live in jaxdev's cache directory, `<JAXDEV_CACHE_DIR>/aotautograd/<fingerprint>`,
  not in inductor's.

    JAXDEV_COMPILE_CACHE=on      the AOTAutograd cache for the jax backend (off by default: see
                                 jaxdev/programs/cache.py's compile_caches_on;
                                 JAXDEV_CACHE_DIR=off turns it off too;
                                 PyTorch's own switches, TORCHINDUCTOR_AUTOGRAD_CACHE=0 and
                                 torch.compiler.config.force_disable_caches, are obeyed)
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from jaxdev.programs import cache

SUBDIR = "aotautograd"


def directory() -> str | None:
    root = cache.directory()
    return os.path.join(root, SUBDIR, cache.fingerprint()) if root else None


def _types():
    """The classes that need torch._inductor (imported at the first compile, not with jaxdev)."""
    from jaxdev.compiler import output_code

    return output_code.ProgramCode, output_code.Key


def wrap(program) -> Any:
    """The compiler's result: `program` as an OutputCode, which AOTAutograd can cache."""
    ProgramCode, _ = _types()
    return ProgramCode(program=program)


def serializable(compile_graph):
    """`compile_graph` as a compiler AOTAutograd may cache the results of."""
    from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler

    ProgramCode, _ = _types()
    return SerializableAOTDispatchCompiler(ProgramCode, compile_graph)


@contextlib.contextmanager
def caching():
    """Around one dynamo graph's compilation by the jax backend: AOTAutograd's cache on, bundled,
    keyed and placed as jaxdev's (see the module's docstring); a no-op when the cache is off."""
    path = directory() if cache.compile_caches_on() else None
    if path is None:
        with _patched(enable_autograd_cache=False):
            yield
        return
    import torch._inductor.config as inductor_config
    from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCache

    _, key = _types()
    with (
        _patched(bundled_autograd_cache=True, force_non_lazy_backward_lowering=True),
        inductor_config.patch(post_grad_custom_post_pass=key(), fx_graph_cache=True),
        _tmp_dir(AOTAutogradCache, path),
    ):
        yield


def _patched(**values):
    import torch._functorch.config as functorch_config

    return functorch_config.patch(**values)


@contextlib.contextmanager
def _tmp_dir(cls, path: str):
    """AOTAutogradCache's directory is `cache_dir()/aotautograd`, inductor's; jaxdev's entries go to `path`."""
    original = cls.__dict__["_get_tmp_dir"]
    cls._get_tmp_dir = classmethod(lambda _cls: path)
    try:
        yield
    finally:
        cls._get_tmp_dir = original
