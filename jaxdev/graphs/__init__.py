"""The graph engine: an FX graph of aten ops run as one jitted JAX program through jaxdev's own kernels.

Two users: torch.compile(backend="jax") hands it the graphs AOTAutograd captures (jaxdev/compiler/), and
fused eager hands it the ops it recorded (jaxdev/fused/). program.py (GraphProgram: one specialisation
per input layout, traced and compiled once), inputs.py (a call's layout and its key), planned.py
(results laid out as the graph planned them), program_cache.py (programs kept on disk; opt-in)."""
