"""Record what jax.checkpoint does with jax.debug.print (the debug_print
primitive, an effect with no outputs) under jax.grad.

    python tests/record_jax_debug_print.py   # rewrites tests/recordings/debug_print.json

For each program of PROGRAMS and each policy (installed `jax.__version__`):

* "prints": how many times the print runs in `jax.grad(jax.checkpoint(f,
  policy))` (stdout captured, after jax.effects_barrier()), jitted;
* "forward" / "backward": the debug_print equations of
  `jax.make_jaxpr(jax.grad(...))` outside the differentiated remat (the
  forward pass) and inside it (the backward pass).

tests/test_prims_debug.py compares the spec against this file without
importing jax (the same programs written with spec ops).
"""
from __future__ import annotations

import contextlib
import io
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDING = os.path.join(HERE, "recordings", "debug_print.json")
POLICIES = ("none", "dots_saveable", "everything_saveable", "save_s")


def programs():
    """name -> (fn, args). The printed values: an intermediate (named "s"),
    an input, a dot output that nothing else in the backward pass reads."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.ad_checkpoint import checkpoint_name

    def print_intermediate(x):
        s = checkpoint_name(jnp.sin(x), "s")
        jax.debug.print("s={s}", s=s)
        return jnp.sum(s * x)

    def print_input(x):
        jax.debug.print("x={}", x)
        return jnp.sum(jnp.sin(x))

    def print_dot(x, w):
        y = x @ w
        jax.debug.print("y={}", y)
        return jnp.sum(y)

    x = np.linspace(-1.0, 1.0, 3, dtype=np.float32)
    m = np.ones((2, 3), np.float32)
    w = np.full((3, 2), 0.5, np.float32)
    return {"print_intermediate": (print_intermediate, (x,)), "print_input": (print_input, (x,)),
            "print_dot": (print_dot, (m, w))}


def policy(name):
    import jax
    return {"none": None, "dots_saveable": jax.checkpoint_policies.dots_saveable,
            "everything_saveable": jax.checkpoint_policies.everything_saveable,
            "save_s": jax.checkpoint_policies.save_only_these_names("s")}[name]


def _count(jaxpr, inside=False):
    """(debug_prints outside any differentiated remat, inside one)."""
    out = [0, 0]
    for e in jaxpr.eqns:
        if e.primitive.name == "debug_print":
            out[inside] += 1
        for sub in (v for v in e.params.values() if hasattr(v, "eqns") or hasattr(v, "jaxpr")):
            sub = getattr(sub, "jaxpr", sub)
            a, b = _count(sub, inside or (e.primitive.name == "remat2" and e.params.get("differentiated")))
            out[0] += a
            out[1] += b
    return out


def record() -> dict:
    import jax
    result = {"jax": jax.__version__, "programs": {}}
    for name, (fn, args) in programs().items():
        for pol in POLICIES:
            g = jax.grad(jax.checkpoint(fn, policy=policy(pol)))
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                jax.block_until_ready(jax.jit(g)(*args))
                jax.effects_barrier()
            forward, backward = _count(jax.make_jaxpr(g)(*args).jaxpr)
            result["programs"][f"{name}/{pol}"] = {
                "prints": buf.getvalue().count("="), "forward": forward, "backward": backward}
    return result


if __name__ == "__main__":
    with open(RECORDING, "w") as f:
        json.dump(record(), f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {RECORDING}")
