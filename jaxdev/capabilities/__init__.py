"""What a PyTorch device offers beside its kernels, one capability a module (as PyTorch's OpenReg lays
them out); each installs itself when `import jaxdev` calls its `install`.

memory.py, streams.py (torch.jax's memory, stream and event API), generator.py (torch.Generator on
jax), pinned.py (pinned host memory), autocast.py (torch.autocast("jax")), accelerators.py (one
accelerator per process), host_methods.py (Tensor.apply_/map_/map2_), parameters.py (weight ties kept
across moves), serialization.py (torch.load and deepcopy of storages), shutdown.py (a fast exit),
interop.py (jaxdev.to_jax / from_jax), custom_ops.py (jaxdev.jax_op)."""
