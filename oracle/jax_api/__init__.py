"""The one door to JAX's internals (every release from 0.4.25 to 0.10.2).

Everything the oracle reaches below JAX's public API — `jax._src` modules,
primitives, flags, the custom_jvp/custom_vjp call protocols, debug info,
policy objects — is reached through this package, keyed by capabilities
probed on the installed release (`capabilities()`), never by comparing
version numbers:

  capabilities  what the installed release has (probed once, cached)
  flags         the remat implementations it has, selecting one, the
                flags reports and reproducers carry
  internals     JAX's internal objects and call protocols, in one spelling
  source        release-specific source text that reproducers embed (the
                emitter table's spellings, the flags' settings)
"""
from oracle.jax_api import internals  # noqa: F401
from oracle.jax_api.capabilities import (Capabilities, capabilities, compiler_options,  # noqa: F401
                                          cpu_compiler_options, default_compilation)
from oracle.jax_api.flags import (enable_x64, environment, flag_settings_source, implementation,  # noqa: F401
                                  implementations, unavailable)
