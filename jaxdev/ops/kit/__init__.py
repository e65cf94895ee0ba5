"""The kernel author's kit: what every op family uses, in one place (its modules by concern).

Families import this module and the registry, never each other. It holds:
* arguments: `J` (a tensor argument's jax.Array), `value` (tensors or Python scalars),
  `any_device` (index tensors may live on CPU, as with CUDA), `wrap_dim` / `axes` (PyTorch's dim
  rules and errors);
* dtypes: `opmath` (the dtype a half-precision op computes in), `float_of`, `cast` (as copy_ casts),
  and the names PyTorch prints (`dtypes.scalar_name`: "Float", `dtypes.name`: "float32");
* the one jit policy, `jitted`: a kernel body is built once per static signature and jitted;
* `product_precision` / `matmul` / `matmul_over_rows`: products at the device's precision;
* `apply`: run an elementwise body on tensors cast to a compute dtype, cast to the result dtype;
* `sort_key` / `stable_sort`: PyTorch's order (NaN last, -0.0 == 0.0, stable ties);
* `add_at` / `multiply_at` / `check_index_bounds`: accumulation and bounds as PyTorch does them.
"""

from jaxdev.ops.kit.arguments import J, accumulate_dtype, any_device, cast, float_of, opmath, result_type, value
from jaxdev.ops.kit.bodies import (
    applied_body,
    apply,
    on_views,
    plain,
    rows_of,
    same_dtype_bodies,
    typed_bodies,
    unflattened,
)
from jaxdev.ops.kit.dims import axes, each_location_once, wrap_dim
from jaxdev.ops.kit.index_checks import add_at, check_index_bounds, multiply_at, outside
from jaxdev.ops.kit.jit import compiled, jitted, program, zeros
from jaxdev.ops.kit.ordering import sort_key, stable_sort
from jaxdev.ops.kit.precision import matmul, matmul_over_rows, product_precision, widened_product_precision

__all__ = [
    "J",
    "accumulate_dtype",
    "add_at",
    "any_device",
    "applied_body",
    "apply",
    "axes",
    "cast",
    "check_index_bounds",
    "compiled",
    "each_location_once",
    "float_of",
    "jitted",
    "matmul",
    "matmul_over_rows",
    "multiply_at",
    "on_views",
    "opmath",
    "outside",
    "plain",
    "product_precision",
    "program",
    "result_type",
    "rows_of",
    "same_dtype_bodies",
    "sort_key",
    "stable_sort",
    "typed_bodies",
    "unflattened",
    "value",
    "widened_product_precision",
    "wrap_dim",
    "zeros",
]
