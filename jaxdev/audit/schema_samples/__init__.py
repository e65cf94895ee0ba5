"""Direct trials: an aten overload that no OpInfo sample reaches, run on `jax:0` and on CPU with
inputs built from its schema, and compared.

Inputs. Every argument is built from its schema type (torch._C schema, `real_type`) and its name:
tensors are small seeded random tensors (normal floats, integers in [0, 3), random bools), all of
one shape and dtype per candidate, except index-like arguments (`index`, `indices`, ...: int64 in
[0, 2]); optional arguments take their default (None when they have none); ints, int lists, floats,
strings and Scalars take small plausible values chosen by the argument's name (`dim` 0,
`kernel_size` 2s, `stride` 1s, `size` the tensors' shape, `reduce` "sum", ...); out= tensors are
empty and resized by the op. Candidates are tried in order (shapes (3, 3), (2, 3, 3), (5,), (),
(2, 3, 4, 4), ... times dtypes float32, int64, bool, complex64, float64, times out= dtypes) until
CPU accepts one; that one is run on jax and compared. A CPU that rejects every candidate gives
`untriable` ("no valid sample found"): the schema alone did not tell how to call it, which says
nothing about jax. Candidate order: arguments captured from OpInfo samples of a sibling overload
(donors), then the family's argument builder where facts.arguments has one (consistent shapes for
convolutions, RNNs, fused optimisers, losses, backward ops, ...), then the schema-built ones. An
out= overload first takes its out= dtypes (and count, and then also sizes) from its functional
overload's results on the same inputs (LIKE, LIKE_SIZED).

Judging reuses the auditor's rules (check.py): `compare` for values, dtypes and shapes (the
dtype's assert_close tolerances), `stride_mismatch`, `exception_status` for a raise on jax, and
the fallback counter. The result is the op's return value plus every argument the schema marks as
written (in-place self, out=). Allocations of uninitialised memory (empty*) and ops whose CPU
results differ between runs under other seeds (random ops, unless these inputs leave nothing
random: dropout 0) are compared by shape and dtype only. Decompositions whose factors are unique
only up to signs, phases or order (svd, eig, eigh, qr: GAUGE) are compared gauge-free when they
differ as they are.

Trials run in worker processes (work.py), one
overload at a time with a time limit: a crash or a hang costs that overload, not the run. The
worker says which phase it is in (cpu: searching a candidate; jax: running it) so the parent can
tell a CPU kernel that crashed (untriable) from a jax one (fails, crash/timeout).
"""

from jaxdev.audit.schema_samples.build import candidates
from jaxdev.audit.schema_samples.donors import describe, donor_candidates
from jaxdev.audit.schema_samples.gauge import gauge_free
from jaxdev.audit.schema_samples.static import static_untriable
from jaxdev.audit.schema_samples.trial import trial
from jaxdev.audit.schema_samples.values import fit
from jaxdev.audit.schema_samples.work import DEFAULT_TIMEOUT_S, run_trials

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "candidates",
    "describe",
    "donor_candidates",
    "fit",
    "gauge_free",
    "run_trials",
    "static_untriable",
    "trial",
]
