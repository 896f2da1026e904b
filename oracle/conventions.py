"""How oracle.check calls the user's function: JAX's calling conventions.

    oracle.check(fn, policy, *args, static_argnums=(), static_argnames=(), **kwargs)

calls `fn(*args, **kwargs)` the way `jax.jit(fn, static_argnums=...,
static_argnames=...)` does:

* `args` and `kwargs` are pytrees (lists, tuples, dicts, dataclasses
  registered with JAX, None) whose leaves are arrays (numpy or jax),
  `jax.ShapeDtypeStruct` (drawn, see `draw`) or Python scalars. A Python
  float, int or bool is *weak-typed*, as JAX treats it: JAX is given the
  scalar itself, the spec the value in JAX's canonical dtype.
* Every leaf is canonicalised as JAX does (`jax.dtypes.canonicalize_dtype`:
  with x64 off a float64 array is float32, an int64 one int32).
* Static arguments are passed through unchanged and are not inputs of
  the program.
* An argument holding an `equinox.Module` is taken as equinox's filter
  transformations take it (`filtered`): its arrays are inputs, every other
  leaf is static.
* The spec's inputs are the leaves in JAX's order (`tree_flatten((args,
  kwargs))`) and carry JAX's names (`params['dense']['w']`, `x`), the
  names `saved_residuals` reports arguments by.
* Outputs may be any pytree of arrays; the checked program returns its
  leaves.

`Factory(make)` stands for a function that must be built afresh under each
implementation: `jax.checkpoint` picks remat2 or remat3 when it is
*called* (at decoration), so a function decorated before `oracle.check`
switches `jax_remat3` keeps the checkpoints it was built with.
"""
from __future__ import annotations

import functools
import re
import inspect
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from oracle.errors import InvalidArgument, Unsupported
from spec.ir import canonical_dtype, is_key
from spec.prims_random import keys_of

AS_IS = type("AS_IS", (), {"__repr__": lambda self: "oracle.AS_IS"})()


@dataclass(frozen=True)
class Factory:
    """A zero-argument callable returning the function under test, called
    afresh under each implementation (so its `jax.checkpoint` calls are
    made under the implementation being checked)."""
    make: Callable[[], Callable]

    def __post_init__(self):
        if not callable(self.make):
            raise InvalidArgument(f"oracle.Factory takes a zero-argument callable, got {self.make!r}")

    @property
    def __name__(self):
        return getattr(self.make, "__name__", "factory")

    def build(self) -> Callable:
        fn = self.make()
        if not callable(fn):
            raise InvalidArgument(f"oracle.Factory({self.__name__}) returned {fn!r}, not a function")
        return fn


def literal_is_python_float(dtype, x64: bool) -> bool:
    """A scalar literal of `dtype` is bound (oracle.to_jax) and written
    (oracle.repro) as a Python float: weakly typed, as literals from Python
    code are; float32 only, and not under jax_enable_x64, where a Python
    float is float64 and lax's binary operations do not promote it."""
    return np.dtype(dtype) == np.float32 and not x64


def _leaf_path(path) -> str:
    """The path as JAX names an argument leaf: keystr with a
    FlattenedIndexKey's `<flat index i>` written `i` (a node registered
    without keys, equinox.nn.State: linear_util._clean_keystr_arg_names)."""
    import jax
    return re.sub(r"<flat index ([^>]+)>", r"\1", jax.tree_util.keystr(tuple(path)))


def _draw(struct, rng) -> np.ndarray:
    """A drawn value for a jax.ShapeDtypeStruct, well inside every domain
    the spec's primitives have: floats uniform in [0.5, 1.5] (positive for
    log/sqrt/rsqrt, away from 0 for div, without ties for max/min), ints in
    [1, 4], bools either."""
    if _is_key(struct.dtype):      # key data: any two words
        return rng.integers(0, 2 ** 32, tuple(struct.shape) + (2,), dtype=np.uint64).astype(np.uint32)
    dt = np.dtype(struct.dtype)
    if np.issubdtype(dt, np.integer):
        return rng.integers(1, 5, struct.shape).astype(dt)
    if dt == np.bool_:
        return rng.integers(0, 2, struct.shape).astype(bool)
    return rng.uniform(0.5, 1.5, struct.shape).astype(dt)


def _is_key(dtype) -> bool:
    import jax
    if dtype is None or isinstance(dtype, np.dtype):     # (numpy dtypes are never JAX's key dtypes)
        return False
    try:
        return jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    except TypeError:
        return False


def canonical_leaf(leaf, where: str, rng) -> tuple[Any, np.ndarray]:
    """(what JAX is given, the spec's value) for one leaf: arrays in JAX's
    canonical dtype, Python scalars kept as they are for JAX (weak-typed).
    A typed PRNG key (jax.random.key) is given to JAX as it is; the spec's
    value is a key<fry> array of its data (spec.ir.KEY_FRY). A raw key
    (jax.random.PRNGKey) is the uint32[2] array it is. Keys, like integers,
    are inputs without tangents (float0 ones in JAX)."""
    import jax
    if isinstance(leaf, (bool, int, float, complex)) and not isinstance(leaf, np.generic):
        value = np.asarray(jax.numpy.asarray(leaf))      # JAX's weak-typed canonical dtype
        jax_value = leaf
    elif isinstance(leaf, jax.ShapeDtypeStruct):
        if _is_key(leaf.dtype):
            _check_key_impl(where, leaf.dtype)
            data = _draw(leaf, rng)
            return jax.random.wrap_key_data(data, impl=_KEY_IMPLS[str(leaf.dtype)]), _spec_keys(data)
        value = _draw(jax.ShapeDtypeStruct(leaf.shape, jax.dtypes.canonicalize_dtype(leaf.dtype)), rng)
        jax_value = value
    elif isinstance(leaf, (np.ndarray, np.generic, jax.Array)):
        if _is_key(leaf.dtype) or _is_spec_key(leaf):
            return jax_value_of(leaf, where), spec_value_of(leaf, where)
        value = np.asarray(leaf).astype(jax.dtypes.canonicalize_dtype(leaf.dtype), copy=False)
        jax_value = value
    else:
        raise InvalidArgument(
            f"oracle.check: {where} is a {type(leaf).__name__} ({leaf!r:.60}); leaves of the "
            f"arguments must be arrays, jax.ShapeDtypeStruct or Python scalars (mark other "
            f"arguments static: static_argnums=/static_argnames=)")
    try:
        canonical_dtype(value.dtype)
    except TypeError as e:
        raise Unsupported(f"oracle.check: {where} has dtype {value.dtype}, which the spec does not "
                          f"model: {e}") from None
    return jax_value, value


# the typed key dtypes the spec models, and the jax.random impl name of each
_KEY_IMPLS = {"key<fry>": "threefry2x32"}


def _is_spec_key(x) -> bool:
    return isinstance(x, (np.ndarray, np.generic)) and x.dtype.fields is not None and is_key(x.dtype)


def _check_key_impl(where, dtype):
    if str(dtype) not in _KEY_IMPLS:
        raise _key_unsupported(where, dtype)


def _spec_keys(data) -> np.ndarray:
    return keys_of(np.asarray(data, np.uint32))


def spec_value_of(x, where: str = "a value"):
    """The spec's value of a JAX value: a typed key array becomes a key<fry>
    array of its data, anything else a numpy array."""
    import jax
    if _is_spec_key(x):
        return np.asarray(x)
    if _is_key(getattr(x, "dtype", None)):
        _check_key_impl(where, x.dtype)
        return _spec_keys(jax.random.key_data(x))
    return np.asarray(x)


def jax_value_of(x, where: str = "a value"):
    """What JAX is given for a spec value: a key<fry> array becomes the typed
    key array of its data (jax.random.wrap_key_data); a JAX key stays one;
    other values are given as they are."""
    import jax
    if _is_spec_key(x):
        return jax.random.wrap_key_data(np.asarray(x)["fry"], impl="threefry2x32")
    if _is_key(getattr(x, "dtype", None)):
        _check_key_impl(where, x.dtype)
    return x


def _key_unsupported(where, dtype) -> Unsupported:
    return Unsupported(f"oracle.check: {where} is a PRNG key of dtype {dtype}, which the spec does not "
                       f"model: it models threefry2x32 keys ({', '.join(_KEY_IMPLS)}: jax.random.key's "
                       f"default impl), passed through as non-differentiable inputs")


@dataclass
class Call:
    """The user's function bound to its arguments, as JAX sees the call."""
    fn: Callable                      # the function (or a Factory)
    name: str
    treedef: Any                      # of (dynamic args, dynamic kwargs)
    jax_leaves: list                  # what JAX is given, leaf by leaf
    leaves: list[np.ndarray]          # the spec's inputs
    rebuild: Callable                 # dynamic (args, kwargs) -> the full (args, kwargs)
    signature: inspect.Signature | None

    def function(self) -> Callable:
        """fn of the dynamic (args, kwargs), with the signature JAX names
        arguments by; outputs flattened to a tuple of leaves. Built afresh
        on each call (a Factory is called again)."""
        import jax
        fn = self.fn.build() if isinstance(self.fn, Factory) else self.fn
        rebuild = self.rebuild

        def pytree_fn(*args, **kwargs):
            full_args, full_kwargs = rebuild(args, kwargs)
            leaves = jax.tree.leaves(fn(*full_args, **full_kwargs))
            if not leaves:
                raise InvalidArgument(f"oracle.check: {self.name} returns no arrays")
            for leaf in leaves:
                if not isinstance(leaf, (jax.Array, np.ndarray, np.generic, bool, int, float)):
                    raise InvalidArgument(f"oracle.check: {self.name} returns a {type(leaf).__name__} "
                                          f"({leaf!r:.40}); it may return any pytree of arrays")
            return tuple(leaves)
        pytree_fn.__name__ = pytree_fn.__qualname__ = self.name
        if self.signature is not None:
            pytree_fn.__signature__ = self.signature
        return pytree_fn

    def flat(self, pytree_fn: Callable) -> Callable:
        """pytree_fn as a function of the leaves (JAX's order)."""
        import jax
        treedef = self.treedef

        def flat_fn(*leaves):
            args, kwargs = jax.tree.unflatten(treedef, leaves)
            return pytree_fn(*args, **kwargs)
        return flat_fn

    def remat3_names(self) -> list[str]:
        """The leaves' names as JAX gives them for a `(*args, **kwargs)`
        signature (`args[0]['w']`, `kwargs['scale']`): how saved_residuals
        names arguments under jax_remat3 (its jax.checkpoint is a partial)."""
        import jax
        args, kwargs = self.dynamic(range(len(self.leaves)))
        names = [None] * len(self.leaves)
        for path, i in jax.tree_util.tree_flatten_with_path(args)[0]:
            names[i] = "args" + _leaf_path(path)
        for path, i in jax.tree_util.tree_flatten_with_path(kwargs)[0]:
            names[i] = "kwargs" + _leaf_path(path)
        return names

    def dynamic(self, leaves) -> tuple[tuple, dict]:
        """The dynamic (args, kwargs) holding `leaves`."""
        import jax
        return jax.tree.unflatten(self.treedef, list(leaves))


def _static_positions(n_args, static_argnums, static_argnames, signature) -> tuple[set, set]:
    """The positions and keyword names that are static, as jax.jit
    resolves them (a name may refer to a positional parameter, a position
    to a named one)."""
    nums = {int(i) + n_args if int(i) < 0 else int(i) for i in static_argnums}
    bad = sorted(i for i in nums if not 0 <= i < n_args)
    if bad:
        raise InvalidArgument(f"oracle.check: static_argnums {list(static_argnums)} refer to positions "
                              f"{bad}, but the function is given {n_args} positional arguments")
    names = set(static_argnames)
    if signature is not None:
        params = list(signature.parameters.values())
        positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        nums |= {positional.index(n) for n in names if n in positional and positional.index(n) < n_args}
        names |= {positional[i] for i in nums if i < len(positional)}
    return nums, names


def _signature(fn) -> inspect.Signature | None:
    try:
        return inspect.signature(fn.build() if isinstance(fn, Factory) else fn)
    except (TypeError, ValueError):
        return None


def bind(fn, args, kwargs, *, static_argnums=(), static_argnames=(), seed: int = 0) -> Call:
    """The Call of fn(*args, **kwargs) with the given static arguments:
    leaves canonicalised and drawn (`seed`), named as JAX names them."""
    import jax
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    if isinstance(static_argnames, str):
        static_argnames = (static_argnames,)
    signature = _signature(fn)
    nums, names = _static_positions(len(args), static_argnums, static_argnames, signature)
    static_args = {i: a for i, a in enumerate(args) if i in nums}
    static_kwargs = {k: v for k, v in kwargs.items() if k in names}
    dyn_args = tuple(a for i, a in enumerate(args) if i not in nums)
    dyn_kwargs = {k: v for k, v in kwargs.items() if k not in names}
    n_total = len(args)
    dyn_args, combine_args = zip(*map(filtered, dyn_args)) if dyn_args else ((), ())
    combine_kwargs = {}
    for k in dyn_kwargs:
        dyn_kwargs[k], combine_kwargs[k] = filtered(dyn_kwargs[k])

    def rebuild(d_args, d_kwargs):
        it = iter(combine(a) for combine, a in zip(combine_args, d_args))
        full = [static_args[i] if i in static_args else next(it) for i in range(n_total)]
        d_kwargs = {k: combine_kwargs[k](v) for k, v in d_kwargs.items()}
        return tuple(full), {**d_kwargs, **static_kwargs}

    paths_leaves, treedef = jax.tree_util.tree_flatten_with_path((dyn_args, dyn_kwargs))
    dyn_sig = _dynamic_signature(signature, nums, names, len(args))
    rng = np.random.default_rng(seed)
    if dyn_sig is not None:
        try:
            dyn_sig.bind(*dyn_args, **dyn_kwargs)
        except TypeError as e:
            raise InvalidArgument(f"oracle.check: the arguments do not fit {function_name(fn)}'s "
                                  f"signature {dyn_sig} (static arguments left out): {e}") from None
    jax_leaves, leaves = [], []
    positional = _positional_names(dyn_sig, len(dyn_args))
    for path, leaf in paths_leaves:
        j, s = canonical_leaf(leaf, f"argument {_where(path, positional)}", rng)
        jax_leaves.append(j)
        leaves.append(s)
    return Call(fn, function_name(fn), treedef, jax_leaves, leaves, rebuild, dyn_sig)


def filtered(arg) -> tuple[Any, Callable]:
    """(the dynamic part of one argument, the function putting it back
    together). An argument holding an `equinox.Module` is taken the way
    equinox's transformations take it (`eqx.filter_jit`, `eqx.filter_grad`,
    `eqx.partition(arg, eqx.is_array)`): its array leaves are inputs, every
    other leaf (the modules' functions, strings, Python scalars such as
    `eqx.nn.Dropout`'s `p` and `inference`, a pool's init) is static, left in
    place; jax.jit refuses such arguments (a function is not a JAX type) or
    traces the scalars equinox's code branches on. Any other argument is
    taken as jax.jit takes it (all of it dynamic)."""
    import jax
    if not _holds_equinox_module(arg):
        return arg, lambda dynamic: dynamic
    leaves, treedef = jax.tree_util.tree_flatten(arg)
    is_input = [_is_array_leaf(leaf) for leaf in leaves]
    dynamic = treedef.unflatten([leaf if i else None for leaf, i in zip(leaves, is_input)])

    def combine(dynamic_part):
        inputs = iter(jax.tree_util.tree_leaves(dynamic_part))
        return treedef.unflatten([next(inputs) if i else leaf for leaf, i in zip(leaves, is_input)])
    return dynamic, combine


def _holds_equinox_module(arg) -> bool:
    """Whether the pytree `arg` has an equinox.Module in it (equinox is not
    imported here: a Module exists only where the user imported it)."""
    import sys
    import jax
    eqx = sys.modules.get("equinox")
    if eqx is None:
        return False
    is_module = lambda x: isinstance(x, eqx.Module)
    return any(map(is_module, jax.tree_util.tree_leaves(arg, is_leaf=is_module)))


def _is_array_leaf(leaf) -> bool:
    """eqx.is_array, with jax.ShapeDtypeStruct (drawn) counted as an array."""
    import jax
    return isinstance(leaf, (np.ndarray, np.generic, jax.Array, jax.ShapeDtypeStruct))


def _positional_names(signature, n) -> list[str]:
    """The parameter names of the first n positional arguments (`args[i]`
    for those bound to `*args` or when there is no signature)."""
    names = []
    if signature is not None:
        for p in signature.parameters.values():
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                names.append(p.name)
            elif p.kind is p.VAR_POSITIONAL:
                names += [f"{p.name}[{i}]" for i in range(len(names), n)]
    return names + [f"args[{i}]" for i in range(len(names), n)]


def _where(path, positional) -> str:
    """`params['w']` / `scale` for a path into (args, kwargs), as JAX names
    arguments (the parameter, then the path inside it)."""
    (head, key), rest = path[:2], tuple(path[2:])
    name = positional[key.idx] if head.idx == 0 else str(key.key)
    return name + _leaf_path(rest)


def _dynamic_signature(signature, nums, names, n_args):
    """The signature without its static parameters (the one JAX names the
    dynamic arguments by, as jax.jit's `_non_static_arg_names`)."""
    if signature is None:
        return None
    params = list(signature.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    static = {p.name for i, p in enumerate(positional) if i in nums} | set(names)
    try:
        return signature.replace(parameters=[p for p in params if p.name not in static])
    except ValueError:
        return None


def draw(args, seed: int = 0) -> list[np.ndarray]:
    """The spec's inputs for positional `args` alone (see `bind`)."""
    return bind(lambda *a: a, tuple(args), {}, seed=seed).leaves


def function_name(fn) -> str:
    fn = fn.make if isinstance(fn, Factory) else fn
    if isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__name__", None) or repr(fn)
