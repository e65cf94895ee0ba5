"""More than one device: a mesh under the one logical `jax:0`, torch.distributed's "jax" backend, and
the collectives, eager and inside compiled programs.

mesh.py (sharded storages, `jaxdev.set_mesh`/`shard`/`distribute`), distributed.py (the process-group
backend "jax"), functional_collectives.py (DTensor's and FSDP2's collectives, eagerly),
compiled_collectives.py (a compiled graph's collectives as one SPMD program per rank)."""
