"""The auditor as a library: what reaches the `jax` device, how well it works, and what changed.

One module per concern: `dispatch` (dispatcher introspection), `samples` (OpInfo samples),
`runner` (worker processes), `matrix` (the YAML coverage matrix), `explain`, `gate`, `report`.
`lookup` (entries of the committed YAML), `schemas` (torch's operator schemas, cached) and
`listing` let `explain` and `ops` answer without the device. The CLI in `jaxdev.cli` only parses
arguments and renders what these return.
"""


class AuditError(Exception):
    """A mistake the user can fix (bad name, bad file, bad option): shown as one sentence, no traceback."""
