"""JAX's primitives, params and types in the spec's terms: the bottom
layer of the JAX -> spec import (oracle/from_jax.py converts programs,
oracle/policies.py translates a policy's questions with it)."""
from __future__ import annotations

import numpy as np

import spec
from spec.core import primitives as SPEC_PRIMS
from spec.ir import ArrayType, canonical_dtype

from oracle.errors import Unsupported
from oracle.jax_names import JAX_NAME, SPEC_NAME, ignored_params


def spec_dtype(dtype):
    """The spec's dtype for a JAX dtype: numpy dtypes as they are, a typed
    key dtype (an extended dtype, `key<fry>`) by its name."""
    if not isinstance(dtype, np.dtype) and str(dtype).startswith("key<"):
        dtype = str(dtype)       # key<fry> is threefry2x32's; key<rbg>, key<urbg> are not modelled
    try:
        return canonical_dtype(dtype)
    except TypeError as e:
        raise Unsupported(f"dtype {dtype} is not supported by the spec: {e}") from None


def spec_type(aval) -> ArrayType:
    dtype = spec_dtype(aval.dtype)
    space = getattr(aval, "memory_space", None)
    # JAX's names of its memory spaces on every backend: Host is 'pinned_host',
    # the rest device memory (jax/_src/core.py:1867 mem_space_to_kind, 0.10.2)
    space = None if space is None or "device" in str(space).lower() or str(space).endswith("Any") else "pinned_host"
    return ArrayType(tuple(int(d) for d in aval.shape), dtype, space)


def spec_params(jax_name: str, params: dict, where: str = "") -> tuple:
    """(spec primitive, spec params) for a JAX primitive and its params."""
    name = SPEC_NAME.get(jax_name, jax_name)
    prim = SPEC_PRIMS.get(name)
    if prim is None or name in ("call", "remat", "scan", "cond", "while", "custom_lin"):
        raise Unsupported(f"primitive {jax_name!r}{where} is not supported by the spec; "
                          f"supported: {', '.join(sorted(supported_primitives()))}")
    wanted = spec.core.param_specs[prim]
    facts = spec.core.jax_facts.get(prim)
    if facts is not None and facts.from_jax is not None:
        params = facts.from_jax(dict(params))
    ignored = ignored_params(name)
    out = {}
    for k, v in params.items():
        if k in wanted:
            out[k] = v
        elif k in ignored and _same(_unplaced(v), ignored[k]):
            continue
        else:
            raise Unsupported(f"{jax_name}{where}: param {k}={v!r} is not supported "
                              f"(the spec models {list(wanted)})")
    for k in ("new_dtype", "preferred_element_type"):
        if out.get(k) is not None:
            try:
                out[k] = spec_dtype(out[k])
            except Unsupported as e:        # int8, float8_*, ...: say where
                raise Unsupported(f"{jax_name}{where}: {k}: {e}") from None
    for k in ("axes", "new_sizes", "permutation", "dimensions", "start_indices", "limit_indices",
              "strides", "shape", "broadcast_dimensions"):
        if out.get(k) is not None:
            out[k] = tuple(int(i) for i in out[k])
    if "padding_config" in out:
        out["padding_config"] = tuple(tuple(int(i) for i in c) for c in out["padding_config"])
    missing = [k for k in wanted if k not in out]
    for k in missing:       # params JAX leaves out when they have their default
        if k in ("accuracy", "precision", "dimensions", "strides", "sharding"):
            out[k] = None       # (no sharding param before jax 0.4.3x: iota, convert_element_type)
        elif k == "weak_type":
            out[k] = False
        else:
            raise Unsupported(f"{jax_name}{where}: missing param {k}")
    return prim, out


def _unplaced(value):
    """A sharding param that places nothing is the unset one (None): a
    fully replicated sharding (every device holds the whole array), such as
    the NamedSharding on the empty AbstractMesh that jax.jacfwd's basis
    carries (jax/_src/api.py:913 `_std_basis` builds its PartitionSpec from
    the argument's), leaves every value as it is. Any other value is
    returned unchanged (and, if a sharding, refused as Unsupported)."""
    try:
        replicated = getattr(value, "is_fully_replicated", False) is True
    except Exception:       # an abstract sharding that cannot answer
        replicated = False
    return None if replicated else value


def _same(value, accepted) -> bool:
    try:
        return bool(value == accepted)
    except Exception:        # arrays, objects without a plain equality
        return value is accepted


def supported_primitives() -> list[str]:
    names = [JAX_NAME.get(n, n) for n in SPEC_PRIMS]
    names = [n for n in names if n != "custom_lin"]     # made by differentiation, never imported
    return names + ["call_hi_primitive(RematTraced, CheckpointName)", "pjit", "closed_call"]
