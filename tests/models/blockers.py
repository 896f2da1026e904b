"""What each model currently stops at: the one table of primitives the spec
does not model yet, per model, as measured (`python -m models.blockers`
from tests/ prints the measured table).

A model listed here is a strict xfail raising oracle.Unsupported under every
policy (tests/models/test_models.py); the Unsupported must name a primitive
of its entry. When a primitive lands in spec/, the model's xfail flips
(XPASS strict fails, or the Unsupported names a primitive not listed) and
`test_blockers_are_measured` names the entries to drop: update the table
from the measurement.

Entries are in the order the oracle meets them (the first is the one it
stops at). Primitives that appear only in a custom rule JAX traces lazily
(a custom_jvp's JVP) are not seen by the measurement; none is listed now.
"""
from __future__ import annotations

import re

# model -> missing primitives (JAX names), measured with jax 0.10.2
BLOCKERS: dict[str, tuple[str, ...]] = {
}

CONTAINERS = ("jit", "pjit", "closed_call", "remat2", "checkpoint", "scan", "cond", "while",
              "call_hi_primitive", "custom_jvp_call", "custom_vjp_call")


def stops_at(message: str) -> str:
    """The primitive an oracle.Unsupported message names."""
    m = re.search(r"primitive '([\w\-]+)'", message)
    if m:
        return m.group(1)
    if "is a PRNG key" in message:
        return "PRNG key argument"
    m = re.match(r"\s*([\w\-]+)", message)
    return m.group(1) if m else message


def trace(case):
    """The model's loss as a ClosedJaxpr (its arguments as oracle.check passes
    them: oracle.conventions.bind, so an equinox Module's non-array leaves
    are static)."""
    import jax
    from oracle.conventions import bind
    call = bind(case.loss, case.args, case.kwargs)
    args, kwargs = call.dynamic(call.jax_leaves)
    return jax.make_jaxpr(call.function())(*args, **kwargs)


def measure(case, jaxpr=None) -> tuple[str, ...]:
    """The primitives of the model's jaxpr (every nested jaxpr included)
    that the oracle's importer refuses, in program order."""
    from oracle.errors import Unsupported
    from oracle.from_jax import subjaxprs
    from oracle.jax_api import internals
    from oracle.jax_params import spec_params
    jaxpr = trace(case) if jaxpr is None else jaxpr
    found: dict[str, None] = {}

    def walk(jx):
        for e in jx.eqns:
            # as the importer reads it: jax 0.10.2's names on every release
            name, params = internals.canonical_eqn(e.primitive.name, dict(e.params), [v.aval for v in e.invars])
            if name in CONTAINERS:
                for sub in subjaxprs(e):
                    walk(sub)
                continue
            try:
                spec_params(name, params)
            except Unsupported as err:
                found.setdefault(stops_at(str(err)), None)
    walk(jaxpr.jaxpr)
    return tuple(found)


def main():
    from .zoo import load_all
    for name, m in load_all().items():
        print(f"    {name!r}: {measure(m.build())!r},")


if __name__ == "__main__":
    main()
