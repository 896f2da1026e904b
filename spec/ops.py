"""The builder API: functions that emit one primitive each (JAX's `lax` names).

    import spec
    from spec import ops
    prog = spec.trace(lambda x, W: ops.tanh(x @ W), spec.f32[3], spec.f32[3, 4])

Python operators on traced values map here too: ``+ - * / @ -x`` and
comparisons.
"""
from spec.prims_elementwise import (  # noqa: F401
    neg, sin, cos, tanh, exp, log, log1p, logistic, sqrt, rsqrt, square, abs,
    integer_pow, add, sub, mul, div, max, min, add_any, gt, lt, ge, le, eq, ne,
    select_n, convert_element_type, stop_gradient)
from spec.prims_structural import (  # noqa: F401
    broadcast_in_dim, reshape, transpose, squeeze, expand_dims, concatenate,
    slice, pad, reduce_sum, reduce_max, dot_general, matmul)
from spec.prims_call import call  # noqa: F401
from spec.prims_scan import scan  # noqa: F401
from spec.prims_control import cond, cond_eqn, switch, while_loop  # noqa: F401
from spec.remat import checkpoint, checkpoint_name  # noqa: F401
