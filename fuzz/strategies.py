"""Hypothesis strategies for valid spec programs, built by construction.

`programs()` draws a DAG of equations in topological order: each step
picks an operation and operands from the values built so far whose types
fit, so every drawn program type-checks without a shape solver. Domains
are kept by construction: log, sqrt, rsqrt and the divisor of div read
`1 + x*x`, exp reads `tanh(x)`; max/min never compare a value with itself
(no ties). Checkpoint regions wrap a freshly drawn sub-DAG over some of the
current values, nested up to a depth, each with a random policy; names are
put on random values (some repeated, some unused by any policy), and a
region whose policy mentions names binds each of them on a value of its
body (so name policies are exercised, never dropped for naming absent
names).

All choices are small integers drawn from Hypothesis, so shrinking removes
steps and simplifies choices: a failing program shrinks to a handful of
equations. Each step is one span of choices that can be deleted on its
own (see `_Builder.steps`): with a step count drawn up front, the shrinker
could not drop a step without also lowering the count, and left programs
padded with unneeded steps.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

import spec
from spec import ops, policies as P
from spec.ir import ArrayType, Var

SHAPES = [(), (3,), (2,), (2, 3), (3, 2), (2, 2, 3)]
NAMES = ["a", "b", "c"]


@dataclass(frozen=True)
class SavePrimitives(P._Policy):
    """A random user policy: save the outputs of these primitives (and of
    names in `names`)."""
    prims: frozenset
    names: frozenset = frozenset()

    def __call__(self, prim, *in_types, **params):
        if prim.name == "name":
            return params["name"] in self.names
        return prim.name in self.prims

    def __repr__(self):
        return f"SavePrimitives({sorted(self.prims)}, names={sorted(self.names)})"

    def jax_source(self) -> str:
        """The same policy as JAX source (what reproducers write out)."""
        from oracle.jax_names import JAX_NAME
        prims = sorted(JAX_NAME.get(p, p) for p in self.prims)
        return (f"(lambda prim, *_, **params: params.get('name') in {sorted(self.names)!r} "
                f"if prim.name == 'name' else prim.name in {prims!r})")


def mentioned_names(policy) -> set:
    """The checkpoint names a (drawn) policy mentions, its parts' included:
    the spec's builder requires a region to bind every one of them."""
    out = set()
    for p in (policy, getattr(policy, "policy_1", None), getattr(policy, "policy_2", None)):
        out |= set(getattr(p, "names", ()) or ())
    return out


@st.composite
def policies(draw, names=tuple(NAMES)):
    """Every built-in policy, combinations with save_from_both_policies, and
    random user policies."""
    kind = draw(st.sampled_from([
        "none", "nothing", "everything", "dots", "dots_no_batch", "only", "any_but", "except",
        "both", "user"]))
    pick = lambda: draw(st.lists(st.sampled_from(list(names)), min_size=1, max_size=2, unique=True))
    if kind == "none":
        return None
    if kind == "nothing":
        return P.nothing_saveable
    if kind == "everything":
        return P.everything_saveable
    if kind == "dots":
        return P.dots_saveable
    if kind == "dots_no_batch":
        return P.dots_with_no_batch_dims_saveable
    if kind == "only":
        return P.save_only_these_names(*pick())
    if kind == "any_but":
        return P.save_any_names_but_these(*pick())
    if kind == "except":
        return P.save_anything_except_these_names(*pick())
    if kind == "both":
        a = draw(st.sampled_from([P.dots_saveable, P.dots_with_no_batch_dims_saveable]))
        return P.save_from_both_policies(a, P.save_only_these_names(*pick()))
    prims = draw(st.lists(st.sampled_from(["sin", "cos", "tanh", "mul", "add", "dot_general", "exp"]),
                          min_size=1, max_size=3, unique=True))
    return SavePrimitives(frozenset(prims), frozenset(draw(st.lists(st.sampled_from(list(names)),
                                                                    max_size=2, unique=True))))


# step kinds of control flow and custom rules (issue 8), left out with
# programs(control_flow=False)
CONTROL_FLOW_KINDS = ["scan", "cond", "custom", "while"]


class _Builder:
    """Draws steps into the current trace."""

    def __init__(self, draw, dtype, max_depth, allow_regions, stop_gradient=True, region_weight=1,
                 no_reverse_mode=False, control_flow=True):
        self.draw = draw
        self.no_reverse_mode = no_reverse_mode
        self.control_flow = bool(control_flow)
        # extra "region" entries among the step kinds (appended: they shrink away first)
        self.extra_regions = ["region"] * (region_weight - 1 if allow_regions else 0)
        self.stop_gradient = stop_gradient
        self.dtype = dtype
        self.max_depth = max_depth
        self.allow_regions = allow_regions
        self.names_used: set[str] = set()

    def pick(self, pool, pred=lambda v: True):
        cands = [v for v in pool if pred(v)]
        if not cands:
            return None
        return cands[self.draw(st.integers(0, len(cands) - 1))]

    def floats(self, pool):
        return [v for v in pool if v.dtype == self.dtype]

    def steps(self, pool, depth, max_steps, more_odds, names=()):
        """Draw 1 to `max_steps` steps onto `pool`, putting each of `names`
        on a value before a step or after the last. Each step is one
        Hypothesis span that begins (from the second on) with a "one more
        step?" choice (yes `more_odds` times in `more_odds` + 1), and a final
        such choice follows even the last possible step: deleting any
        step's span leaves a valid choice sequence, so the shrinker removes
        unneeded steps one by one."""
        pending = list(names)
        for i in range(max_steps + 1):
            if not self.draw(_one_step(self, pool, depth, i, max_steps, more_odds, pending)):
                break
        for name in pending:
            pool.append(ops.checkpoint_name(self.pick(self.floats(pool)), name))

    def one_plus_square(self, x):
        return ops.add(ops.square(x), np.asarray(1, x.dtype))

    def step(self, pool, depth):
        draw = self.draw
        kind = draw(st.sampled_from([
            "unary", "unary", "binary", "binary", "guarded", "pow", "dot", "reduce", "broadcast",
            "reshape", "transpose", "slice", "concat", "squeeze", "select", "stop_gradient", "name",
            "int_side", "region", "call"] + CONTROL_FLOW_KINDS * self.control_flow + self.extra_regions))
        fl = self.floats(pool)
        x = self.pick(fl)
        if x is None:
            return None
        if kind == "unary":
            op = draw(st.sampled_from([ops.sin, ops.cos, ops.tanh, ops.logistic, ops.neg, ops.square, ops.abs]))
            return op(x)
        if kind == "binary":
            y = self.pick(fl, lambda v: v.shape == x.shape or v.ndim == 0 or x.ndim == 0)
            op = draw(st.sampled_from([ops.add, ops.sub, ops.mul, ops.max, ops.min]))
            if y is None or (y is x and op in (ops.max, ops.min)):
                y = ops.sin(x)        # a distinct operand: max/min never tie by construction
            return op(x, y)
        if kind == "guarded":
            op = draw(st.sampled_from(["log", "sqrt", "rsqrt", "div", "exp", "log1p"]))
            if op == "exp":
                return ops.exp(ops.tanh(x))
            if op == "div":
                y = self.pick(fl, lambda v: v.shape == x.shape) or x
                return ops.div(x, self.one_plus_square(y))
            if op == "log1p":
                return ops.log1p(ops.square(x))
            return {"log": ops.log, "sqrt": ops.sqrt, "rsqrt": ops.rsqrt}[op](self.one_plus_square(x))
        if kind == "pow":
            y = draw(st.sampled_from([0, 1, 2, 3, -2]))
            return ops.integer_pow(self.one_plus_square(x) if y < 0 else x, y)
        if kind == "dot":
            if x.ndim == 0:
                return ops.mul(x, x)
            y = self.pick(fl, lambda v: v.shape == x.shape)
            dims = list(range(x.ndim))
            contract = draw(st.lists(st.sampled_from(dims), min_size=1, max_size=x.ndim, unique=True))
            rest = [d for d in dims if d not in contract]
            batch = draw(st.lists(st.sampled_from(rest), max_size=len(rest), unique=True)) if rest else []
            dn = ((tuple(contract), tuple(contract)), (tuple(batch), tuple(batch)))
            return ops.dot_general(x, y, dn, preferred_element_type=self.dtype)
        if kind == "reduce":
            if x.ndim == 0:
                return ops.neg(x)
            axes = draw(st.lists(st.integers(0, x.ndim - 1), min_size=1, max_size=x.ndim, unique=True))
            op = draw(st.sampled_from([ops.reduce_sum, ops.reduce_max]))
            return op(x, tuple(sorted(axes)))
        if kind == "broadcast":
            pos = draw(st.integers(0, x.ndim))
            shape = list(x.shape)
            shape.insert(pos, 2)
            return ops.broadcast_in_dim(x, shape, [i for i in range(len(shape)) if i != pos])
        if kind == "reshape":
            if x.ndim == 0:
                return ops.reshape(x, (1,))
            return ops.reshape(x, (x.type.size,)) if x.ndim > 1 else ops.reshape(x, (1, x.shape[0]))
        if kind == "transpose":
            perm = draw(st.permutations(list(range(x.ndim))))
            return ops.transpose(x, perm)
        if kind == "slice":
            if x.ndim == 0 or any(d < 2 for d in x.shape):
                return ops.cos(x)
            axis = draw(st.integers(0, x.ndim - 1))
            lo = [0] * x.ndim
            hi = list(x.shape)
            lo[axis] = draw(st.integers(0, x.shape[axis] - 1))
            strides = [1] * x.ndim
            strides[axis] = draw(st.integers(1, 2))
            return ops.slice(x, lo, hi, strides)
        if kind == "concat":
            if x.ndim == 0:
                return ops.tanh(x)
            y = self.pick(fl, lambda v: v.shape == x.shape)
            return ops.concatenate([x, y], draw(st.integers(0, x.ndim - 1)))
        if kind == "squeeze":
            return ops.squeeze(ops.reshape(x, (1,) + tuple(x.shape)), (0,))
        if kind == "select":
            y = self.pick(fl, lambda v: v.shape == x.shape and v is not x)
            if y is None:
                y = ops.cos(x)
            return ops.select_n(ops.gt(x, y), x, y)
        if kind == "stop_gradient" and not self.stop_gradient:
            return ops.tanh(x)
        if kind == "stop_gradient":
            return ops.mul(ops.stop_gradient(x), self.pick(fl, lambda v: v.shape == x.shape) or x)
        if kind == "name":
            name = draw(st.sampled_from(NAMES))
            self.names_used.add(name)
            return ops.checkpoint_name(x, name)
        if kind == "int_side":
            ints = [v for v in pool if v.dtype == np.int32]
            if not ints:
                return ops.sin(x)
            n = self.pick(ints)
            return ops.mul(x, ops.reduce_sum(ops.convert_element_type(n, self.dtype), tuple(range(n.ndim))))
        if kind == "scan" and self.allow_regions and depth < self.max_depth:
            return self.scan_step(pool, fl, x, depth)
        if kind == "cond" and self.allow_regions and depth < self.max_depth:
            return self.cond_step(fl, x, depth)
        if kind == "custom":
            return self.custom_step(x)
        if kind == "while" and self.no_reverse_mode and self.allow_regions and depth < self.max_depth:
            return self.while_step(x, depth)
        if kind in ("region", "call") and self.allow_regions and depth < self.max_depth:
            k = draw(st.integers(1, min(2, len(fl))))
            ins = [self.pick(fl) for _ in range(k)]
            to_bind = []        # names the region's policy mentions: the body binds each

            def body(*xs):
                inner = list(xs)
                self.steps(inner, depth + 1, 4, 2, to_bind)
                return inner[-1]
            if kind == "call":
                prog = spec.trace(body, *[v.type for v in ins])
                return ops.call(prog, *ins, name=f"f{depth}")[0]
            policy = draw(policies(tuple(NAMES)))
            to_bind.extend(sorted(mentioned_names(policy)))
            prevent_cse = draw(st.booleans())
            try:
                return ops.checkpoint(body, policy=policy, prevent_cse=prevent_cse)(*ins)
            except P.PolicyError:   # a name policy naming names the region never binds
                return ops.checkpoint(body, policy=None, prevent_cse=prevent_cse)(*ins)
        return ops.sin(x)


    def scan_step(self, pool, fl, carry, depth):
        """A scan whose body is drawn like a region's: carry `carry`, xs a
        value whose leading axis is the length (or none: length 1-3), maybe
        a const, maybe reversed. Checkpoints inside the body, or around the
        scan, come from region steps drawn there. The final carry joins the
        pool; the stacked ys are the step's value."""
        draw = self.draw
        xs = self.pick(fl, lambda v: v.ndim >= 1) if draw(st.booleans()) else None
        consts = [self.pick(fl)] if draw(st.booleans()) else []
        length = xs.shape[0] if xs is not None else draw(st.integers(1, 3))
        reverse = draw(st.booleans())

        def body(c, x, *cs):
            inner = [c] + ([x] if x is not None else []) + list(cs)
            n0 = len(inner)
            self.steps(inner, depth + 1, 3, 2)
            same = [v for v in inner[n0:] if v.type == c.type]
            return (same[-1] if same else ops.sin(c)), inner[-1]
        final, ys = spec.scan(body, carry, xs, consts=consts, length=length, reverse=reverse)
        pool.append(final)
        return ys


    def cond_step(self, fl, x, depth):
        """lax.cond on the sign of sum(y) (a drawn value; |sum| is far from 0
        for drawn inputs, so no finite difference crosses the switch), each
        branch a drawn sub-DAG over the operands returning x's type."""
        draw = self.draw
        y = self.pick(fl)
        operands = [x] + ([y] if y is not x else [])
        pred = ops.gt(ops.reduce_sum(y, tuple(range(y.ndim))), np.asarray(0, y.dtype))

        def branch(*xs):
            inner = list(xs)
            self.steps(inner, depth + 1, 3, 2)
            same = [v for v in inner[len(xs):] if v.type == x.type]
            return same[-1] if same else ops.cos(xs[0])
        return spec.cond(pred, branch, branch, *operands)

    def while_step(self, x, depth):
        """A while_loop of 1-3 iterations (a counter) over a drawn body on x
        (forward mode only: JAX and the spec have no reverse mode for it)."""
        n = self.draw(st.integers(1, 3))

        def body(c):
            inner = [c[1]]
            self.steps(inner, depth + 1, 3, 2)
            same = [v for v in inner[1:] if v.type == x.type]
            return c[0] + np.int32(1), (same[-1] if same else ops.sin(c[1]))
        return spec.while_loop(lambda c: ops.lt(c[0], np.int32(n)), body, (np.int32(0), x))[1]

    def custom_step(self, x):
        """A custom_jvp function with its true derivative as the rule (so the
        finite-difference properties hold), or, where allowed, a custom_vjp
        one (JAX and the spec have no forward mode for it)."""
        draw = self.draw
        fn, d = draw(st.sampled_from([
            (ops.sin, ops.cos), (ops.tanh, lambda v: 1.0 - ops.square(ops.tanh(v))),
            (ops.square, lambda v: 2.0 * v)]))
        if self.no_reverse_mode and draw(st.booleans()):
            f = spec.custom_vjp(lambda v: fn(v), lambda v: (fn(v), d(v)), lambda r, ct: (ct * r,))
        else:
            f = spec.custom_jvp(lambda v: fn(v), lambda p, t: (fn(p[0]), d(p[0]) * t[0]))
        return f(x)


def primitives_in(prog: spec.Program, inside: bool = False) -> set:
    """Names of the primitives of `prog` (with `inside`: only those in
    sub-programs: checkpoint, call, scan, cond bodies)."""
    from spec.ir import subprograms
    out = set()
    for e in prog.eqns:
        if not inside:
            out.add(e.primitive.name)
        for _, b in subprograms(e.params):
            out |= primitives_in(b)
    return out


def has_custom_vjp(prog: spec.Program) -> bool:
    return "custom_vjp_call" in primitives_in(prog) or "custom_vjp_call" in primitives_in(prog, inside=True)


def has_while(prog: spec.Program) -> bool:
    return "while" in primitives_in(prog) or "while" in primitives_in(prog, inside=True)


@st.composite
def _one_step(draw, builder, pool, depth, i, max_steps, more_odds, pending):
    """Step `i` of `builder.steps`, as one span: False where the steps end
    (no step drawn). A pending name goes on a value before the step (or
    stays pending); shrinking prefers before, where later steps can use
    the named value."""
    if i > 0 and (draw(st.integers(0, more_odds)) == 0 or i == max_steps):
        return False
    outer, builder.draw = builder.draw, draw    # the step's choices belong to this span
    try:
        if pending and not draw(st.booleans()):
            pool.append(ops.checkpoint_name(builder.pick(builder.floats(pool)), pending.pop(0)))
        out = builder.step(pool, depth)
        if out is not None:
            pool.append(out)
    finally:
        builder.draw = outer
    return True


@dataclass
class Drawn:
    """A drawn program with what the properties need to know about it."""
    program: spec.Program

    def __repr__(self):
        return f"Drawn(\n{self.program})"


@st.composite
def programs(draw, dtype=np.float32, max_steps=6, max_inputs=3, max_depth=2, allow_regions=True,
             scalar_output=False, int_inputs=True, stop_gradient=True, shapes=SHAPES,
             region_weight=3, dead_ends_out=True, partial_ad=False, control_flow=True):
    """A valid spec program: 1-`max_inputs` inputs of small shapes (f32, or
    `dtype`; sometimes an extra i32 side input), 1-`max_steps` steps.
    `stop_gradient=False` leaves stop_gradient out (finite differences
    cannot see it). `shapes`: the input shapes to draw from (steps may
    still make others: broadcast, concatenate, reshape).

    The outputs are the last value and, with `dead_ends_out` (unless
    `scalar_output`), every other float value no step uses: no drawn step
    is dead code (with the last value alone about half of them were, often
    the checkpoint regions). `region_weight`: a step is a checkpoint region
    with `region_weight` chances in 19 + `region_weight` (1: as often as
    any other kind; the default 3 puts a checkpoint in about 4 programs in
    10, against 1.5 with 1). `partial_ad`: also draw what has only part of
    AD: custom_vjp functions (no forward mode) and while loops (no reverse
    mode), for checks that skip what they lack (see
    fuzz.properties.oracle_agrees). `control_flow=False` leaves out scan,
    cond, while and custom rules."""
    dtype = np.dtype(dtype)
    n_in = draw(st.integers(1, max_inputs))
    types = [ArrayType(draw(st.sampled_from(list(shapes))), dtype) for _ in range(n_in)]
    if int_inputs and draw(st.booleans()):
        types.append(ArrayType(draw(st.sampled_from([(), (3,)])), np.int32))
    b = _Builder(draw, dtype, max_depth, allow_regions, stop_gradient, region_weight, partial_ad,
                 control_flow)

    def fn(*xs):
        pool = list(xs)
        b.steps(pool, 0, max_steps, 4)
        fl = [v for v in pool if v.dtype == dtype]
        out = fl[-1]
        if scalar_output and out.ndim:
            out = ops.reduce_sum(out, tuple(range(out.ndim)))
        return out
    names = [f"x{i}" for i in range(len(types))]
    prog = spec.trace(_named(fn, names), *types)
    if dead_ends_out and not scalar_output:
        prog = _with_dead_ends_out(prog, dtype)
    return prog


def _with_dead_ends_out(prog: spec.Program, dtype) -> spec.Program:
    """`prog` with every `dtype` value that no equation uses (and that is
    not an output yet) appended to its outputs, in program order."""
    used = {a.id for e in prog.eqns for a in e.inputs if isinstance(a, Var)}
    used |= {a.id for a in prog.outputs if isinstance(a, Var)}
    ends = [v for e in prog.eqns for v in e.outputs if v.id not in used and v.type.dtype == dtype]
    return spec.Program(prog.inputs, prog.eqns, list(prog.outputs) + ends, input_names=prog.input_names)


def _named(fn, names):
    """A wrapper whose parameters have the given names (so residuals
    read "from the argument x0")."""
    src = f"def wrapper({', '.join(names)}):\n    return fn({', '.join(names)})\n"
    env = {"fn": fn}
    exec(src, env)
    return env["wrapper"]


def inputs(prog: spec.Program, seed: int = 0) -> list[np.ndarray]:
    """Well-conditioned inputs: floats of magnitude in [0.5, 1.5], each
    element's sign drawn at random (every guarded domain holds for any
    value; the magnitudes keep exp/tanh chains moderate and every value away
    from 0, where abs is not differentiable; negative values exercise the
    negative half of every rule, e.g. a derivative wrong only there), ints
    in [1, 3]."""
    rng = np.random.default_rng(seed)
    out = []
    for t in prog.in_types:
        if np.issubdtype(t.dtype, np.integer):
            out.append(rng.integers(1, 4, t.shape).astype(t.dtype))
        else:
            magnitude = rng.uniform(0.5, 1.5, t.shape)
            sign = np.where(rng.random(t.shape) < 0.5, -1.0, 1.0)
            out.append((sign * magnitude).astype(t.dtype))
    return out
