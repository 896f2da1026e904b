"""The bridge between the spec and real JAX (imports jax; `spec` never does).

jax itself is imported inside the functions that use it (the remaining
function-level imports of oracle/, besides a few import cycles, each
commented): `import oracle` stays quick for the campaign CLI and its
workers, and the version layer (oracle.jax_api) probes the installed
release only when a check runs."""
from oracle.errors import InvalidArgument, Mismatch, Unsupported  # noqa: F401
from oracle.conventions import AS_IS, Factory  # noqa: F401
from oracle.from_jax import from_jaxpr, trace_jax  # noqa: F401
from oracle.to_jax import to_jax  # noqa: F401
from oracle.policies import from_jax_policy, to_jax_policy  # noqa: F401
from oracle.checker import Report, check, expected_residuals, explain  # noqa: F401
