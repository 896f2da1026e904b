"""Checkpointed programs seen through a transformation: vmap, grad (second
order: the residuals of differentiating the gradient) and vmap of grad.

Each entry takes a checkpointed program written twice (JAX and spec.ops,
the `TestProgram`s of tests/jax_remat_programs.py or a few defined here)
and a list of transformation steps, applied innermost first:

* ("vmap", in_axes, B): JAX `jax.vmap(f, in_axes=in_axes)` (out_axes 0),
  spec `spec.vmap(prog, in_axes, 0, axis_size=B)`;
* ("grad", argnums): JAX `jax.grad(f, argnums)`, spec `spec.grad(prog, argnums)`.

The recorder (`tests/record_jax_composed_residuals.py`) stores JAX's
`saved_residuals` of the transformed function and its `make_jaxpr`
equations; `tests/test_recorded_composed_residuals.py` checks
`spec.saved_residuals` of the spec's transformed program against both
without importing jax.

Like the other program tables, importing this module does not import jax.

Notes on matching JAX's programs:
* `jax.vmap(f)` and `jax.grad(f)` keep f's parameter names (functools.wraps),
  so JAX's "from the argument x" uses them, as the spec's transformations
  keep `input_names`.
* `jax.make_jaxpr(jax.grad(f))` is not dead-code eliminated: it keeps the
  forward equations whose only use was the primal output (f's value, which
  grad drops), and `spec.grad` removes them (it ends with `dce`). The
  recorder therefore also stores JAX's gradient jaxpr after
  `pe.dce_jaxpr` ("jaxprs_dce"); the test checks the spec's program against
  that, and checks that the raw jaxpr is the DCE'd one plus dead equations
  only (the residuals of differentiating the gradient cannot depend on them:
  `saved_residuals` linearizes, and partial evaluation drops dead
  equations).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import spec
from spec import ops
from spec import policies as sp

from jax_programs import F32, TestProgram, _LazyModule
from jax_remat_programs import (BY_NAME as REMAT, XW, X3, _ckpt1, _ckpt2, jcp, jname,
                                dot_sin_jax, dot_sin_spec, sin_sin_jax, sin_sin_spec)

jax = _LazyModule("jax")
jnp = _LazyModule("jax.numpy")
lax = _LazyModule("jax.lax")

B = 5     # the batch size of every vmap


@dataclass(frozen=True)
class ComposedProgram:
    name: str
    base: TestProgram         # the checkpointed program, untransformed
    steps: tuple              # transformation steps, innermost first
    note: str = ""

    __test__ = False

    def jax_fn(self):
        """The transformed JAX function (imports jax)."""
        f = self.base.jax_fn
        for step in self.steps:
            if step[0] == "vmap":
                f = jax.vmap(f, in_axes=step[1])
            elif step[0] == "grad":
                f = jax.grad(f, argnums=step[1])
            else:
                raise ValueError(step)
        return f

    def trace_spec(self) -> spec.Program:
        """The spec's transformed program, built with spec transformations."""
        prog = self.base.trace_spec()
        for step in self.steps:
            if step[0] == "vmap":
                prog = spec.vmap(prog, step[1], 0, axis_size=step[2])
            elif step[0] == "grad":
                prog = spec.grad(prog, step[1])
            else:
                raise ValueError(step)
        return prog

    @property
    def in_types(self) -> tuple:
        """((dtype name, shape), ...) of the transformed function's inputs."""
        types = list(self.base.in_types)
        for step in self.steps:
            if step[0] != "vmap":
                continue
            _, in_axes, size = step
            axes = [in_axes] * len(types) if in_axes is None or isinstance(in_axes, int) else list(in_axes)
            new = []
            for (dt, shape), ax in zip(types, axes):
                if ax is not None:
                    shape = list(shape)
                    shape.insert(ax % (len(shape) + 1), size)
                    shape = tuple(shape)
                new.append((dt, shape))
            types = new
        return tuple(types)

    def example_inputs(self) -> list[np.ndarray]:
        return TestProgram(self.name, None, None, self.in_types).example_inputs()

    @property
    def is_grad(self) -> bool:
        return any(s[0] == "grad" for s in self.steps)


# --------------------------------------------------------------------------
# checkpointed programs not in the remat table

def xw_named_jax(x, W):
    h = jname(jnp.sin(x @ W), "h")
    return jnp.sum(jnp.sin(h) * h)


def xw_named_spec(x, W):
    h = ops.checkpoint_name(ops.sin(x @ W), "h")
    return ops.reduce_sum(ops.sin(h) * h, (0, 1))


def scale_jax(x, s):                       # s: f32[], mixed with a batched x
    return jnp.sum(jnp.sin(jnp.sin(x) * s))


def scale_spec(x, s):
    return ops.reduce_sum(ops.sin(ops.sin(x) * s), (0,))


def _prog(name, pair, in_types, note=""):
    return TestProgram(name, pair[0], pair[1], in_types, note)


XS = ((F32, (3,)), (F32, ()))

LOCAL = {
    "xw_named_save_h": _prog("xw_named_save_h", _ckpt2(
        xw_named_jax, xw_named_spec,
        lambda: jcp.save_only_these_names("h"), sp.save_only_these_names("h")), XW),
    "scale_policy_none": _prog("scale_policy_none", _ckpt2(scale_jax, scale_spec), XS),
    "sin_sin_dots_saveable": _prog("sin_sin_dots_saveable", _ckpt1(
        sin_sin_jax, sin_sin_spec, lambda: jcp.dots_saveable, sp.dots_saveable), X3,
        "no dot: dots_saveable saves nothing"),
    "dot_sin_everything_saveable": _prog("dot_sin_everything_saveable", _ckpt2(
        dot_sin_jax, dot_sin_spec, lambda: jcp.everything_saveable, sp.everything_saveable), XW),
}


def _base(name):
    return LOCAL[name] if name in LOCAL else REMAT[name]


def _c(name, base, *steps, note=""):
    return ComposedProgram(name, _base(base), tuple(steps), note)


def vmap(in_axes=0, size=B):
    return ("vmap", in_axes, size)


def grad(argnums=0):
    return ("grad", argnums)


# --------------------------------------------------------------------------
# the table

PROGRAMS: list[ComposedProgram] = [
    # ---- vmap of a checkpointed function
    _c("vmap_policy_none_axis0", "policy_none", vmap(0)),
    _c("vmap_policy_none_axis_neg1", "policy_none", vmap(-1), note="batched along the last axis"),
    _c("vmap_nothing_saveable", "nothing_saveable", vmap(0)),
    _c("vmap_everything_saveable", "everything_saveable", vmap(0)),
    _c("vmap_dots_saveable_both_axis0", "dots_saveable", vmap(0),
       note="both operands batched: the dot gets a batch dimension"),
    _c("vmap_dots_saveable_x_only", "dots_saveable", vmap((0, None)),
       note="W unbatched: the batch axis folds into the dot's free dims"),
    _c("vmap_dots_saveable_axis1", "dots_saveable", vmap(1), note="a non-leading batch axis"),
    _c("vmap_dots_saveable_W_only_axis1", "dots_saveable", vmap((None, 1)),
       note="x unbatched, W batched along a non-leading axis"),
    _c("vmap_dots_no_batch_x_only", "dots_no_batch_unbatched", vmap((0, None)),
       note="still no batch dims after vmap: the dot is saved"),
    _c("vmap_dots_no_batch_both", "dots_no_batch_unbatched", vmap(0),
       note="vmap gives the dot a batch dim: the policy no longer saves it"),
    _c("vmap_dots_saveable_batched_dot", "dots_saveable_batched", vmap(0),
       note="a dot_general with batch dims, both operands batched"),
    _c("vmap_dots_saveable_batched_dot_rhs_axis2", "dots_saveable_batched", vmap((None, 2)),
       note="dot_general with batch dims, only rhs batched, along a non-leading axis"),
    _c("vmap_save_only_these_names_b", "save_only_these_names_one_of_two", vmap(0)),
    _c("vmap_save_only_these_names_two", "save_only_these_names_two", vmap(0)),
    _c("vmap_jit_in_checkpoint", "jit_in_checkpoint", vmap(0)),
    _c("vmap_jit_in_checkpoint_everything", "jit_in_checkpoint_everything", vmap(0)),
    _c("vmap_mixed_none", "scale_policy_none", vmap((0, None)),
       note="a batched x and an unbatched scalar s"),
    _c("vmap_mixed_none_scalar_batched", "scale_policy_none", vmap((None, 0)),
       note="an unbatched x and a batched scalar s"),
    _c("vmap_nested_dots_nothing", "nested_dots_outer_nothing_inner", vmap((0, None))),
    _c("vmap_mlp_dots_saveable", "mlp_layer_dots_saveable", vmap((0, None, None))),
    _c("vmap_xw_named_save_h", "xw_named_save_h", vmap((1, None))),
    # ---- second order: residuals of differentiating jax.grad(f)
    _c("grad_policy_none", "policy_none", grad()),
    _c("grad_nothing_saveable", "nothing_saveable", grad()),
    _c("grad_everything_saveable", "everything_saveable", grad()),
    _c("grad_dots_saveable", "dots_saveable", grad()),
    _c("grad_dots_saveable_wrt_W", "dots_saveable", grad(1)),
    _c("grad_dot_everything_saveable", "dot_sin_everything_saveable", grad()),
    _c("grad_sin_sin_dots_saveable", "sin_sin_dots_saveable", grad()),
    _c("grad_save_only_these_names_b", "save_only_these_names_one_of_two", grad()),
    _c("grad_xw_named_save_h", "xw_named_save_h", grad()),
    _c("grad_jit_in_checkpoint", "jit_in_checkpoint", grad()),
    _c("grad_nested_name_inner", "nested_name_inner_save_only_outer", grad()),
    # ---- vmap of grad
    _c("vmap_grad_policy_none", "policy_none", grad(), vmap(0)),
    _c("vmap_grad_dots_saveable_x_only", "dots_saveable", grad(), vmap((0, None))),
    _c("vmap_grad_save_only_these_names_b", "save_only_these_names_one_of_two", grad(), vmap(0)),
]

BY_NAME = {p.name: p for p in PROGRAMS}
assert len(BY_NAME) == len(PROGRAMS), "duplicate program names"
