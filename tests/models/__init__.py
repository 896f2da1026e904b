"""Real models, written the way their libraries ship and document them
(jax's own examples and stax, flax.linen, flax.nnx, equinox, haiku, optax
losses), each checked whole by `oracle.check(loss, policy, params, batch)`
under every policy of `zoo.POLICIES`. See README.md in this folder."""
