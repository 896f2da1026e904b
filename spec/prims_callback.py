"""pure_callback: `jax.pure_callback(callback, result_shape_dtypes, *args,
vmap_method=...)` (jax/_src/callback.py), a call of the user's Python code
that JAX treats as a pure function of its operands.

    pure_callback[callback, result_avals, vmap_method] *args -> *results

`callback` is opaque to the spec: a Python callable taking the flat
operands and returning a sequence of flat results (JAX's `_FlatCallback`,
which unflattens the operands into the user's pytrees and flattens what
the user's function returns; the spec holds whatever JAX handed over).
`result_avals` are the results' types as plain data, one (shape, dtype
name) pair each; `vmap_method` is JAX's (None, 'sequential',
'sequential_unrolled', 'expand_dims', 'broadcast_all' or
'legacy_vectorized'). JAX's `sharding` param is left out (only None is
accepted).

Semantics (jax 0.10.2):

* eval: the callback, called on the operands (read-only numpy arrays
  where JAX passes immutable CPU arrays); whatever it raises is the user's
  own and propagates as it is. Its results are checked as JAX's
  `emit_python_callback` checks them (a RuntimeError, JAX's messages word
  for word), after `dtypes.canonicalize_value`: a 64-bit result where the
  32-bit type is declared is converted (JAX without jax_enable_x64 does
  so; with it, JAX would raise the dtype error instead).
* JVP: none. JAX's rule raises a ValueError (`pure_callback_jvp_rule`,
  its message word for word); as in JAX it only runs for a nonzero
  tangent, so a callback only differentiates inside a `jax.custom_jvp` /
  `jax.custom_vjp`. Transpose: JAX's rule raises too
  (`pure_callback_transpose_rule`, TRANSPOSE_ERROR); no program the JVP
  makes can reach it (a callback never reads a tangent), and the spec
  registers transpose rules for linear primitives only, so transposing a
  callback that reads a linear value is spec.transpose's TransposeError.
* batching: `ffi.ffi_batching_rule`, by `vmap_method`: 'sequential' is a
  scan over the batched operands calling the callback once per member
  (unbatched operands its consts), 'sequential_unrolled' the same scan
  fully unrolled, 'expand_dims' / 'broadcast_all' one call with the
  unbatched operands given a leading axis of size 1 / the batch size,
  'legacy_vectorized' one call on the operands as they are; the results
  are batched at axis 0. Any other (None) raises JAX's NotImplementedError.
* effects: none. A pure callback is dead code when its results are not
  used (JAX's DCE drops it), and a checkpoint's policy may recompute it.

    >>> import spec
    >>> prog = spec.trace(lambda x: pure_callback(numpy_sin, [x.type], x, vmap_method="sequential")[0],
    ...                   spec.f32[3])
    >>> print(spec.vmap(prog, 0, 0, axis_size=2))
    { lambda ; a:f32[2,3]. let
        b:f32[2,3] = scan[jaxpr={ lambda ; c:f32[3]. let
                d:f32[3] = pure_callback[callback=numpy_sin result_avals=(((3,), 'float32'),) vmap_method=sequential] c
              in (d,) } length=2 reverse=False num_consts=0 num_carry=0 unroll=1] a
      in (b,) }
"""
from __future__ import annotations

import numpy as np

from spec.core import (Example, JaxFacts, PrimitiveError, Tracer, batch_rules, bind, eval_rules, examples,
                       jax_facts, jvp_rules, primitive, shape_rules)
from spec.ir import ArrayType, canonical_dtype
from spec.prims_elementwise import stop_gradient

pure_callback_p = primitive("pure_callback", ["callback", "result_avals", "vmap_method"], multiple_results=True)

# jax/_src/callback.py pure_callback: `allowed_vmap_methods`
VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all", "legacy_vectorized", None)


def _plain(types) -> tuple:
    """Result types as plain data: ((shape, dtype name), ...)."""
    out = []
    for t in types:
        if isinstance(t, ArrayType):
            out.append((tuple(t.shape), np.dtype(t.dtype).name))
        else:
            shape, dtype = t
            out.append((tuple(int(d) for d in shape), np.dtype(canonical_dtype(dtype)).name))
    return tuple(out)


def pure_callback(callback, result_types, *args, vmap_method=None):
    """jax.pure_callback with flat operands: `callback(*arrays)` returns a
    sequence of arrays of `result_types` (ArrayTypes, or (shape, dtype)
    pairs). Returns the list of results."""
    return bind(pure_callback_p, *args, callback=callback, result_avals=_plain(result_types),
                vmap_method=vmap_method)


def _types(result_avals) -> list[ArrayType]:
    return [ArrayType(tuple(shape), canonical_dtype(dtype)) for shape, dtype in result_avals]


def _pure_callback_shape(*xs, callback, result_avals, vmap_method):
    """pure_callback_abstract_eval: the declared result types (the operands'
    types are not checked)."""
    if vmap_method not in VMAP_METHODS:
        # jax.pure_callback's own check, word for word (its typo included)
        raise PrimitiveError(pure_callback_p, f"vmap_method must be on of the allowed methods "
                                              f"{list(VMAP_METHODS)}, but got: {vmap_method}")
    if not callable(callback):
        raise PrimitiveError(pure_callback_p, f"callback {callback!r} is not callable")
    try:
        return _types(result_avals)
    except (TypeError, ValueError) as e:
        raise PrimitiveError(pure_callback_p, f"result_avals {result_avals!r} must be (shape, dtype name) "
                                              f"pairs: {e}") from None


shape_rules[pure_callback_p] = _pure_callback_shape

# dtypes.canonicalize_value without jax_enable_x64: the 64-bit types JAX narrows
_NARROWED = {np.dtype(np.float64): np.dtype(np.float32), np.dtype(np.int64): np.dtype(np.int32),
             np.dtype(np.uint64): np.dtype(np.uint32), np.dtype(np.complex128): np.dtype(np.complex64)}


def _read_only(x):
    x = np.array(x, copy=True) if not isinstance(x, np.ndarray) else x.view()
    x.flags.writeable = False
    return x


def _pure_callback_eval(*args, callback, result_avals, vmap_method):
    """pure_callback_impl: the callback on the operands (`tree_map(np.asarray,
    callback(*args))`), its results checked as emit_python_callback's
    `_wrapped_callback` checks them."""
    out_vals = callback(*[_read_only(a) for a in args])     # the user's code: its errors are its own
    types = _types(result_avals)
    out_vals = list(out_vals)
    if len(out_vals) != len(types):
        raise RuntimeError("Mismatched number of outputs from callback. "
                           "Expected: {}, Actual: {}".format(len(types), len(out_vals)))
    outs = []
    for i, (v, t) in enumerate(zip(out_vals, types)):
        v = np.asarray(v)
        if v.dtype in _NARROWED and _NARROWED[v.dtype] == t.dtype:
            v = v.astype(t.dtype)
        if v.shape != t.shape:
            raise RuntimeError(f"Incorrect output shape for return value #{i}: "
                               f"Expected: {t.shape}, Actual: {v.shape}")
        if v.dtype != t.dtype:
            raise RuntimeError(f"Incorrect output dtype for return value #{i}: "
                               f"Expected: {t.dtype}, Actual: {v.dtype}")
        outs.append(v)
    return outs


eval_rules[pure_callback_p] = _pure_callback_eval

# jax/_src/callback.py, word for word
JVP_ERROR = ("Pure callbacks do not support JVP. "
             "Please use `jax.custom_jvp` to use callbacks while taking gradients.")
TRANSPOSE_ERROR = ("Pure callbacks do not support transpose. "   # (no spec rule: see the docstring)
                   "Please use `jax.custom_vjp` to use callbacks while taking gradients.")


def _pure_callback_jvp(primals, tangents, **params):
    """pure_callback_jvp_rule: a ValueError (run only for a nonzero tangent:
    with every tangent zero JAX binds the primitive on the primals)."""
    raise ValueError(JVP_ERROR)


jvp_rules[pure_callback_p] = _pure_callback_jvp


def _pure_callback_batch(args, dims, *, callback, result_avals, vmap_method):
    """ffi.ffi_batching_rule(pure_callback_p, ...): batched operands moved
    to axis 0, then per vmap_method (see the module docstring); every
    result batched at axis 0."""
    from spec.batching import broadcast, moveaxis
    from spec.prims_scan import scan
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    new_args = [a if d is None else moveaxis(a, d, 0) for a, d in zip(args, dims)]
    batched_avals = tuple(((size,) + tuple(shape), dtype) for shape, dtype in result_avals)
    if vmap_method == "legacy_vectorized":
        outs = pure_callback(callback, batched_avals, *new_args, vmap_method=vmap_method)
    elif vmap_method in ("expand_dims", "broadcast_all"):
        n = size if vmap_method == "broadcast_all" else 1
        outs = pure_callback(callback, batched_avals,
                             *[broadcast(a, n) if d is None else a for a, d in zip(new_args, dims)],
                             vmap_method=vmap_method)
    elif vmap_method in ("sequential", "sequential_unrolled"):
        # control_flow.scan(g, (), batched_args, unroll=unroll): the unbatched
        # operands are closed over (a traced one is a const of the scan, a
        # constant stays a literal of the body)
        batched = [a for a, d in zip(new_args, dims) if d is not None]
        traced = [a for a, d in zip(new_args, dims) if d is None and isinstance(a, Tracer)]

        def body(carry, xs, *consts):
            it_b, it_c = iter(xs), iter(consts)
            merged = [next(it_b) if d is not None else (next(it_c) if isinstance(a, Tracer) else a)
                      for a, d in zip(new_args, dims)]
            return (), tuple(pure_callback(callback, result_avals, *merged, vmap_method=vmap_method))
        unroll = max(size, 1) if vmap_method == "sequential_unrolled" else 1   # lax.scan's unroll=True
        _, outs = scan(body, (), tuple(batched), consts=traced, length=size, unroll=unroll)
        outs = list(outs)
    else:
        raise NotImplementedError(
            f"vmap is only supported for the {pure_callback_p.name} primitive when vmap_method "
            "is one of 'sequential', 'sequential_unrolled', 'expand_dims', "
            f"'broadcast_all', or 'legacy_vectorized'. Got {vmap_method=}.")
    return list(outs), [0] * len(outs)


batch_rules[pure_callback_p] = _pure_callback_batch


def _pure_callback_from_jax(p):
    """JAX's result_avals (ShapedArrays) as plain data; the callback (a
    _FlatCallback) stays as it is; sharding is checked against None."""
    return {**p, "result_avals": tuple((tuple(int(d) for d in a.shape), np.dtype(a.dtype).name)
                                       for a in p["result_avals"])}


# The emitter binds the callback held in the params (JAX's _FlatCallback,
# or any callable taking the flat operands); a reproducer imports it by
# module and qualified name (oracle/repro.py, _Writer.emit_pure_callback).
jax_facts[pure_callback_p] = JaxFacts(
    "pure_callback",
    "lambda *xs, callback, result_avals, vmap_method: jax._src.callback.pure_callback_p.bind(*xs, "
    "callback=callback, result_avals=tuple(jax._src.core.ShapedArray(tuple(s), jnp.dtype(d)) "
    "for s, d in result_avals), sharding=None, vmap_method=vmap_method)",
    from_jax=_pure_callback_from_jax, ignored=(("sharding", None),))


# --------------------------------------------------------------------------
# flat callbacks of the examples (module-level, so that reproducers import them)

def numpy_sin(x):
    """[np.sin(x)]: a flat callback (a sequence of results)."""
    return [np.sin(x)]


def numpy_cos(x):
    """[np.cos(x)]."""
    return [np.cos(x)]


def numpy_add(x, y):
    """[x + y] (broadcasting: a batched operand with an expanded one)."""
    return [np.add(x, y)]


def numpy_cumsum(x):
    """[np.cumsum(x, axis=-1)] in x's dtype."""
    return [np.cumsum(x, axis=-1).astype(x.dtype)]


examples[pure_callback_p] = [
    # a statistic the function does not differentiate through (with a
    # tangent, JAX's rule raises: wrap the callback in a jax.custom_jvp)
    Example("numpy-sin-of-stopped-operand", (((2, 3), "f32", "normal"),),
            lambda x: pure_callback(numpy_sin, [x.type], stop_gradient(x), vmap_method="sequential")[0],
            np.sin, tangent="zero"),
    Example("add-broadcast-all", (((3,), "i32", "ints"), ((3,), "i32", "ints")),
            lambda x, y: pure_callback(numpy_add, [x.type], x, y, vmap_method="broadcast_all")[0],
            lambda x, y: x + y),
    Example("int-cumsum-sequential-unrolled", (((2, 4), "i32", "ints"),),
            lambda x: pure_callback(numpy_cumsum, [x.type], x, vmap_method="sequential_unrolled")[0],
            lambda x: np.cumsum(x, axis=-1)),
    Example("legacy-vectorized", (((4,), "i32", "ints"),),
            lambda x: pure_callback(numpy_cumsum, [x.type], x, vmap_method="legacy_vectorized")[0],
            lambda x: np.cumsum(x, axis=-1)),
]
