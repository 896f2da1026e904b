"""The naive differential check: the baseline `bench_fuzz.py` measures the
oracle's full check against (issue 16).

What a careful engineer writes first, without the oracle's machinery: for
each implementation (remat2, remat3) each property is its own `jax.jit`,
traced, lowered and compiled on its own, and run once; the reference is the
spec evaluated eagerly on the same operands; the numbers are compared with
numpy. The properties are the oracle's compiled tier (values, JVP, VJP,
vmap, forward-over-reverse second order) and its jaxpr tier (saved
residuals), so both sides answer the same questions about the same program.
"""
from __future__ import annotations

import numpy as np

import spec
from spec.ir import is_float


def _float_positions(types) -> list[int]:
    return [i for i, t in enumerate(types) if is_float(t.dtype)]


def _with(values, positions, replacements):
    values = list(values)
    for i, v in zip(positions, replacements):
        values[i] = v
    return values


def _attempt(answers: dict, name: str, compute):
    """answers[name] = compute(), or the exception it raised (a program
    with a custom_vjp has no forward mode, one with a while loop no reverse
    mode: the naive check tries and pays for it, as a first version would)."""
    try:
        answers[name] = compute()
    except Exception as e:  # noqa: BLE001 -- a timing baseline records, never judges
        answers[name] = e


def _jax_answers(f, prog, args, tangents, cts, batched):
    """Each property of the JAX function `f` jitted on its own."""
    import jax
    import jax.numpy as jnp
    diff = _float_positions(prog.in_types)
    outs_f = _float_positions(prog.out_types)
    primal = [a for a in args]
    floats = lambda outs: [outs[j] for j in outs_f]  # noqa: E731
    on_diff = lambda g: (lambda *d: g(*_with(primal, diff, d)))  # noqa: E731
    fd = on_diff(lambda *a: floats(list(f(*a))))
    from oracle.jax_api.internals import saved_residuals
    answers = {"values": jax.jit(lambda *a: list(f(*a)))(*args)}
    if diff and outs_f:
        d = [primal[i] for i in diff]
        loss = lambda *d: sum(jnp.sum(y * c) for y, c in zip(fd(*d), cts))  # noqa: E731
        grad = jax.grad(loss, argnums=tuple(range(len(d))))
        _attempt(answers, "jvp", lambda: jax.jit(lambda d, t: jax.jvp(fd, d, t)[1])(d, tangents))
        _attempt(answers, "vjp", lambda: jax.jit(lambda d, c: jax.vjp(fd, *d)[1](c))(d, cts))
        _attempt(answers, "second_order", lambda: jax.jit(lambda d, t: jax.jvp(grad, d, t)[1])(d, tangents))
        _attempt(answers, "residuals", lambda: saved_residuals(fd, *d))
    if prog.inputs:
        _attempt(answers, "vmap", lambda: jax.jit(jax.vmap(lambda *a: list(f(*a))))(*batched))
    return answers


def _spec_answers(prog, args, tangents, cts, batched):
    """The spec's answers, evaluated eagerly on the same operands."""
    diff = _float_positions(prog.in_types)
    answers = {"values": spec.evaluate(prog, *args)}
    if diff and _float_positions(prog.out_types):
        _attempt(answers, "jvp", lambda: spec.evaluate(spec.jvp_program(prog)[0], *args, *tangents))
        _attempt(answers, "vjp", lambda: spec.evaluate(spec.vjp_program(prog), *args, *cts))
        _attempt(answers, "residuals", lambda: spec.saved_residuals(prog))
    if prog.inputs:
        _attempt(answers, "vmap", lambda: spec.evaluate(spec.vmap_program(prog, [0] * len(prog.inputs)), *batched))
    return answers


def naive_check(prog, args, implementations=("remat2", "remat3"), seed: int = 0) -> dict:
    """Every property, per implementation, one jit each; returns the largest
    absolute difference of the values from the spec's (a sanity figure,
    not a verdict: the baseline is timed, not trusted)."""
    import oracle
    from oracle.jax_api.flags import implementation, unavailable
    rng = np.random.default_rng(seed)
    f = oracle.to_jax(prog)
    diff = _float_positions(prog.in_types)
    tangents = [rng.standard_normal(prog.in_types[i].shape).astype(prog.in_types[i].dtype) for i in diff]
    cts = [rng.standard_normal(prog.out_types[j].shape).astype(prog.out_types[j].dtype)
           for j in _float_positions(prog.out_types)]
    batched = [np.stack([a, a]) for a in args]
    want = _spec_answers(prog, args, tangents, cts, batched)
    worst = {}
    for impl in implementations:
        if unavailable(impl):
            continue
        with implementation(impl):
            got = _jax_answers(f, prog, args, tangents, cts, batched)
        got_values = [np.asarray(v, np.float64) for v in got["values"] if np.asarray(v).dtype.kind == "f"]
        want_values = [np.asarray(v, np.float64) for v in want["values"] if np.asarray(v).dtype.kind == "f"]
        worst[impl] = max((float(np.max(np.abs(g - w), initial=0.0))
                           for g, w in zip(got_values, want_values)), default=0.0)
    return worst
