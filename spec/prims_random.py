"""PRNG keys, random bits and the bitwise primitives they are made of:
what jax.random.key / PRNGKey / split / fold_in / bits / uniform /
bernoulli emit in jax 0.10.2 (jax/_src/random/prng.py, threefry2x32.py
and jax/_src/lax/lax.py).

A typed key array `key<fry>[S]` (spec.ir.KEY_FRY) holds one threefry2x32
key, two uint32 words, per element. jax.random's functions bind the
high-level primitives random_seed / random_wrap / random_unwrap /
random_bits / random_split / random_fold_in (a raw uint32[2] key is
wrapped first and unwrapped after); their evaluation here is JAX's
threefry implementation with jax_threefry_partitionable=True (the default
since jax 0.5), bit for bit. A uniform float is made from random bits by
`shift_right_logical`, `or` with the bits of 1.0 and `bitcast_convert_type`.

None of these is differentiable: every JVP rule is JAX's `ad.defjvp_zero`
(a symbolic zero tangent, also for bitcast_convert_type's float output).
The exception is random_gamma (jax.random.gamma / loggamma, and beta and
dirichlet through loggamma, jax/_src/random/core.py): float32 Gamma(a, 1)
samples by Marsaglia and Tsang's method on these keys, differentiable in
`a` by the implicit reparameterisation JAX uses (lax.special's
random_gamma_grad, traced inline).

    >>> import spec
    >>> from spec.ir import u32
    >>> prog = spec.trace(lambda k: random_bits(random_wrap(k), 32, (3,)), u32[2])
    >>> print(prog)
    { lambda ; a:u32[2]. let
        b:key<fry>[] = random_wrap[impl=fry] a
        c:u32[3] = random_bits[bit_width=32 shape=(3,)] b
      in (c,) }
    >>> [int(b) for b in spec.evaluate(prog, np.zeros(2, np.uint32))[0]]   # jax.random.bits(PRNGKey(0), (3,))
    [4070199207, 4202968722, 1427181096]
"""
from __future__ import annotations

import functools
import operator
import math

import numpy as np

from spec.arrays import SymbolicError
from spec.batching import bdim_at_front, broadcast_batcher, moveaxis, vectorized_batcher, vmap_traced
from spec.core import (Example, JaxFacts, PrimitiveError, Zero, batch_rules, bind, eval_rules, examples,
                       jax_facts, jvp_rules, primitive, primitives, shape_rules, trace)
from spec.ir import KEY_FRY, ArrayType, canonical_dtype, is_key
from spec.prims_control import while_loop
from spec.prims_elementwise import (_coerce, _full_like, _lit_like, add, broadcast_shapes, convert_element_type, div,
                                    eq, exp, gt, integer_pow, le, log, lt, mul, ne, neg, select_n, sub)
from spec.prims_elementwise import abs as lax_abs
from spec.prims_math import erf_inv_p
from spec.prims_platform import _platform
from spec.prims_reductions import reduce_or
from spec.prims_scan import scan
from spec.prims_special import digamma, lgamma
from spec.prims_structural import reshape

U32 = np.dtype(np.uint32)
MASK32 = 0xFFFFFFFF
PRNG = "jax._src.random.prng"        # where the emitters find JAX's random primitives


# --------------------------------------------------------------------------
# helpers shared by the blocks

def _kind(dtype) -> str:
    """lax's dtype classes: "bool", "int" (signed or unsigned), "float", "key"."""
    if is_key(dtype):
        return "key"
    if dtype == np.bool_:
        return "bool"
    return "int" if np.issubdtype(dtype, np.integer) else "float"


def _broadcast_shape(prim, *types: ArrayType) -> tuple[int, ...]:
    """lax.broadcasting_shape_rule: scalars aside, equal ranks whose sizes
    agree or are 1."""
    shaped = [t for t in types if t.ndim]
    if not shaped:
        return ()
    if len({t.ndim for t in shaped}) != 1:
        raise PrimitiveError(prim, f"arrays must have the same number of dimensions, got {list(types)}")
    return functools.reduce(lambda s, t: broadcast_shapes(prim, ArrayType(s, t.dtype), t),
                            shaped[1:], shaped[0].shape)


def _numeric(prim, *xs):
    """Bit operations have no symbolic meaning."""
    if any(np.asarray(x).dtype == object for x in xs):
        raise SymbolicError(f"{prim.name}: a bit operation on symbolic values")


def _zero_jvp(fn):
    """ad.defjvp_zero: the output, with a symbolic zero tangent (one per output)."""
    def rule(primals, tangents, **params):
        out = fn(*primals, **params)
        return out, ([None] * len(out) if isinstance(out, (list, tuple)) else None)
    return rule


def _multiple_broadcast_batcher(prim):
    """batching.defbroadcasting for a primitive with several outputs: one batch dim for all."""
    single = broadcast_batcher(prim)

    def rule(args, dims, **params):
        outs, d = single(args, dims, **params)
        return outs, [d] * len(outs)
    return rule


def key_words(keys) -> np.ndarray:
    """The uint32[..., 2] data of a key array (jax.random.key_data)."""
    return np.asarray(keys)["fry"]


def keys_of(words) -> np.ndarray:
    """The key array whose data is uint32[..., 2] `words`."""
    words = np.asarray(words, U32)
    out = np.empty(words.shape[:-1], KEY_FRY)
    out["fry"] = words
    return out


# --------------------------------------------------------------------------
# bitwise primitives (lax.py: standard_unop / standard_naryop over _bool_or_int)

def _bitwise_shape(prim, kinds):
    def rule(*types):
        if any(t.dtype != types[0].dtype for t in types):
            raise PrimitiveError(prim, f"operands must have one dtype, got {list(types)}")
        if _kind(types[0].dtype) not in kinds:
            raise PrimitiveError(prim, f"operands must be {' or '.join(kinds)}, got {list(types)}")
        return [ArrayType(_broadcast_shape(prim, *types), types[0].dtype)]
    return rule


def _bitwise_eval(prim, fn):
    def rule(*xs):
        _numeric(prim, *xs)
        return np.asarray(fn(*xs)).astype(xs[0].dtype)
    return rule


def _declare_bitwise(name, lax_fn, kinds, fn, reference, domain="bits"):
    """One bitwise primitive: its rules, JAX facts and examples. A module
    imported before this one may have declared it already (spec/prims_indexing.py
    declares `and` for clamp's JVP): then that block is used, and the
    examples here are added to its own."""
    n = 1 if name in ("not", "population_count") else 2
    declared = name in primitives
    p = primitives[name] if declared else primitive(name)

    def op(*xs):
        return bind(p, *(_coerce(*xs) if n == 2 else xs))
    op.__name__ = name
    second = (((2, 3), "u32", "indices:40"),) if name.startswith("shift") else (((2, 3), "u32", "bits"),)
    ops = (((2, 3), "u32", domain),) + (second if n == 2 else ())
    own = [Example(f"{name}-u32", ops, op, reference),
           Example(f"{name}-i32", tuple((s, "i32", "ints" if d != "bits" else d) for s, _, d in ops), op, reference)]
    if "bool" in kinds:
        own.append(Example(f"{name}-bool", tuple((s, "bool", "bools") for s, _, _ in ops), op, reference))
    examples[p] = examples.get(p, []) + own
    if declared:
        return p, op
    shape_rules[p] = _bitwise_shape(p, kinds)
    eval_rules[p] = _bitwise_eval(p, fn)
    jvp_rules[p] = _zero_jvp(op)
    batch_rules[p] = vectorized_batcher(p) if n == 1 else broadcast_batcher(p)
    args = "x" if n == 1 else "x, y"
    jax_facts[p] = JaxFacts(name, f"lambda {args}: lax.{lax_fn}({args})")
    return p, op


def _as_bits(x) -> np.ndarray:
    """x's 32 bits as Python-int-friendly int64 in [0, 2**32)."""
    return np.asarray(x).astype(np.int64) & MASK32


def _from_bits(bits, dtype) -> np.ndarray:
    """Python-int-friendly bits back in `dtype` (two's complement for i32)."""
    return np.asarray(bits, np.int64).astype(np.uint32).view(np.dtype(dtype)) if dtype != np.bool_ \
        else np.asarray(bits).astype(bool)


# -- and, or, xor, not --------------------------------------------------------
# ad.defjvp_zero(and_p) (and or_p, xor_p, not_p); batching: broadcasting
# (naryop) / vectorized (unop)

def _ref_bitwise(fn):
    return lambda *xs: fn(*xs) if xs[0].dtype == np.bool_ else _from_bits(fn(*map(_as_bits, xs)), xs[0].dtype)


and_p, and_ = _declare_bitwise("and", "bitwise_and", ("bool", "int"), np.bitwise_and, _ref_bitwise(np.bitwise_and))
or_p, or_ = _declare_bitwise("or", "bitwise_or", ("bool", "int"), np.bitwise_or, _ref_bitwise(np.bitwise_or))
xor_p, xor = _declare_bitwise("xor", "bitwise_xor", ("bool", "int"), np.bitwise_xor, _ref_bitwise(np.bitwise_xor))
not_p, not_ = _declare_bitwise("not", "bitwise_not", ("bool", "int"), np.invert,
                               _ref_bitwise(lambda x: np.logical_not(x) if x.dtype == np.bool_ else MASK32 - x))


# -- shift_left, shift_right_logical, shift_right_arithmetic ------------------
# XLA's shifts read the amount as unsigned: an amount >= 32 (a negative int32
# one too) shifts everything out (the sign fills for the arithmetic shift)

def _shift(kind):
    def fn(x, y):
        amount = np.asarray(y).astype(np.uint32)
        out_of_range = amount >= 32
        s = np.where(out_of_range, 0, amount).astype(np.uint32)
        if kind == "arithmetic":
            signed = np.asarray(x).view(np.int32)
            fill = np.where(signed < 0, -1, 0).astype(np.int32)
            return np.where(out_of_range, fill, signed >> s.astype(np.int32)).view(x.dtype)
        bits = np.asarray(x).view(np.uint32)
        shifted = (bits << s) if kind == "left" else (bits >> s)
        return np.where(out_of_range, np.uint32(0), shifted).astype(np.uint32).view(x.dtype)
    return fn


def _ref_shift(kind):
    def one(x, s):
        if s >= 32:
            return (MASK32 if kind == "arithmetic" and x >> 31 else 0)
        if kind == "left":
            return (x << s) & MASK32
        if kind == "logical":
            return x >> s
        return ((x - (1 << 32) if x >> 31 else x) >> s) & MASK32     # Python's >> is arithmetic
    vec = np.vectorize(one, otypes=[np.int64])
    return lambda x, y: _from_bits(vec(_as_bits(x), _as_bits(y)), x.dtype)


shift_left_p, shift_left = _declare_bitwise("shift_left", "shift_left", ("int",), _shift("left"),
                                            _ref_shift("left"))
shift_right_logical_p, shift_right_logical = _declare_bitwise(
    "shift_right_logical", "shift_right_logical", ("int",), _shift("logical"), _ref_shift("logical"))
shift_right_arithmetic_p, shift_right_arithmetic = _declare_bitwise(
    "shift_right_arithmetic", "shift_right_arithmetic", ("int",), _shift("arithmetic"), _ref_shift("arithmetic"))


# -- population_count ---------------------------------------------------------
# standard_unop(_int, 'population_count'); JAX registers no JVP rule (an
# integer operand's tangent is always a symbolic zero, so none is ever
# needed); the one here is the zero rule. Batching: vectorized.

def _popcount(x):
    """The set bits of each 32-bit word (numpy's bitwise_count is numpy 2's;
    the bytes are counted where it is absent: numpy 1, for jax 0.4.25)."""
    words = np.asarray(x).view(np.uint32)
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(words).astype(x.dtype)
    bits = np.unpackbits(words[..., None].view(np.uint8), axis=-1)
    return bits.sum(axis=-1, dtype=np.uint32).astype(x.dtype)


population_count_p, population_count = _declare_bitwise(
    "population_count", "population_count", ("int",), _popcount,
    lambda x: np.vectorize(lambda v: bin(int(v)).count("1"), otypes=[np.int64])(_as_bits(x)))


# --------------------------------------------------------------------------
# bitcast_convert_type

bitcast_convert_type_p = primitive("bitcast_convert_type", ["new_dtype"])


def bitcast_convert_type(x, new_dtype):
    """x's bits read as `new_dtype` (lax.bitcast_convert_type)."""
    return bind(bitcast_convert_type_p, x, new_dtype=canonical_dtype(new_dtype))


def _bitcast_shape(x, *, new_dtype):
    """lax._bitcast_convert_type_{dtype,shape}_rule, for types of one size
    (a size-changing bitcast adds or removes a minor dimension in JAX;
    the spec refuses it)."""
    p, new_dtype = bitcast_convert_type_p, canonical_dtype(new_dtype)
    kinds = {_kind(x.dtype), _kind(new_dtype)}
    if ("bool" in kinds or "key" in kinds) and x.dtype != new_dtype:
        raise PrimitiveError(p, f"does not support bool or key values unless the operand and destination "
                                f"types match, got {x} to {new_dtype}")
    if x.dtype.itemsize != new_dtype.itemsize:
        raise PrimitiveError(p, f"{x} to {new_dtype} changes the element size; the spec models bitcasts "
                                f"between types of one size (f32/i32/u32, f16/bf16)")
    return [ArrayType(x.shape, new_dtype)]


def _bitcast_eval(x, *, new_dtype):
    _numeric(bitcast_convert_type_p, x)
    return np.array(x, order="C").view(canonical_dtype(new_dtype))     # (a copy: 0-d stays 0-d)


shape_rules[bitcast_convert_type_p] = _bitcast_shape
eval_rules[bitcast_convert_type_p] = _bitcast_eval
# ad.defjvp_zero(bitcast_convert_type_p): even a float output has a zero tangent
jvp_rules[bitcast_convert_type_p] = _zero_jvp(bitcast_convert_type)
batch_rules[bitcast_convert_type_p] = vectorized_batcher(bitcast_convert_type_p)
jax_facts[bitcast_convert_type_p] = JaxFacts(
    "bitcast_convert_type", "lambda x, new_dtype: lax.bitcast_convert_type(x, np.dtype(new_dtype))")
# (float <-> int bitcasts are checked in tests/test_prims_random.py: oracle/upcast.py widens
# their float side to f64, which changes the element size)
examples[bitcast_convert_type_p] = [
    Example("i32-to-u32", (((2, 3), "i32", "bits"),), lambda x: bitcast_convert_type(x, "u32"),
            lambda x: x.astype(np.int64) & MASK32),
    Example("u32-to-i32", (((4,), "u32", "bits"),), lambda x: bitcast_convert_type(x, "i32"),
            lambda x: np.where(x >= 2 ** 31, x.astype(np.int64) - 2 ** 32, x))]


# --------------------------------------------------------------------------
# threefry2x32: the Threefry-2x32 block cipher, 20 rounds (threefry2x32.py)

threefry2x32_p = primitive("threefry2x32", multiple_results=True)
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def threefry2x32(k1, k2, x1, x2):
    """The hash of the counts (x1, x2) under the key (k1, k2): two uint32 arrays."""
    return bind(threefry2x32_p, k1, k2, x1, x2)


def _rotate_left(v, r):
    return (v << np.uint32(r)) | (v >> np.uint32(32 - r))


def threefry2x32_words(k1, k2, x1, x2):
    """threefry2x32.py's `_threefry2x32_lowering` in uint32 numpy arithmetic
    (wrapping): five groups of four rounds, a key injection after each."""
    k1, k2, x1, x2 = (np.asarray(a, U32) for a in np.broadcast_arrays(k1, k2, x1, x2))
    with np.errstate(over="ignore"):
        ks = [k1, k2, k1 ^ k2 ^ np.uint32(0x1BD11BDA)]
        x = [x1 + ks[0], x2 + ks[1]]
        for i in range(5):
            for r in _ROTATIONS[i % 2]:
                x[0] = x[0] + x[1]
                x[1] = _rotate_left(x[1], r) ^ x[0]
            x[0] = x[0] + ks[(i + 1) % 3]
            x[1] = x[1] + ks[(i + 2) % 3] + np.uint32(i + 1)
    return np.asarray(x[0], U32), np.asarray(x[1], U32)


def _threefry_shape(*types):
    """_threefry2x32_abstract_eval: uint32 operands, broadcast; two outputs."""
    if any(t.dtype != U32 for t in types):
        raise PrimitiveError(threefry2x32_p, f"arguments must have uint32 type, got {list(types)}")
    out = ArrayType(_broadcast_shape(threefry2x32_p, *types), U32)
    return [out, out]


def _threefry_eval(k1, k2, x1, x2):
    _numeric(threefry2x32_p, k1, k2, x1, x2)
    return list(threefry2x32_words(k1, k2, x1, x2))


def ref_threefry_pair(k0: int, k1: int, c0: int, c1: int) -> tuple[int, int]:
    """Threefry-2x32-20 on Python ints, as Random123 (Salmon et al. 2011)
    defines it: rotation R[d mod 8] in round d, the key schedule injected
    (with the injection number added to the second word) every 4 rounds."""
    rot = (13, 15, 26, 6, 17, 29, 16, 24)
    ks = (k0, k1, 0x1BD11BDA ^ k0 ^ k1)
    x0, x1 = (c0 + ks[0]) & MASK32, (c1 + ks[1]) & MASK32
    for d in range(20):
        x0 = (x0 + x1) & MASK32
        x1 = (((x1 << rot[d % 8]) | (x1 >> (32 - rot[d % 8]))) & MASK32) ^ x0
        if d % 4 == 3:
            s = d // 4 + 1
            x0, x1 = (x0 + ks[s % 3]) & MASK32, (x1 + ks[(s + 1) % 3] + s) & MASK32
    return x0, x1


_ref_threefry = np.vectorize(lambda *w: ref_threefry_pair(*map(int, w)), otypes=[np.int64, np.int64])

shape_rules[threefry2x32_p] = _threefry_shape
eval_rules[threefry2x32_p] = _threefry_eval
jvp_rules[threefry2x32_p] = _zero_jvp(threefry2x32)      # (JAX registers none: uint32 operands)
batch_rules[threefry2x32_p] = _multiple_broadcast_batcher(threefry2x32_p)   # batching.defbroadcasting
jax_facts[threefry2x32_p] = JaxFacts(
    "threefry2x32", "lambda k1, k2, x1, x2: __import__('jax.extend.random', fromlist=['random']).threefry2x32_p.bind(k1, k2, x1, x2)")
examples[threefry2x32_p] = [
    Example("scalar-key", (((), "u32", "bits"), ((), "u32", "bits"), ((5,), "u32", "bits"), ((5,), "u32", "bits")),
            threefry2x32, _ref_threefry),
    Example("keys-and-counts", tuple(((2, 3), "u32", "bits") for _ in range(4)), threefry2x32, _ref_threefry)]


# --------------------------------------------------------------------------
# iota_2x32_shape: a uint64 iota of `shape` as (high, low) uint32 words

iota_2x32_shape_p = primitive("iota_2x32_shape", ["shape"], multiple_results=True)


def iota_2x32_shape(shape):
    return bind(iota_2x32_shape_p, shape=tuple(int(d) for d in shape))


def iota_words(shape) -> tuple[np.ndarray, np.ndarray]:
    """(high, low) 32 bits of the row-major index of every element of `shape`
    (zeros for shape ()). What the partitionable threefry counts with."""
    idx = np.arange(math.prod(shape), dtype=np.uint64).reshape(shape)
    return (idx >> np.uint64(32)).astype(U32), (idx & np.uint64(MASK32)).astype(U32)


def _iota_shape(*, shape):
    if not shape:      # prng.iota_2x32_shape returns zeros itself; the lowering needs a shape
        raise PrimitiveError(iota_2x32_shape_p, "shape must have at least one dimension")
    return [ArrayType(shape, U32)] * 2


shape_rules[iota_2x32_shape_p] = _iota_shape
eval_rules[iota_2x32_shape_p] = lambda *, shape: list(iota_words(shape))
# no operands, so never differentiated or batched (an equation without a
# differentiated or batched input is copied as it is); these say so
jvp_rules[iota_2x32_shape_p] = _zero_jvp(iota_2x32_shape)
batch_rules[iota_2x32_shape_p] = lambda args, dims, *, shape: (iota_2x32_shape(shape), [None, None])
jax_facts[iota_2x32_shape_p] = JaxFacts("iota_2x32_shape",
                                        f"lambda shape: {PRNG}.iota_2x32_shape_p.bind(shape=shape)")
examples[iota_2x32_shape_p] = [Example(
    "shape-2x3", (((2, 3), "u32", "bits"),), lambda x: [xor(h, x) for h in iota_2x32_shape((2, 3))],
    lambda x: [x, (np.arange(6).reshape(2, 3) ^ x.astype(np.int64))])]


# --------------------------------------------------------------------------
# the key primitives (prng.py). Each evaluates one threefry2x32 function of
# threefry2x32.py per key, as JAX's `iterated_vmap_unary` lowering does.

def _check_impl(prim, impl):
    if impl != "fry":
        raise PrimitiveError(prim, f"impl={impl!r} is not supported; the spec models impl='fry' "
                                   f"(threefry2x32, jax's default)")


def _check_keys(prim, keys: ArrayType):
    if not is_key(keys.dtype):
        raise PrimitiveError(prim, f"operand must be a key array (key<fry>), got {keys}")


def _impl_from_jax(params: dict) -> dict:
    """JAX's `impl` param is a PRNGImpl (it prints as its tag, 'fry')."""
    return {**params, "impl": getattr(params["impl"], "tag", params["impl"])}


_IMPL_EMITTER = f"{PRNG}.prngs['threefry2x32']"
_KEY_DATA = (((2,), "u32", "bits"),)           # a raw key: jax.random.PRNGKey's uint32[2]
_KEY_ARRAY_DATA = (((3, 2), "u32", "bits"),)   # the data of a key<fry>[3]


def _per_key(fn):
    """A reference on raw key data uint32[..., 2]: fn(k0, k1) -> array, per key."""
    def ref(data):
        data = _as_bits(data)
        outs = [fn(int(k[0]), int(k[1])) for k in data.reshape(-1, 2)]
        return np.asarray(outs, np.int64).reshape(data.shape[:-1] + np.shape(outs[0]))
    return ref


# -- random_seed: jax.random.key(seed) ---------------------------------------

random_seed_p = primitive("random_seed", ["impl"])


def random_seed(seeds, impl="fry"):
    return bind(random_seed_p, seeds, impl=impl)


def _random_seed_shape(seeds, *, impl):
    _check_impl(random_seed_p, impl)
    if _kind(seeds.dtype) != "int":
        raise PrimitiveError(random_seed_p, f"seeds must be integers, got {seeds}")
    return [ArrayType(seeds.shape, KEY_FRY)]


def _random_seed_eval(seeds, *, impl):
    """threefry_seed: the key (seed >> 32, seed & 0xFFFFFFFF) in uint32; for
    32-bit seeds the high word is 0 (XLA shifts >= the width out)."""
    low = np.asarray(seeds).astype(U32)           # int32 -> uint32 wraps, as convert_element_type
    return keys_of(np.stack([np.zeros_like(low), low], axis=-1))


shape_rules[random_seed_p] = _random_seed_shape
eval_rules[random_seed_p] = _random_seed_eval
jvp_rules[random_seed_p] = _zero_jvp(random_seed)           # ad.defjvp_zero(random_seed_p)
batch_rules[random_seed_p] = vectorized_batcher(random_seed_p)   # batching.defvectorized
jax_facts[random_seed_p] = JaxFacts(
    "random_seed", f"lambda seeds, impl: {PRNG}.random_seed_p.bind(seeds, impl={_IMPL_EMITTER})",
    from_jax=_impl_from_jax)


# -- random_wrap: jax.random.wrap_key_data (and every raw-key function) -------

random_wrap_p = primitive("random_wrap", ["impl"])


def random_wrap(data, impl="fry"):
    return bind(random_wrap_p, data, impl=impl)


def _random_wrap_shape(data, *, impl):
    _check_impl(random_wrap_p, impl)
    if data.dtype != U32 or data.shape[-1:] != (2,):
        raise PrimitiveError(random_wrap_p, f"key data must be uint32[..., 2], got {data}")
    return [ArrayType(data.shape[:-1], KEY_FRY)]


def _random_wrap_batch(args, dims, *, impl):
    """prng.random_wrap_batch_rule: the batch dim to the front."""
    (x,), (d,) = args, dims
    return random_wrap(moveaxis(x, d, 0), impl=impl), 0


shape_rules[random_wrap_p] = _random_wrap_shape
eval_rules[random_wrap_p] = lambda data, *, impl: keys_of(data)
jvp_rules[random_wrap_p] = _zero_jvp(random_wrap)
batch_rules[random_wrap_p] = _random_wrap_batch
jax_facts[random_wrap_p] = JaxFacts(
    "random_wrap", f"lambda data, impl: {PRNG}.random_wrap_p.bind(data, impl={_IMPL_EMITTER})",
    from_jax=_impl_from_jax)


# -- random_unwrap: jax.random.key_data -----------------------------------------

random_unwrap_p = primitive("random_unwrap")


def random_unwrap(keys):
    return bind(random_unwrap_p, keys)


def _random_unwrap_shape(keys):
    _check_keys(random_unwrap_p, keys)
    return [ArrayType(keys.shape + (2,), U32)]


shape_rules[random_unwrap_p] = _random_unwrap_shape
eval_rules[random_unwrap_p] = lambda keys: key_words(keys).copy()
jvp_rules[random_unwrap_p] = _zero_jvp(random_unwrap)
batch_rules[random_unwrap_p] = vectorized_batcher(random_unwrap_p)
jax_facts[random_unwrap_p] = JaxFacts("random_unwrap", f"lambda keys: {PRNG}.random_unwrap_p.bind(keys)")
examples[random_wrap_p] = [
    Example("wrap-unwrap", _KEY_ARRAY_DATA, lambda k: random_unwrap(random_wrap(k)), lambda k: k)]
examples[random_unwrap_p] = [
    Example("scalar-key", _KEY_DATA, lambda k: random_unwrap(random_wrap(k)), lambda k: k)]


# -- random_bits: jax.random.bits, and the bits of uniform / bernoulli / normal --

random_bits_p = primitive("random_bits", ["bit_width", "shape"])


def random_bits(keys, bit_width=32, shape=()):
    return bind(random_bits_p, keys, bit_width=int(bit_width), shape=tuple(int(d) for d in shape))


def _random_bits_shape(keys, *, bit_width, shape):
    _check_keys(random_bits_p, keys)
    if bit_width != 32:
        raise PrimitiveError(random_bits_p, f"bit_width={bit_width} is not supported; the spec models "
                                            f"bit_width=32 (uint32 bits: float32 uniforms, int32 randint)")
    return [ArrayType(keys.shape + tuple(shape), U32)]


def _random_bits_eval(keys, *, bit_width, shape):
    """_threefry_random_bits_partitionable: hash each element's index
    (iota_2x32_shape) under the key, xor the two words."""
    words = key_words(keys)
    lead = words.shape[:-1] + (1,) * len(shape)
    hi, lo = iota_words(shape)
    b1, b2 = threefry2x32_words(words[..., 0].reshape(lead), words[..., 1].reshape(lead), hi, lo)
    return np.broadcast_to(b1 ^ b2, keys.shape + tuple(shape)).copy()


def _ref_bits(shape):
    n = math.prod(shape)
    return _per_key(lambda k0, k1: np.reshape(
        [a ^ b for a, b in (ref_threefry_pair(k0, k1, i >> 32, i & MASK32) for i in range(n))], shape))


shape_rules[random_bits_p] = _random_bits_shape
eval_rules[random_bits_p] = _random_bits_eval
jvp_rules[random_bits_p] = _zero_jvp(random_bits)
batch_rules[random_bits_p] = vectorized_batcher(random_bits_p)     # batching.defvectorized
jax_facts[random_bits_p] = JaxFacts(
    "random_bits", f"lambda keys, bit_width, shape: {PRNG}.random_bits_p.bind(keys, bit_width=bit_width, "
                   "shape=tuple(shape))")
examples[random_bits_p] = [
    Example("key-2x3", _KEY_DATA, lambda k: random_bits(random_wrap(k), 32, (2, 3)), _ref_bits((2, 3))),
    Example("keys-4", _KEY_ARRAY_DATA, lambda k: random_bits(random_wrap(k), 32, (4,)), _ref_bits((4,))),
    Example("key-scalar", _KEY_DATA, lambda k: random_bits(random_wrap(k), 32, ()), _ref_bits(()))]


# -- random_split: jax.random.split -------------------------------------------

random_split_p = primitive("random_split", ["shape"])


def random_split(keys, shape=(2,)):
    return bind(random_split_p, keys, shape=tuple(int(d) for d in shape))


def _random_split_shape(keys, *, shape):
    _check_keys(random_split_p, keys)
    return [ArrayType(keys.shape + tuple(shape), KEY_FRY)]


def _random_split_eval(keys, *, shape):
    """_threefry_split_foldlike: the new keys are the two hash words of each index."""
    words = key_words(keys)
    lead = words.shape[:-1] + (1,) * len(shape)
    hi, lo = iota_words(shape)
    b1, b2 = threefry2x32_words(words[..., 0].reshape(lead), words[..., 1].reshape(lead), hi, lo)
    out = keys.shape + tuple(shape)
    return keys_of(np.stack([np.broadcast_to(b1, out), np.broadcast_to(b2, out)], axis=-1))


def _ref_split(shape):
    n = math.prod(shape)
    return _per_key(lambda k0, k1: np.reshape(
        [ref_threefry_pair(k0, k1, i >> 32, i & MASK32) for i in range(n)], tuple(shape) + (2,)))


shape_rules[random_split_p] = _random_split_shape
eval_rules[random_split_p] = _random_split_eval
jvp_rules[random_split_p] = _zero_jvp(random_split)
batch_rules[random_split_p] = vectorized_batcher(random_split_p)   # batching.defvectorized
jax_facts[random_split_p] = JaxFacts(
    "random_split", f"lambda keys, shape: {PRNG}.random_split_p.bind(keys, shape=tuple(shape))")
examples[random_split_p] = [
    Example("key-2", _KEY_DATA, lambda k: random_unwrap(random_split(random_wrap(k), (2,))), _ref_split((2,))),
    Example("keys-2x2", _KEY_ARRAY_DATA, lambda k: random_unwrap(random_split(random_wrap(k), (2, 2))),
            _ref_split((2, 2)))]


# -- random_fold_in: jax.random.fold_in ---------------------------------------

random_fold_in_p = primitive("random_fold_in")


def random_fold_in(keys, msgs):
    if isinstance(msgs, int):
        msgs = np.uint32(msgs & MASK32)         # jax.random.fold_in: jnp.uint32(data)
    return bind(random_fold_in_p, keys, msgs)


def _random_fold_in_shape(keys, msgs):
    """random_fold_in_abstract_eval: the keys' dtype, the broadcast shape."""
    _check_keys(random_fold_in_p, keys)
    if _kind(msgs.dtype) != "int":
        raise PrimitiveError(random_fold_in_p, f"messages must be integers, got {msgs}")
    return [ArrayType(_broadcast_shape(random_fold_in_p, keys, msgs), KEY_FRY)]


def _random_fold_in_eval(keys, msgs):
    """threefry_fold_in: hash the count threefry_seed(msg) = (0, msg) under the key."""
    words = key_words(keys)
    data = np.asarray(msgs).astype(U32)         # jnp.asarray(data, dtype='uint32')
    o1, o2 = threefry2x32_words(words[..., 0], words[..., 1], np.zeros_like(data), data)
    return keys_of(np.stack([o1, o2], axis=-1))


def _ref_fold_in(data, msgs):
    data, msgs = _as_bits(data), _as_bits(msgs)
    k0, k1 = np.broadcast_arrays(data[..., 0], data[..., 1], msgs)[:2]
    ms = np.broadcast_to(msgs, k0.shape)
    return np.asarray([ref_threefry_pair(int(a), int(b), 0, int(m)) for a, b, m in
                       zip(k0.ravel(), k1.ravel(), ms.ravel())], np.int64).reshape(k0.shape + (2,))


shape_rules[random_fold_in_p] = _random_fold_in_shape
eval_rules[random_fold_in_p] = _random_fold_in_eval
jvp_rules[random_fold_in_p] = _zero_jvp(random_fold_in)
batch_rules[random_fold_in_p] = broadcast_batcher(random_fold_in_p)   # batching.defbroadcasting
jax_facts[random_fold_in_p] = JaxFacts("random_fold_in",
                                       f"lambda keys, msgs: {PRNG}.random_fold_in_p.bind(keys, msgs)")
examples[random_fold_in_p] = [
    Example("key-msg", _KEY_DATA + (((), "u32", "bits"),),
            lambda k, m: random_unwrap(random_fold_in(random_wrap(k), m)), _ref_fold_in),
    Example("keys-msgs", _KEY_ARRAY_DATA + (((3,), "u32", "bits"),),
            lambda k, m: random_unwrap(random_fold_in(random_wrap(k), m)), _ref_fold_in)]
# -- random_clone: jax.random.clone (flax's nn.RNN clones its rngs) ---------------

random_clone_p = primitive("random_clone")


def random_clone(keys):
    """jax.random.clone: the identity outside key-reuse checking
    (random/core.py:3398; its abstract eval and lowering return the
    operand), on a typed key array or a raw key's data as it is given
    (flax's nn.RNN clones `PRNGKey`s: uint32[2], never wrapped)."""
    return bind(random_clone_p, keys)


def _random_clone_shape(keys):
    """Any key array or integer array (raw key data), unchanged. JAX binds
    a float operand too, but registers no JVP rule (a nonzero tangent
    raises NotImplementedError there); no key is a float, so the spec
    refuses it."""
    if not is_key(keys.dtype) and _kind(keys.dtype) != "int":
        raise PrimitiveError(random_clone_p, f"operand must be a key array or raw key data (integers), "
                                             f"got {keys}")
    return [keys]


shape_rules[random_clone_p] = _random_clone_shape
eval_rules[random_clone_p] = lambda keys: np.array(keys, copy=True)
# random/core.py:3330-3334 registers no JVP rule: a key's tangent is always a
# symbolic zero, which JVPTrace.process_primitive binds through without a rule
jvp_rules[random_clone_p] = _zero_jvp(random_clone)
batch_rules[random_clone_p] = vectorized_batcher(random_clone_p)   # batching.defvectorized
jax_facts[random_clone_p] = JaxFacts("random_clone", "lambda keys: jax.random.clone(keys)")
examples[random_clone_p] = [
    Example("keys", _KEY_ARRAY_DATA, lambda k: random_unwrap(random_clone(random_wrap(k))), lambda k: k),
    Example("raw-key-data", _KEY_DATA, random_clone, lambda k: k),
    Example("scalar-key-then-bits", _KEY_DATA, lambda k: random_bits(random_clone(random_wrap(k)), 32, (2,)),
            _ref_bits((2,)))]
examples[random_seed_p] = [
    Example("i32-seeds", (((3,), "i32", "bits"),), lambda s: random_unwrap(random_seed(s)),
            lambda s: np.stack([np.zeros_like(s, np.int64), _as_bits(s)], axis=-1)),
    Example("u32-seed", (((), "u32", "bits"),), lambda s: random_unwrap(random_seed(s)),
            lambda s: np.stack([np.zeros_like(s, np.int64), _as_bits(s)], axis=-1))]


# --------------------------------------------------------------------------
# random_gamma: jax.random.gamma / loggamma, and beta and dirichlet through
# loggamma (jax/_src/random/core.py: random_gamma_p, _gamma_impl, _gamma_one,
# _gamma_grad, _gamma_batching_rule; lax/special.py: random_gamma_grad)

random_gamma_p = primitive("random_gamma", ["log_space"])
F32 = np.dtype(np.float32)


def random_gamma(keys, a, log_space=False):
    """One Gamma(a, 1) sample per element of `a` (its log where log_space),
    from the keys, a prefix of a's shape (one key per leading index)."""
    return bind(random_gamma_p, keys, a, log_space=bool(log_space))


def _random_gamma_shape(keys, a, *, log_space):
    """_random_gamma_abstract_eval: a's type. The keys' shape must be a
    prefix of a's (what _gamma_impl's split per key assumes). The spec
    models float32 samples: they draw 32 random bits per uniform, which
    is what random_bits models (f64 draws 64, f16/bf16 draw 16)."""
    _check_keys(random_gamma_p, keys)
    if a.dtype != F32:
        raise PrimitiveError(random_gamma_p, f"a must be float32, got {a}; the spec models float32 samples "
                                             f"(32-bit uniforms)")
    if tuple(a.shape[:keys.ndim]) != tuple(keys.shape):
        raise PrimitiveError(random_gamma_p, f"the keys' shape must be a prefix of a's, got {keys} and {a}")
    return [a]


# -- the sampler: _gamma_impl / _gamma_one, in float32 numpy, all elements at
# once as the vmapped lowering (_gamma_impl(use_vmap=True)) runs them: a while
# loop's body applies to the elements whose condition holds

def _split_words(words, n: int) -> np.ndarray:
    """jax.random._split of each key of uint32[m, 2] into n: uint32[m, n, 2]."""
    return key_words(_random_split_eval(keys_of(words), shape=(n,)))


def _uniform_f32(words, lo=np.float32(0), hi=np.float32(1)) -> np.ndarray:
    """jax.random._uniform(key, lo, hi, (), float32) per key: 23 random
    mantissa bits under the exponent of 1.0, minus 1, scaled to [lo, hi)."""
    bits = _random_bits_eval(keys_of(words), bit_width=32, shape=())
    floats = ((bits >> np.uint32(9)) | np.uint32(0x3F800000)).view(F32) - np.float32(1)
    return np.maximum(lo, floats * (hi - lo) + lo)


def _normal_f32(words) -> np.ndarray:
    """jax.random._normal_real: sqrt(2) * erf_inv(u), u uniform in
    (nextafter(-1, 0), 1), with the spec's erf_inv (spec/prims_math.py)."""
    u = _uniform_f32(words, np.nextafter(np.float32(-1), np.float32(0)), np.float32(1))
    return np.float32(np.sqrt(2)) * eval_rules[erf_inv_p](u)


def _marsaglia_tsang(keys, d, c):
    """_gamma_one's rejection loop for Gamma(alpha >= 1), d = alpha - 1/3,
    c = 1/3 / sqrt(d) (Marsaglia & Tsang 2000): draw x ~ N(0, 1) until
    v = 1 + c x > 0 (split the key for each try), U uniform; accept
    V = v^3 when U < 1 - 0.0331 x^4 or log U < x^2/2 + d (1 - V + log V).
    The initial state (X, V, U) = (0, 1, 2) is rejected. Returns V."""
    one = np.float32(1)
    X, V, U = np.zeros_like(d), np.ones_like(d), np.full_like(d, 2)

    def rejected():
        return (U >= one - np.float32(0.0331) * (X * X)) & \
            (np.log(U) >= X * np.float32(0.5) + d * ((one - V) + np.log(V)))
    todo = rejected()
    while todo.any():
        k3 = _split_words(keys[todo], 3)
        keys[todo] = k3[:, 0]
        k, x, v = k3[:, 1], np.zeros(len(k3), F32), np.full(len(k3), -1, F32)
        cs = c[todo]
        again = v <= 0
        while again.any():
            k2 = _split_words(k[again], 2)
            k[again], x[again] = k2[:, 0], _normal_f32(k2[:, 1])
            v[again] = one + x[again] * cs[again]
            again = v <= 0
        X[todo], V[todo], U[todo] = x * x, (v * v) * v, _uniform_f32(k3[:, 2])
        todo = rejected()
    return V


def _gamma_one(keys, alpha, log_space: bool) -> np.ndarray:
    """_gamma_one for each key of uint32[n, 2] and alpha of float32[n]: an
    alpha < 1 is boosted to alpha + 1 and the sample scaled by
    u^(1/alpha) (log space: plus log(u)/alpha, where log u = -Exponential)."""
    one = np.float32(1)
    boost_mask = alpha >= one
    boosted = np.where(boost_mask, alpha, alpha + one)
    d = boosted - np.float32(1. / 3.)
    c = np.float32(1. / 3.) / np.sqrt(d)
    pair = _split_words(keys, 2)
    V = _marsaglia_tsang(pair[:, 0].copy(), d, c)
    u = _uniform_f32(pair[:, 1])
    if log_space:
        log_samples = -(-np.log1p(-u))                  # neg(exponential(subkey))
        log_boost = np.where(boost_mask | (log_samples == 0), np.float32(0), log_samples * (one / alpha))
        return (np.log(d) + np.log(V)) + log_boost
    boost = np.where(boost_mask, one, np.power(one - u, one / alpha))
    return (d * V) * boost


def _random_gamma_eval(keys, a, *, log_space):
    """_gamma_impl: each key split into one key per element of a's
    remaining dims, then _gamma_one per element, in float32."""
    _numeric(random_gamma_p, a)
    a = np.asarray(a, F32)
    words = key_words(keys).reshape(-1, 2)
    per_key = math.prod(a.shape[np.ndim(keys):])
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = _gamma_one(_split_words(words, per_key).reshape(-1, 2), a.reshape(-1), log_space)
    return np.asarray(out, F32).reshape(a.shape)


# -- lax.special.random_gamma_grad(a, x): d x / d a for x ~ Gamma(a, 1) at a
# fixed quantile, -(dP/da) / (dP/dx) with P(a, x) the regularized incomplete
# gamma function. Not a primitive in jax 0.10.2: random_gamma_grad_impl traces
# Cephes' series / continued fraction for P (and its derivative in a) inline,
# as the while loops below (IgammaMode.SAMPLE_DERIVATIVE), for scalar a, x.

_F32_EPS = np.float32(np.finfo(np.float32).eps)


def _any(p):
    """special._any: reduce_or over every axis."""
    return reduce_or(p, tuple(range(p.ndim)))


def _igamma_series_step(vals):
    """_igamma_series's body_fn: the next term c = c x / r of the series
    P = ax / a * sum c, with dc/da and d(sum)/da, where enabled."""
    enabled, r, c, ans, x, dc_da, dans_da = vals
    r = add(r, _lit_like(r, 1.))
    dc_da = sub(mul(dc_da, div(x, r)), div(mul(c, x), mul(r, r)))
    dans_da = add(dans_da, dc_da)
    c = mul(c, div(x, r))
    ans = add(ans, c)
    conditional = and_(enabled, gt(lax_abs(div(dc_da, dans_da)), _F32_EPS))
    return (conditional, *(select_n(enabled, old, new) for old, new in
                           zip(vals[1:], (r, c, ans, x, dc_da, dans_da))))


def _igamma_series(x, a, enabled):
    """_igamma_series(ax, x, a, enabled, dtype, SAMPLE_DERIVATIVE):
    -(d(sum)/da + sum * (log x - digamma(a + 1))) * x / a."""
    init = (enabled, a, _full_like(a, 1), _full_like(a, 1), x, _full_like(a, 0), _full_like(a, 0))
    vals = while_loop(lambda v: _any(v[0]), _igamma_series_step, init)
    ans, dans_da = vals[3], vals[6]
    dlogax_da = sub(log(x), digamma(add(a, _lit_like(a, 1))))
    return div(mul(neg(add(dans_da, mul(ans, dlogax_da))), x), a)


def _igammac_cf_step(vals):
    """_igammac_continued_fraction's body_fn: the next convergent pk/qk of
    Q's continued fraction with its derivatives in a, rescaled by eps when
    |pk| > 1/eps, where enabled."""
    (enabled, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da) = vals
    c, y, z = add(c, _lit_like(c, 1)), add(y, _lit_like(y, 1)), add(z, _lit_like(z, 2))
    yc = mul(y, c)
    pk, qk = sub(mul(pkm1, z), mul(pkm2, yc)), sub(mul(qkm1, z), mul(qkm2, yc))
    qk_is_nonzero = ne(qk, _lit_like(qk, 0))
    r = div(pk, qk)
    t = select_n(qk_is_nonzero, _full_like(r, 1), lax_abs(div(sub(ans, r), r)))
    ans = select_n(qk_is_nonzero, ans, r)
    dpk_da = add(sub(sub(mul(dpkm1_da, z), pkm1), mul(dpkm2_da, yc)), mul(pkm2, c))
    dqk_da = add(sub(sub(mul(dqkm1_da, z), qkm1), mul(dqkm2_da, yc)), mul(qkm2, c))
    dans_da_new = select_n(qk_is_nonzero, dans_da, div(sub(dpk_da, mul(ans, dqk_da)), qk))
    grad_conditional = select_n(qk_is_nonzero, _full_like(dans_da, 1), lax_abs(sub(dans_da_new, dans_da)))
    rescale = gt(lax_abs(pk), integer_pow(_lit_like(pk, _F32_EPS), -1))
    # (pkm2, pkm1, qkm2, qkm1, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da) shift by one, then rescale
    shifted = [select_n(rescale, v, mul(v, _lit_like(v, _F32_EPS)))
               for v in (pkm1, pk, qkm1, qk, dpkm1_da, dqkm1_da, dpk_da, dqk_da)]
    pkm2, pkm1, qkm2, qkm1, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da = shifted
    conditional = and_(enabled, gt(grad_conditional, _lit_like(grad_conditional, _F32_EPS)))
    new = (ans, t, y, z, None, pkm1, qkm1, pkm2, qkm2, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da_new)
    return (conditional, *(c if n is None else select_n(enabled, old, n) for old, n in zip(vals[1:], new)))


def _igammac_continued_fraction(x, a, enabled):
    """_igammac_continued_fraction(ax, x, a, enabled, dtype, SAMPLE_DERIVATIVE):
    -(dQ'/da + Q' (log x - digamma(a))) x, Q' the fraction (at most 2000 terms)."""
    y = sub(_lit_like(a, 1), a)
    z = add(add(x, y), _lit_like(x, 1))
    pkm1 = add(x, _lit_like(x, 1))
    qkm1 = mul(z, x)
    ans = div(pkm1, qkm1)
    dqkm1_da = neg(x)
    dans_da = div(sub(_full_like(x, 0), mul(ans, dqkm1_da)), qkm1)
    init = (enabled, ans, _full_like(x, 1), y, z, _lit_like(x, 0), pkm1, qkm1, _full_like(x, 1), x,
            _full_like(x, 0), _full_like(x, 0), _full_like(x, 0), dqkm1_da, dans_da)
    vals = while_loop(lambda v: and_(lt(v[5], _lit_like(v[5], 2000)), _any(v[0])), _igammac_cf_step, init)
    dlogax_da = sub(log(x), digamma(a))
    return neg(mul(add(vals[14], mul(vals[1], dlogax_da)), x))


def random_gamma_grad(a, x):
    """special.random_gamma_grad_impl(a, x, dtype=float32): the series where
    x <= 1 or x <= a, else the continued fraction; 0 at x = 0, nan outside
    the domain (x < 0, a <= 0) or for a nan operand."""
    is_nan = or_(ne(a, a), ne(x, x))
    x_is_zero = eq(x, _full_like(x, 0))
    domain_error = or_(lt(x, _full_like(x, 0)), le(a, _full_like(a, 0)))
    use_igammac = and_(gt(x, _full_like(x, 1)), gt(x, a))
    ax = sub(sub(mul(a, log(x)), x), lgamma(a))
    underflow = lt(ax, neg(log(np.float32(np.finfo(np.float32).max))))
    exp(ax)          # (ax = exp(ax): the SAMPLE_DERIVATIVE mode does not read it)
    enabled = not_(or_(or_(or_(x_is_zero, domain_error), underflow), is_nan))
    from_fraction = neg(_igammac_continued_fraction(x, a, and_(enabled, use_igammac)))
    output = select_n(use_igammac, _igamma_series(x, a, and_(enabled, not_(use_igammac))), from_fraction)
    output = select_n(x_is_zero, output, _full_like(output, 0))
    return select_n(or_(domain_error, is_nan), output, _full_like(a, float("nan")))


# -- random_gamma's JVP and batching rules ------------------------------------

def _flat(x, shape):
    """x reshaped to `shape` (lax.reshape: nothing where x has that shape, rank > 0)."""
    return x if x.ndim and tuple(x.shape) == tuple(shape) else reshape(x, shape)


def _gamma_grad(sample, a, log_space: bool):
    """core.py's _gamma_grad: random_gamma_grad(alpha, sample) per element
    of the flattened operands (d log x / da = (dx/da) / x in log space,
    x = exp(log x), a 0 replaced by the tiniest normal float), reshaped to
    a's shape. On the CPU it is lax.map, a scan over the elements; on
    another platform vmap of the scalar function (which batches its loops).
    JAX asks its default backend; the spec asks the lowering platform (the
    two differ only for a check run on the CPU of a machine with another
    default backend)."""
    n = math.prod(a.shape)
    samples, alphas = _flat(sample, (n,)), _flat(a, (n,))
    if log_space:
        samples = exp(samples)
        zero, tiny = _lit_like(sample, 0), _full_like(samples, np.finfo(F32).tiny)
        samples = select_n(eq(samples, zero), samples, tiny)

        def grad(alpha, x):
            return div(random_gamma_grad(alpha, x), x)
    else:
        grad = random_gamma_grad
    if _platform.get() == "cpu":
        _, grads = scan(lambda _, ax: (None, grad(*ax)), None, (alphas, samples))
    else:
        scalar = ArrayType((), F32)
        (grads,), (d,) = vmap_traced(trace(grad, scalar, scalar), [alphas, samples], [0, 0], n)
        grads = grads if d == 0 else moveaxis(grads, d, 0)
    return _flat(grads, a.shape)


def _random_gamma_jvp(primals, tangents, *, log_space):
    """ad.defjvp2(random_gamma_p, None,
                  lambda tangent, ans, key, a, **kwds: tangent * _gamma_grad(ans, a, **kwds))
    The keys' tangent is a symbolic zero (no rule: not differentiable)."""
    (keys, a), (_, ta) = primals, tangents
    ans = random_gamma(keys, a, log_space=log_space)
    if isinstance(ta, Zero):
        return ans, None
    return ans, mul(ta, _gamma_grad(ans, a, log_space))


def _random_gamma_batch(args, dims, *, log_space):
    """_gamma_batching_rule: both operands' batch dims to the front (an
    unbatched one broadcast to the batch size)."""
    size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
    keys, a = (bdim_at_front(x, d, size) for x, d in zip(args, dims))
    return random_gamma(keys, a, log_space=log_space), 0


shape_rules[random_gamma_p] = _random_gamma_shape
eval_rules[random_gamma_p] = _random_gamma_eval
jvp_rules[random_gamma_p] = _random_gamma_jvp
batch_rules[random_gamma_p] = _random_gamma_batch
jax_facts[random_gamma_p] = JaxFacts(
    "random_gamma", "lambda keys, a, log_space: jax._src.random.random_gamma_p.bind(keys, a, log_space=log_space)")


def _ref_gamma(alpha, log_space: bool):
    """An independent reference on raw key data: Marsaglia & Tsang's sampler
    written out per element in float64, on ref_threefry_pair's words (a
    split's i-th key is the hash of (0, i); a scalar draw's bits the xor of
    the hash of (0, 0)), with the standard library's inverse normal CDF."""
    from statistics import NormalDist
    alpha = np.asarray(alpha, np.float64)

    def split(k, n):
        return [ref_threefry_pair(k[0], k[1], 0, i) for i in range(n)]

    def uniform(k, lo=0.0):
        return lo + (1 - lo) * (((operator.xor(*ref_threefry_pair(k[0], k[1], 0, 0))) >> 9) / 2 ** 23)

    def one(k, a):
        d = (a if a >= 1 else a + 1) - 1 / 3
        k, k_boost = split(k, 2)
        while True:
            k, k_x, k_u = split(k, 3)
            v = -1.0
            while v <= 0:
                k_x, k_n = split(k_x, 2)
                x = NormalDist().inv_cdf((uniform(k_n, -1 + 2 ** -24) + 1) / 2)
                v = 1 + x / math.sqrt(9 * d)
            u = uniform(k_u)
            if u < 1 - 0.0331 * x ** 4 or math.log(u) < x * x / 2 + d * (1 - v ** 3 + math.log(v ** 3)):
                break
        boost = 0.0 if a >= 1 else math.log1p(-uniform(k_boost)) / a
        return math.log(d * v ** 3) + boost if log_space else d * v ** 3 * math.exp(boost)

    def ref(data):
        keys = _as_bits(data).reshape(-1, 2)
        per_key = alpha.size // len(keys)
        outs = [one(k, a) for k, a in zip((s for k in keys for s in split(tuple(map(int, k)), per_key)),
                                          alpha.ravel())]
        return np.reshape(outs, alpha.shape)
    return ref


def _as_dtype(x, dtype):
    """x in `dtype` (the tests draw float operands in float64 too)."""
    return x if x.dtype == dtype else convert_element_type(x, dtype)


_ALPHAS = np.float32([[0.3, 1.0, 2.5], [0.8, 5.0, 40.0]])     # a boosted alpha < 1, a large one

examples[random_gamma_p] = [
    Example("gamma-2x3", _KEY_DATA, lambda k: random_gamma(random_wrap(k), _ALPHAS), _ref_gamma(_ALPHAS, False)),
    Example("loggamma-keys-3x2", _KEY_ARRAY_DATA,
            lambda k: random_gamma(random_wrap(k), _ALPHAS.T.copy(), log_space=True),
            _ref_gamma(_ALPHAS.T, True)),
    Example("scaled-sample", _KEY_DATA + (((3,), "f32", "normal"),),
            lambda k, x: mul(x, _as_dtype(random_gamma(random_wrap(k), _ALPHAS[1]), x.dtype)),
            lambda k, x: x * _ref_gamma(_ALPHAS[1], False)(k))]
