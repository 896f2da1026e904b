"""spec -> JAX: turn a spec program into a Python function of jax.lax calls,
`jax.checkpoint(..., policy=...)`, `checkpoint_name`, `jax.jit` and JAX's
`cond` / `while` primitives (bound directly: lax.cond and lax.while_loop
would add `ne`/`clamp`, prune forwarded outputs or hoist constants), such that
`jax.make_jaxpr` of it imports back to the same program."""
from __future__ import annotations

import numpy as np

from spec.ir import Literal, Program, Var, is_key

from oracle.conventions import jax_value_of, literal_is_python_float
from oracle.errors import InvalidArgument, Unsupported
from oracle.jax_api import internals as jx
from oracle.jax_names import JAX_NAME, emitters
from oracle.spellings import CANONICAL, Spelling, checkpointed, jnp_call
from oracle.from_jax import subjaxprs
from spec.ir import is_float, subprograms


def to_jax(prog: Program, *, spelling: Spelling = CANONICAL):
    """A function of JAX arrays returning the list of the program's outputs,
    written in `spelling` (oracle.spellings: checkpoint forms and
    arguments, jax.numpy calls, an outer jax.jit); the function carries it
    as `.spelling` (reproducers write the same)."""
    if not isinstance(spelling, Spelling):
        raise InvalidArgument(f"oracle.to_jax: spelling must be an oracle.spellings.Spelling, got {spelling!r}")
    table = _Table(emitters(), spelling)
    _make_0d_constants(prog)

    def fn(*args):
        return _run(prog, args, table)
    fn.__name__ = "spec_program"
    if spelling.jit:
        import jax
        inner = fn
        fn = jax.jit(inner)
        fn.__name__ = inner.__name__
    fn.spelling = spelling
    return fn


def unbindable(prog: Program) -> str | None:
    """Why the installed JAX cannot bind `prog` as its primitives' emitters
    call it: an API this release lacks (an AttributeError while tracing,
    e.g. lax.unstack before jax 0.4.3x; a param its primitive lacks, e.g.
    eigh's and svd's `algorithm` before 0.7) or a memory kind its device
    does not address, else None. The fuzzer draws only
    what binds (fuzz/strategies.py); anything else that goes wrong is left
    for the check to report."""
    import jax
    if any(is_key(t.dtype) for t in prog.in_types):
        return None
    try:
        closed = jax.make_jaxpr(to_jax(prog))(*[jax.ShapeDtypeStruct(t.shape, t.dtype) for t in prog.in_types])
    except (AttributeError, ImportError) as e:     # (a library an emitter imports, equinox, not installed)
        return f"jax {jax.__version__}: {e}"
    except TypeError as e:
        # a call the release's API does not take: a param its primitive lacks
        # (eigh's algorithm) or needs (pure_callback's vectorized on 0.4.36),
        # params in another form (equinox 0.11.3's vprim spreads a mapping)
        if any(m in str(e) for m in ("unexpected keyword argument", "required keyword-only argument",
                                     "must be a mapping")):
            return f"jax {jax.__version__}: {e}"
        return None
    except Unsupported as e:     # the version layer's refusal: an API form the release lacks
        return str(e) if str(e).startswith("jax ") else f"jax {jax.__version__}: {e}"
    except ValueError as e:
        if "memory kind" in str(e):     # a sharding in device memory, where the device tells none (0.4.25 CPU)
            return f"jax {jax.__version__}: {e}"
        return None
    except Exception:  # noqa: BLE001 -- not this probe's question; oracle.check reports it
        return None
    lacking = _jax_names(prog) - _bound(closed.jaxpr)
    if lacking:      # e.g. lax.square binds integer_pow before jax 0.4.36
        return f"jax {jax.__version__}: binds no {', '.join(sorted(lacking))} for its emitters"
    return None


def _jax_names(prog: Program) -> set:
    """JAX's names of the primitives `prog` binds, at every depth."""
    return {JAX_NAME.get(e.primitive.name, e.primitive.name) for e in prog.eqns} | {
        n for e in prog.eqns for _, b in subprograms(e.params) for n in _jax_names(b)}


def _bound(jaxpr) -> set:
    """The primitive names a jaxpr binds, at every depth, as jax 0.10.2
    names them (`pjit` is `jit`: the version layer's canonical names)."""
    return {jx.canonical_eqn(e.primitive.name, dict(e.params), [v.aval for v in e.invars])[0] for e in jaxpr.eqns} | {
        n for e in jaxpr.eqns for j in subjaxprs(e) for n in _bound(j)}


class _Table(dict):
    """The emitter table, and the spelling the program is written in."""

    def __init__(self, table, spelling):
        super().__init__(table)
        self.spelling = spelling


def _literal(a: Literal):
    """A scalar f32 literal is a Python float on JAX's side: weakly typed, as
    literals from Python code are (so e.g. a conversion of it inside a jit
    survives, where JAX would drop a same-dtype conversion of a strong value);
    a numpy float32 under jax_enable_x64, where a Python float is float64
    (lax's binary operations do not promote it). oracle.repro writes them alike."""
    if a.is_scalar and literal_is_python_float(a.value.dtype, jx.x64_enabled()):
        return float(a.value)
    if is_key(a.value.dtype):        # a closed-over key: the typed key of its data
        return jax_value_of(a.value)
    if a.is_scalar:
        return a.value
    made = _JAX_CONSTANTS.get(id(a.value))
    if made is not None and made[0] is a.value:
        return made[1]
    return np.array(a.value)


# the jax Arrays standing for the 0-d constants (spec.ir.as_constvar) of the
# programs to_jax wrote, made before any trace: JAX keeps one a constvar only
# where it exists before tracing (a 0-d numpy array, or an Array made while
# tracing, is inlined); id(value) -> (value, array), the value kept alive
_JAX_CONSTANTS: dict = {}


def _make_0d_constants(prog: Program) -> None:
    import jax.numpy as jnp
    for e in prog.eqns:
        for a in e.inputs:
            if isinstance(a, Literal) and a.type.ndim == 0 and not a.is_scalar and not is_key(a.type.dtype):
                _JAX_CONSTANTS.setdefault(id(a.value), (a.value, jnp.asarray(a.value)))
        for _, sub in subprograms(e.params):
            _make_0d_constants(sub)


def _run(prog: Program, args, table):
    import jax
    from jax.ad_checkpoint import checkpoint_name
    env = {}

    def read(a):
        return env[a.id] if isinstance(a, Var) else _literal(a)

    for v, x in zip(prog.inputs, args):
        env[v.id] = x
    for e in prog.eqns:
        xs = [read(a) for a in e.inputs]
        name = e.primitive.name
        if name == "call" and e.params["name"] is None:
            jcore = jx.core()
            body = e.params["jaxpr"]
            closed = jax.make_jaxpr(lambda *a, body=body: _run(body, a, table))(*xs)
            outs = jcore.closed_call_p.bind(*xs, **jcore.closed_call_p.get_bind_params({"call_jaxpr": closed}))
        elif name == "call":
            body = e.params["jaxpr"]
            inner = lambda *a, body=body: _run(body, a, table)
            inner.__name__ = e.params["name"]
            outs = jax.jit(inner)(*xs)
        elif name == "scan":
            outs = _scan(e, xs, table)
        elif name == "remat":
            body = e.params["jaxpr"]
            if e.params["differentiated"]:
                raise Unsupported("a differentiated remat (the staged half of a checkpoint) has no "
                                  "jax.checkpoint counterpart; convert the program before differentiation")
            outs = checkpointed(table.spelling, lambda *a, body=body: _run(body, a, table), len(e.outputs),
                                e.params["policy"], e.params["prevent_cse"])(*xs)
        elif name == "cond":
            outs = _bind_cond(xs, e.params["branches"], table)
        elif name == "while":
            outs = _bind_while(xs, e.params, table)
        elif name == "remat_opt":
            outs = _bind_remat_opt(xs, e.params, table)
        elif name == "custom_linear_solve":
            outs = _bind_linear_solve(xs, e.params, table)
        elif name == "reduce_window":
            outs = _reduce_window(xs, e.params, table)
        elif name == "name":
            outs = checkpoint_name(xs[0], e.params["name"])
        elif name == "custom_jvp_call":
            outs = _custom_jvp(e.params, table)(*xs)
        elif name == "custom_vjp_call":
            outs = _custom_vjp(e.params, table)(*xs)
        elif table.spelling.jnp and jnp_call(e) is not None:
            outs = jnp_call(e)(*xs)
        else:
            emit = table.get(name)
            if emit is None:
                raise Unsupported(f"spec primitive {name!r} has no JAX counterpart in oracle.to_jax; "
                                  f"supported: {sorted(table) + ['call', 'cond', 'custom_jvp_call', 'custom_linear_solve', 'custom_vjp_call', 'name', 'reduce_window', 'remat', 'remat_opt', 'scan', 'while']}")
            outs = emit(*xs, **e.params)
        outs = list(outs) if e.primitive.multiple_results else [outs]
        for v, o in zip(e.outputs, outs):
            env[v.id] = o
    return [read(a) for a in prog.outputs]


def _reduce_window(xs, params, table):
    """lax.reduce_window with the computation a Python function running the
    spec's sub-program (so it binds the generic reduce_window_p)."""
    from jax import lax
    n = len(xs) // 2
    body = params["jaxpr"]
    window = {k: v for k, v in params.items() if k != "jaxpr"}
    computation = lambda acc, x: _run(body, [*acc, *x], table)
    return lax.reduce_window(list(xs[:n]), list(xs[n:]), computation, **window)


def _strong(xs, avals):
    """The operands of a control-flow primitive bound directly, each weakly
    typed value (made from a Python float literal) converted to the strong
    type the sub-jaxprs were traced at (the spec's types have no weak type),
    as lax.while_loop, lax.scan and lax.cond make a weak init match
    (`_promote_weak_typed_inputs`): bound weak into a strongly typed body,
    JAX's rules split it otherwise (found by a campaign on 0.6.2: a cond
    branch's while from broadcast(0.0) saved one residual less). A literal
    stays a Python scalar, bound inline as user code binds it (converted, it
    is a jax Array at trace time, a constant linearization saves: found on
    0.4.36)."""
    from jax import lax
    literal = lambda x: isinstance(x, (bool, int, float, complex))
    weak = lambda x: getattr(jx.aval_of(x), "weak_type", False)
    return [lax.convert_element_type(x, aval.dtype)
            if not literal(x) and weak(x) and not getattr(aval, "weak_type", False) else x
            for x, aval in zip(xs, avals)]


def _scan(e, xs, table):
    """Bind JAX's scan primitive on the body made a closed jaxpr, so that the
    equation (consts, carries, xs, params) is exactly the spec's (lax.scan
    would reorder and forward some of them)."""
    import jax
    p = e.params
    body = p["jaxpr"]
    nc, nk = p["num_consts"], p["num_carry"]
    avals = [jax.ShapeDtypeStruct(t.shape, t.dtype) for t in body.in_types]
    closed = jax.make_jaxpr(lambda *a: _run(body, a, table))(*avals)
    return jx.scan_p().bind(*_strong(xs, closed.in_avals), jaxpr=closed, length=p["length"],
                            reverse=p["reverse"], num_consts=nc, num_carry=nk, unroll=p["unroll"],
                            **jx.scan_params(len(xs)))


def _closed_jaxpr(prog: Program, table):
    """The ClosedJaxpr of a spec sub-program (a cond branch, a loop's cond or body)."""
    import jax
    avals = [jax.ShapeDtypeStruct(t.shape, t.dtype) for t in prog.in_types]
    return jax.make_jaxpr(lambda *a: _run(prog, a, table))(*avals)


def _bind_cond(xs, branches, table):
    closed = tuple(_closed_jaxpr(b, table) for b in branches)
    return jx.cond_p().bind(xs[0], *_strong(xs[1:], closed[0].in_avals), branches=closed,
                            **jx.cond_params(len(xs) - 1))


def _bind_while(xs, params, table):
    cond, body = _closed_jaxpr(params["cond_jaxpr"], table), _closed_jaxpr(params["body_jaxpr"], table)
    nc, nb = params["cond_nconsts"], params["body_nconsts"]
    avals = cond.in_avals[:nc] + body.in_avals          # cond consts, body consts, carries
    return jx.while_p().bind(*_strong(xs, avals), cond_jaxpr=cond, body_jaxpr=body,
                             cond_nconsts=nc, body_nconsts=nb)


def _bind_remat_opt(xs, params, table):
    """JAX's remat_opt on the forward rule's program (its consts made
    leading operands, as optimize_remat_of_custom_vjp_fwd binds it) and a
    thunk tracing the primal function."""
    fwd, consts = jx.closed_without_consts(_closed_jaxpr(params["fwd_jaxpr"], table))
    fun = params["fun_jaxpr"]
    thunk = lambda: (lambda c: (c.jaxpr, c.consts))(_closed_jaxpr(fun, table))   # noqa: E731
    return jx.remat_opt_p().bind(*consts, *xs, num_consts=len(consts) + params["num_consts"],
                                 num_res=params["num_res"], fwd_jaxpr=fwd, fun_jaxpr_thunk=thunk)


def _bind_linear_solve(xs, params, table):
    """JAX's custom_linear_solve on exactly these operands, each sub-program
    a ClosedJaxpr (None stays None; a constant of a sub-program stays its
    const, as the spec program holds it), const_lengths and jaxprs JAX's
    _LinearSolveTuple; a weakly typed operand made strong."""
    progs, lengths = params["jaxprs"], params["const_lengths"]
    closed = [None if p is None else _closed_jaxpr(p, table) for p in progs]
    consts = [a for c, n in zip(closed, lengths) if n for a in c.in_avals[:n]]
    b_avals = closed[2].in_avals[lengths[2]:]           # solve's: its consts, then b
    return jx.linear_solve_p().bind(*_strong(xs, consts + b_avals), const_lengths=jx.linear_solve_tuple(*lengths),
                                    jaxprs=jx.linear_solve_tuple(*closed))


def _tangent_zero(t, symbolic: bool):
    """A SymbolicZero tangent output (JAX's rules may return one whether or
    not the custom function has symbolic_zeros)."""
    del symbolic
    import jax
    from jax.custom_derivatives import SymbolicZero
    return SymbolicZero(jax.core.ShapedArray(t.shape, t.dtype))


def _closed_over(xs, types):
    """The values a custom function closes over, as JAX values: a literal
    const becomes one array (a tracer of the trace it is made in), so that
    JAX makes it one const of the custom call, as the import had it."""
    import jax.numpy as jnp
    from jax import core as jax_core
    return [x if isinstance(x, jax_core.Tracer) else jnp.asarray(x, dtype=t.dtype) for x, t in zip(xs, types)]


def _body_closing_over(xs, params, table):
    """(consts, fun): the custom call's consts as JAX values (`_closed_over`)
    and its body as a function of the other operands, closing over them,
    named as the custom function."""
    body = params["jaxpr"]
    consts = _closed_over(xs, body.in_types[:len(xs)])

    def fun(*a):
        return _run(body, [*consts, *a], table)
    fun.__name__ = params["name"]
    return consts, fun


def _custom_jvp(params, table):
    """jax.custom_jvp of the body, with a JVP rule that runs the spec rule's
    program for the perturbed inputs. With num_consts, the returned function
    takes the consts first and the custom function closes over them (JAX
    makes them the call's consts again, in the order the body reads them);
    the rule is given their values (as closed over: never their tangents)."""
    import jax
    from jax.custom_derivatives import SymbolicZero
    body, rule, sz = params["jaxpr"], params["jvp"], params["symbolic_zeros"]
    nc = params.get("num_consts") or 0
    args_types = body.in_types[nc:]

    def call(*xs):
        consts, fun = _body_closing_over(xs[:nc], params, table)
        f = jax.custom_jvp(fun)

        def jvp(primals, tangents):
            key = [type(t) is not SymbolicZero for t in tangents] if sz else [is_float(t.dtype) for t in args_types]
            prog, out_nz = rule((False,) * nc + tuple(key))
            outs = _run(prog, [*consts, *primals, *[t for t, k in zip(tangents, key) if k]], table)
            n = len(body.outputs)
            it = iter(outs[n:])
            return outs[:n], [next(it) if nz else _tangent_zero(t, sz) for t, nz in zip(body.out_types, out_nz)]
        jvp.__name__ = rule.__name__
        f.defjvp(jvp, symbolic_zeros=sz)
        return f(*xs[nc:])
    return call


def _custom_vjp(params, table):
    """jax.custom_vjp of the body, with fwd and bwd running the spec rules'
    programs (consts closed over as in _custom_jvp; bwd gives them none)."""
    import jax
    from jax.custom_derivatives import SymbolicZero
    body, fwd_rule, bwd_rule, sz = params["jaxpr"], params["fwd"], params["bwd"], params["symbolic_zeros"]
    nc = params.get("num_consts") or 0
    n = len(body.outputs)

    def call(*xs):
        consts, fun = _body_closing_over(xs[:nc], params, table)
        f = jax.custom_vjp(fun)

        def fwd(*args):
            if sz:
                key, args = [a.perturbed for a in args], [a.value for a in args]
            else:
                key = [is_float(t.dtype) for t in body.in_types[nc:]]
            prog, _ = fwd_rule((False,) * nc + tuple(key))
            outs = _run(prog, [*consts, *args], table)
            return outs[:n], outs[n:]

        def bwd(res, cts):
            key = [type(c) is not SymbolicZero for c in cts] if sz else [True] * n
            prog, out_nz = bwd_rule(key)
            outs = iter(_run(prog, [*res, *[c for c, k in zip(cts, key) if k]], table))
            return tuple(next(outs) if nz else None for nz in out_nz)
        fwd.__name__, bwd.__name__ = fwd_rule.__name__, bwd_rule.__name__
        f.defvjp(fwd, bwd, symbolic_zeros=sz)
        return f(*xs[nc:])
    return call
