"""remat-oracle's executable specification of JAX autodiff and remat.

Pure Python + numpy; never imports jax. Start with `spec.trace`, print the
program, then apply transformations (each maps programs to programs):

    >>> import spec
    >>> from spec import ops
    >>> prog = spec.trace(lambda x: ops.sin(ops.sin(x)), spec.f32[3])
    >>> [str(r) for r in spec.saved_residuals(prog)]
    ['f32[3] output of cos', 'f32[3] output of cos']
"""
from spec.ir import (ArrayType, Eqn, Literal, Primitive, Program, Var,  # noqa: F401
                     check_program, f16, f32, f64, bf16, i32, bool_, float0, pp_program)
from spec.core import (Zero, UndefinedPrimal, trace, primitives, shape_rules,  # noqa: F401
                       eval_rules, jvp_rules, transpose_rules, batch_rules, PrimitiveError)
from spec import prims_elementwise, prims_structural, prims_call, prims_control, remat, prims_scan, prims_custom  # noqa: F401  (register rules)
from spec import prims_special  # noqa: F401
from spec.prims_scan import scan  # noqa: F401
from spec.prims_custom import custom_jvp, custom_vjp, CustomVJPPrimal  # noqa: F401
from spec import policies  # noqa: F401
from spec.policies import checkpoint_policies, Saveable, Recompute, Offload  # noqa: F401
from spec import ops  # noqa: F401
from spec.prims_control import cond, switch, while_loop  # noqa: F401
from spec.evaluate import evaluate, EvaluationError  # noqa: F401
from spec.jvp import jvp, jvp_program  # noqa: F401
from spec.partial_eval import partial_eval, dce, Residual, Source, PartialEval  # noqa: F401
from spec.transpose import transpose  # noqa: F401
from spec.vjp import linearize, vjp, vjp_program, grad, saved_residuals, Linearized, traced_grad, traced_vjp_program  # noqa: F401
from spec.explain import explain, Explanation  # noqa: F401
from spec.batching import vmap, vmap_program, BatchingError  # noqa: F401
from spec import symbolic  # noqa: F401
from spec.arrays import SymbolicError  # noqa: F401
from spec import prims_math  # noqa: F401
from spec import prims_reductions  # noqa: F401
from spec import prims_indexing  # noqa: F401
from spec import prims_conv  # noqa: F401
from spec import prims_window  # noqa: F401
from spec import prims_random  # noqa: F401
from spec import prims_collective  # noqa: F401
from spec import prims_stack  # noqa: F401
from spec import prims_tile  # noqa: F401
from spec import prims_platform  # noqa: F401
from spec import prims_debug  # noqa: F401
from spec import prims_callback, prims_equinox  # noqa: F401
from spec import prims_scatter  # noqa: F401
from spec import prims_linalg  # noqa: F401
from spec import prims_linear_solve  # noqa: F401
from spec import prims_decompositions  # noqa: F401
from spec import prims_complex, prims_fft  # noqa: F401
from spec import prims_ragged_dot  # noqa: F401
