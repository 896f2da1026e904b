"""Record what jax.checkpoint does with jax.debug.print and
jax.debug.callback (the debug_print and debug_callback primitives, effects
with no outputs) under jax.grad.

    python tests/record_jax_debug_print.py   # rewrites tests/recordings/debug_print.json

For each program of PROGRAMS and each policy (installed `jax.__version__`),
"programs" (jax.debug.print) holds:

* "prints": how many times the print runs in `jax.grad(jax.checkpoint(f,
  policy), argnums=<every argument>)` (stdout captured, after
  jax.effects_barrier()), jitted;
  "prints_remat3": the same with jax_remat3 on;
* "forward" / "backward": the debug_print equations of
  `jax.make_jaxpr(jax.grad(...))` outside the differentiated remat (the
  forward pass) and inside it (the backward pass), under remat2.

"callbacks" holds the same programs with `jax.debug.callback(fn, value,
ordered=...)` in place of the print, keyed "program/policy/ordered" or
".../unordered": "calls" (and "calls_remat3") is how many times `fn` runs,
counted by a Python counter in `fn`; "forward" / "backward" count
debug_callback equations.

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


def programs(effect):
    """name -> (fn, args); `effect(name, value)` prints or calls back. The
    values: an intermediate (named "s"), an input, a dot output that
    nothing else in the backward pass reads."""
    import jax.numpy as jnp
    import numpy as np
    from jax.ad_checkpoint import checkpoint_name

    def print_intermediate(x):
        s = checkpoint_name(jnp.sin(x), "s")
        effect("s", s)
        return jnp.sum(s * x)

    def print_input(x):
        effect("x", x)
        return jnp.sum(jnp.sin(x))

    def print_dot(x, w):
        y = x @ w
        effect("y", y)
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


def _count(jaxpr, primitive, inside=False):
    """(`primitive` equations outside any differentiated remat, inside one)."""
    out = [0, 0]
    for e in jaxpr.eqns:
        if e.primitive.name == primitive:
            out[inside] += 1
        for sub in (v for v in e.params.values() if hasattr(v, "eqns") or hasattr(v, "jaxpr")):
            sub = getattr(sub, "jaxpr", sub)
            a, b = _count(sub, primitive, inside or (e.primitive.name == "remat2" and e.params.get("differentiated")))
            out[0] += a
            out[1] += b
    return out


@contextlib.contextmanager
def remat3(on: bool):
    """jax_remat3 on or off for the duration (tracing caches cleared: they
    are not keyed on it)."""
    import jax
    old = jax.config.jax_remat3
    jax.config.update("jax_remat3", on)
    jax.clear_caches()
    try:
        yield
    finally:
        jax.config.update("jax_remat3", old)
        jax.clear_caches()


def _run(fn, args, pol, *, use_remat3=False):
    """Run jit(grad(checkpoint(fn, pol))) to completion (effects included)."""
    import jax
    with remat3(use_remat3):
        g = jax.grad(jax.checkpoint(fn, policy=policy(pol)), argnums=tuple(range(len(args))))
        jax.block_until_ready(jax.jit(g)(*args))
        jax.effects_barrier()


def _grad_jaxpr(fn, args, pol):
    import jax
    g = jax.grad(jax.checkpoint(fn, policy=policy(pol)), argnums=tuple(range(len(args))))
    return jax.make_jaxpr(g)(*args).jaxpr


def record_prints() -> dict:
    import jax
    progs = programs(lambda name, v: jax.debug.print(f"{name}={{{name}}}", **{name: v}))
    out = {}
    for name, (fn, args) in progs.items():
        for pol in POLICIES:
            counts = []
            for use_remat3 in (False, True):
                buf = io.StringIO()
                with contextlib.redirect_stdout(buf):
                    _run(fn, args, pol, use_remat3=use_remat3)
                counts.append(buf.getvalue().count("="))
            forward, backward = _count(_grad_jaxpr(fn, args, pol), "debug_print")
            out[f"{name}/{pol}"] = {"prints": counts[0], "prints_remat3": counts[1],
                                    "forward": forward, "backward": backward}
    return out


def record_callbacks() -> dict:
    import jax
    out = {}
    for ordered in (False, True):
        calls = [0]

        def count_call(value):
            calls[0] += 1
        progs = programs(lambda name, v: jax.debug.callback(count_call, v, ordered=ordered))
        for name, (fn, args) in progs.items():
            for pol in POLICIES:
                counts = []
                for use_remat3 in (False, True):
                    calls[0] = 0
                    _run(fn, args, pol, use_remat3=use_remat3)
                    counts.append(calls[0])
                forward, backward = _count(_grad_jaxpr(fn, args, pol), "debug_callback")
                key = f"{name}/{pol}/{'ordered' if ordered else 'unordered'}"
                out[key] = {"calls": counts[0], "calls_remat3": counts[1], "forward": forward,
                            "backward": backward}
    return out


def record() -> dict:
    import jax
    return {"jax": jax.__version__, "programs": record_prints(), "callbacks": record_callbacks()}


if __name__ == "__main__":
    with open(RECORDING, "w") as f:
        json.dump(record(), f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {RECORDING}")
