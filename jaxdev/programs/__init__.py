"""The XLA programs jaxdev compiles, kept and bounded: nothing here knows a tensor.

cache.py (JAX's persistent compilation cache, its directory and trimming), exec_cache.py (executables
kept on disk by their program's content), program_keys.py (that content as a stable key),
exact_programs.py (programs without floating-point arithmetic, compiled with less optimization),
executables.py (the bound on the executables one process holds)."""
