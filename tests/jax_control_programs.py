"""Control-flow test programs (lax.cond, lax.while_loop), each written twice:
with JAX and with the spec's builder API (spec.cond, spec.while_loop), plus
the types of their inputs. Pattern of tests/jax_remat_programs.py; importing
this module does not import jax.

The recorder (`tests/record_jax_control_residuals.py`) stores JAX's
residuals and `make_jaxpr` equations (`tests/recordings/residuals_cond.json`);
`tests/test_recorded_cond_residuals.py` checks the spec against them.

Notes on matching JAX's tracing:
* lax.cond(p, t, f, x) is `convert_element_type[i32] p` then
  `cond[branches=(f, t)]`; spec.cond binds the same;
* a value a JAX branch closes over becomes an operand of the cond, before
  the explicit ones; these programs pass everything explicitly instead;
* a while loop's residuals are reported by `saved_residuals` (jax 0.10.2
  linearizes a while with its JVP + partial eval, so they exist), so
  "while" programs are recorded like the others.
"""
from __future__ import annotations

import numpy as np

import spec
from spec import ops
from spec import policies as sp
from spec.prims_debug import debug_print

from jax_programs import F32, TestProgram, _LazyModule

jax = _LazyModule("jax")
jnp = _LazyModule("jax.numpy")
lax = _LazyModule("jax.lax")
adc = _LazyModule("jax.ad_checkpoint")


class _JaxPolicies:
    def __getattr__(self, attr):
        return getattr(jax.checkpoint_policies, attr)


jcp = _JaxPolicies()

BOOL = "bool"


# --------------------------------------------------------------------------
# branch bodies

def sin_sin_jax(x):
    return jnp.sin(jnp.sin(x))


def sin_sin_spec(x):
    return ops.sin(ops.sin(x))


def cos_twice_jax(x):
    return jnp.cos(x) * 2.0


def cos_twice_spec(x):
    return ops.cos(x) * 2.0


def cond_sum_jax(p, x):
    return jnp.sum(lax.cond(p, sin_sin_jax, cos_twice_jax, x))


def cond_sum_spec(p, x):
    return ops.reduce_sum(spec.cond(p, sin_sin_spec, cos_twice_spec, x), (0,))


def ckpt(fn_jax, fn_spec, jax_policy=None, spec_policy=None):
    def jax_fn(*args):
        return jax.checkpoint(fn_jax, policy=jax_policy() if jax_policy else None)(*args)

    def spec_fn(*args):
        return ops.checkpoint(fn_spec, policy=spec_policy)(*args)
    return jax_fn, spec_fn


# dots in a branch (dots_saveable)
def dot_branches_jax(p, x, W):
    return jnp.sum(lax.cond(p, lambda x, W: jnp.sin(x @ W), lambda x, W: jnp.cos(x @ W) * x[:, :1], x, W))


def dot_branches_spec(p, x, W):
    def t(x, W):
        return ops.sin(x @ W)

    def f(x, W):
        return ops.cos(x @ W) * ops.slice(x, (0, 0), (2, 1))
    return ops.reduce_sum(spec.cond(p, t, f, x, W), (0, 1))


# a checkpoint_name inside a branch
def named_branch_jax(p, x):
    def t(x):
        h = adc.checkpoint_name(jnp.sin(x), "h")
        return jnp.sin(h)
    return jnp.sum(lax.cond(p, t, jnp.cos, x))


def named_branch_spec(p, x):
    def t(x):
        h = ops.checkpoint_name(ops.sin(x), "h")
        return ops.sin(h)
    return ops.reduce_sum(spec.cond(p, t, ops.cos, x), (0,))


# a checkpoint inside a branch
def ckpt_in_branch_jax(p, x):
    return jnp.sum(lax.cond(p, jax.checkpoint(sin_sin_jax), jnp.cos, x))


def ckpt_in_branch_spec(p, x):
    return ops.reduce_sum(spec.cond(p, ops.checkpoint(sin_sin_spec), ops.cos, x), (0,))


# cond inside jit
def cond_in_jit(p, x):                # the jitted function (its name is recorded)
    return lax.cond(p, sin_sin_jax, cos_twice_jax, x)


def cond_in_jit_jax(p, x):
    return jnp.sum(jax.jit(cond_in_jit)(p, x))


def cond_in_jit_spec(p, x):
    body = spec.trace(lambda p, x: spec.cond(p, sin_sin_spec, cos_twice_spec, x), p.type, x.type)
    (y,) = ops.call(body, p, x, name="cond_in_jit")
    return ops.reduce_sum(y, (0,))


# two outputs, one of them a known zero tangent in one branch
def two_outputs_jax(p, x):
    a, b = lax.cond(p, lambda x: (jnp.sin(x), x * 2.0), lambda x: (jnp.cos(x), jnp.sin(x) * jnp.sin(x)), x)
    return jnp.sum(a * b)


def two_outputs_spec(p, x):
    a, b = spec.cond(p, lambda x: (ops.sin(x), x * 2.0),
                     lambda x: (ops.cos(x), ops.sin(x) * ops.sin(x)), x)
    return ops.reduce_sum(a * b, (0,))


# predicate computed from the input
def pred_of_x_jax(x):
    return jnp.sum(lax.cond(jnp.sum(x) > 0.0, sin_sin_jax, cos_twice_jax, x))


def pred_of_x_spec(x):
    return ops.reduce_sum(spec.cond(ops.reduce_sum(x, (0,)) > 0.0, sin_sin_spec, cos_twice_spec, x), (0,))


# vmap of a cond with a batched predicate (becomes select_n)
def vmap_cond_jax(x):
    return jnp.sum(jax.vmap(lambda r: lax.cond(jnp.sum(r) > 0.0, sin_sin_jax, cos_twice_jax, r))(x))


def vmap_cond_spec(x):
    row = spec.trace(lambda r: spec.cond(ops.reduce_sum(r, (0,)) > 0.0, sin_sin_spec, cos_twice_spec, r),
                     spec.f32[3])
    batched = spec.vmap(row, 0, 0, axis_size=x.shape[0])
    (y,) = spec.core.eval_program_traced(batched, x)
    return ops.reduce_sum(y, (0, 1))


# while
def while_jax(x):
    return jnp.sum(lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, jnp.sin(c[1])), (0, x))[1])


def while_spec(x):
    return ops.reduce_sum(spec.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, ops.sin(c[1])), (0, x))[1],
                          (0,))


def while_of_sin_jax(x):
    y = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, jnp.sin(c[1]) * 2.0), (0, jnp.sin(x)))[1]
    return jnp.sum(y)


def while_of_sin_spec(x):
    y = spec.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, ops.sin(c[1]) * 2.0), (0, ops.sin(x)))[1]
    return ops.reduce_sum(y, (0,))


# a carry that starts at a constant and becomes differentiated: its zero
# initial tangent is computed when linearizing, a residual (found by the fuzzer)
def while_from_constant_jax(x):
    return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + jnp.sum(jnp.sin(x))),
                          (0, np.float32(0.0)))[1]


def while_from_constant_spec(x):
    return spec.while_loop(lambda c: c[0] < 3, lambda x, c: (c[0] + 1, c[1] + ops.reduce_sum(ops.sin(x), (0,))),
                           (0, np.float32(0.0)), body_consts=(x,))[1]


# a loop whose carry has no tangent, printing a differentiated value (campaign
# finding 9164e12ae9): the whole loop JAX stages beside the known one is kept
# for its effect, and saves what it reads
def while_printing_jax(x):
    def body(n):
        jax.debug.print("{}", x)
        return n + 1
    n = lax.while_loop(lambda n: n < 3, body, 0)
    return jnp.sum(jnp.sin(x)) * n.astype(jnp.float32)


def while_printing_spec(x):
    def body(x, n):
        debug_print(x, fmt="{}")
        return n + 1
    n = spec.while_loop(lambda n: n < 3, body, 0, body_consts=(x,))
    return ops.reduce_sum(ops.sin(x), (0,)) * ops.convert_element_type(n, np.float32)


# --------------------------------------------------------------------------

PX = ((BOOL, ()), (F32, (3,)))
PXW = ((BOOL, ()), (F32, (2, 3)), (F32, (3, 4)))
X3 = ((F32, (3,)),)


# a branch with a dead value (found by the fuzzer): inside a checkpoint its
# derivative's residual still takes a slot of the cond's residuals
def dead_value_branch_jax(p, x):
    def dead(x):
        unused = jnp.sin(x)      # noqa: F841
        return jnp.sin(x)
    return jnp.sum(lax.cond(p, dead, jnp.sin, x))


def dead_value_branch_spec(p, x):
    def dead(x):
        ops.sin(x)
        return ops.sin(x)
    return ops.reduce_sum(spec.cond(p, dead, ops.sin, x), (0,))


# a dead checkpoint in a branch, linear itself, with dead code inside that
# needs a residual (campaign finding 43c5367912): the nested checkpoint's
# staged half is not DCE'd, and neither is the branch, so it stays saved
def dead_nested_checkpoint_jax(p, x):
    def inner(m):
        jnp.sin(m)
        return jnp.reshape(m, (1, 3))

    def dead(x):
        jax.checkpoint(inner)(x)
        return jnp.cos(x)
    return jnp.sum(lax.cond(p, jnp.sin, dead, x))


def dead_nested_checkpoint_spec(p, x):
    def inner(m):
        ops.sin(m)
        return ops.reshape(m, (1, 3))

    def dead(x):
        ops.checkpoint(inner)(x)
        return ops.cos(x)
    return ops.reduce_sum(spec.cond(p, ops.sin, dead, x), (0,))


# a tangent a JVP rule makes from primals alone in one branch (x ** 0), a
# real one in the other (found by the fuzzer): JAX saves the constant
def rule_zero_branch_jax(x):
    return lax.cond(x > 0.0, lambda h: jnp.squeeze(jnp.reshape(h, (1,)), 0), lambda f: f ** 0, x)


def rule_zero_branch_spec(x):
    return spec.cond(ops.gt(x, 0.0), lambda h: ops.squeeze(ops.reshape(h, (1,)), (0,)),
                     lambda f: ops.integer_pow(f, 0), x)


# the same constant tangent read by a product in the branch: linearized
# equation by equation (linearize_from_jvp), it is a symbolic zero there, and
# nothing of it is saved (the spec saved the zero: found on 0.10.2)
def rule_zero_read_branch_jax(x):
    return lax.cond(x > 0.0, jnp.sin, lambda f: f ** 0 * jnp.sin(f), x)


def rule_zero_read_branch_spec(x):
    return spec.cond(ops.gt(x, 0.0), ops.sin, lambda f: ops.mul(ops.integer_pow(f, 0), ops.sin(f)), x)


# one branch's tangent is a symbolic zero (a constant), the other's needs no residual
def constant_branch_jax(x):
    return jnp.sum(lax.cond(jnp.sum(x) > 0.0, lambda x: jnp.ones_like(x) * 2.0, lambda x: x, x) * 3.0)


def constant_branch_spec(x):
    y = spec.cond(ops.reduce_sum(x, (0,)) > 0.0, lambda x: ops.mul(ops.broadcast_in_dim(np.float32(1.0), x.shape, ()), 2.0), lambda x: x, x)
    return ops.reduce_sum(ops.mul(y, 3.0), (0,))


def _p(name, pair, in_types, note=""):
    return TestProgram(name, pair[0], pair[1], in_types, note)


PROGRAMS: list[TestProgram] = [
    _p("cond_top_level", (cond_sum_jax, cond_sum_spec), PX,
       "linearize: the index and each merged residual slot, 'output of cond'"),
    _p("cond_pred_of_x", (pred_of_x_jax, pred_of_x_spec), X3),
    _p("cond_two_outputs", (two_outputs_jax, two_outputs_spec), PX,
       "the true branch's second tangent is 2t; the false branch's needs sin x"),
    _p("cond_in_checkpoint_none", ckpt(cond_sum_jax, cond_sum_spec), PX),
    _p("cond_in_checkpoint_everything", ckpt(cond_sum_jax, cond_sum_spec,
                                             lambda: jcp.everything_saveable, sp.everything_saveable), PX),
    _p("cond_in_checkpoint_dots", ckpt(dot_branches_jax, dot_branches_spec,
                                       lambda: jcp.dots_saveable, sp.dots_saveable), PXW),
    _p("cond_in_checkpoint_names", ckpt(named_branch_jax, named_branch_spec,
                                        lambda: jcp.save_only_these_names("h"),
                                        sp.save_only_these_names("h")), PX),
    _p("cond_dead_value_in_checkpoint_everything", ckpt(dead_value_branch_jax, dead_value_branch_spec,
                                                       lambda: jcp.everything_saveable,
                                                       sp.everything_saveable), PX,
       "a dead sin in a branch: its derivative's residual is counted (partial_eval_jaxpr_custom "
       "merges residual slots before DCE)"),
    _p("cond_dead_nested_checkpoint_in_checkpoint_everything",
       ckpt(dead_nested_checkpoint_jax, dead_nested_checkpoint_spec,
            lambda: jcp.everything_saveable, sp.everything_saveable), PX,
       "a dead checkpoint in a branch keeps the residual its dead sin's derivative needs "
       "(neither the nested checkpoint's staged half nor the branch is DCE'd)"),
    _p("cond_rule_made_zero_tangent", (rule_zero_branch_jax, rule_zero_branch_spec), ((F32, ()),),
       "a constant tangent one branch makes (x ** 0) is a residual output of the cond"),
    _p("cond_rule_made_zero_tangent_read", (rule_zero_read_branch_jax, rule_zero_read_branch_spec), ((F32, ()),),
       "a constant tangent one branch makes (x ** 0) and multiplies is a symbolic zero: nothing of it is saved"),
    _p("cond_constant_branch", (constant_branch_jax, constant_branch_spec), X3,
       "the constant branch's zero tangent, instantiated since the other's is nonzero, is a "
       "residual output of the cond (made on the primal side)"),
    _p("checkpoint_in_branch", (ckpt_in_branch_jax, ckpt_in_branch_spec), PX),
    _p("cond_in_jit", (cond_in_jit_jax, cond_in_jit_spec), PX),
    _p("vmap_cond", (vmap_cond_jax, vmap_cond_spec), ((F32, (2, 3)),),
       "a batched predicate: the cond becomes select_n over both branches"),
    _p("while_counter", (while_jax, while_spec), X3,
       "the staged loop reads every known input: x (the literal 0 stays inline)"),
    _p("while_of_sin", (while_of_sin_jax, while_of_sin_spec), X3),
    _p("while_from_constant", (while_from_constant_jax, while_from_constant_spec), X3,
       "the carry's zero initial tangent, made in the primal trace, is a residual "
       "(from a literal); the literals 0 and 0.0 stay inline"),
    _p("while_printing", (while_printing_jax, while_printing_spec), X3,
       "no carry has a tangent, but the staged whole loop prints: kept for its effect, it saves x "
       "(the literal 0 stays inline)"),
]

BY_NAME = {p.name: p for p in PROGRAMS}
assert len(BY_NAME) == len(PROGRAMS), "duplicate program names"
