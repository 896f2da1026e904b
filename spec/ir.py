"""The spec's intermediate representation: a small, jaxpr-like IR.

A :class:`Program` is a list of first-order equations over typed variables::

    { lambda ; a:f32[3] b:f32[3]. let
        c:f32[3] = sin a
        d:f32[3] = mul c b
      in (d,) }

* an :class:`ArrayType` is a shape and a dtype (``f32[3, 4]``);
* a :class:`Var` is a named, typed value, defined exactly once;
* a :class:`Literal` is a constant scalar written inline (``2.0:f32[]``);
* a constant is a non-scalar array captured by the program (a *constvar*);
* an :class:`Eqn` applies a primitive to input atoms, binding output vars.

Sub-programs (the body of ``call`` or ``remat``) are ordinary params.
Nothing here knows any primitive: primitives and their rules live in
``spec/prims_*.py`` and register themselves in the tables of ``spec/core.py``.
"""
from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes

import numpy as np

# --------------------------------------------------------------------------
# dtypes and array types

float0 = np.dtype([("float0", np.void, 0)])   # never used for values; documentation only

# A typed PRNG key array key<fry>[3] (jax.random.key's threefry2x32 keys) is
# a numpy array of shape (3,) whose element is the key's two uint32 words:
# shapes are the key array's own (as JAX's), `x["fry"]` is its uint32[3, 2]
# data (jax.random.key_data). Keys are not numbers: no arithmetic, no tangents.
KEY_FRY = np.dtype([("fry", np.uint32, (2,))])

DTYPES = {
    "f64": np.dtype("float64"),
    "f32": np.dtype("float32"),
    "f16": np.dtype("float16"),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    # the fnuz fp8 types (no infinity, no negative zero: what overflows is NaN)
    "f8_e4m3fnuz": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "f8_e5m2fnuz": np.dtype(ml_dtypes.float8_e5m2fnuz),
    "f8_e4m3b11fnuz": np.dtype(ml_dtypes.float8_e4m3b11fnuz),
    "i4": np.dtype(ml_dtypes.int4),
    "u4": np.dtype(ml_dtypes.uint4),
    "i8": np.dtype("int8"),
    "i16": np.dtype("int16"),
    "i32": np.dtype("int32"),
    "i64": np.dtype("int64"),
    "u8": np.dtype("uint8"),
    "u16": np.dtype("uint16"),
    "u32": np.dtype("uint32"),
    "u64": np.dtype("uint64"),
    "bool": np.dtype("bool"),
    "key<fry>": KEY_FRY,
    "c64": np.dtype("complex64"),
    "c128": np.dtype("complex128"),
}
SHORT_NAMES = {dt: name for name, dt in DTYPES.items()}
FLOAT_DTYPES = frozenset(DTYPES[n] for n in ("f64", "f32", "f16", "bf16", "f8_e4m3fn", "f8_e5m2", "f8_e4m3fnuz",
                                             "f8_e5m2fnuz", "f8_e4m3b11fnuz"))
COMPLEX_DTYPES = frozenset(DTYPES[n] for n in ("c64", "c128"))
KEY_DTYPES = frozenset({KEY_FRY})


def canonical_dtype(dtype) -> np.dtype:
    """The spec dtype for `dtype` (a numpy dtype, a type or a short name)."""
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"unsupported dtype {dtype!r}; supported: {', '.join(DTYPES)}") from e
    if dt not in SHORT_NAMES:
        raise TypeError(f"unsupported dtype {dt}; supported: {', '.join(DTYPES)}")
    return dt


def is_float(dtype) -> bool:
    """Inexact values (real and complex floats: jnp.inexact) carry tangents;
    integer, bool and key values never do (their tangents and cotangents
    are float0 in JAX). Where "a real float" is meant: `is_real_float`."""
    return np.dtype(dtype) in FLOAT_DTYPES or np.dtype(dtype) in COMPLEX_DTYPES


def is_real_float(dtype) -> bool:
    """A real floating dtype (jnp.floating): finfo, ordering, infinities."""
    return np.dtype(dtype) in FLOAT_DTYPES


def is_complex(dtype) -> bool:
    """complex64 or complex128 (jnp.complexfloating)."""
    return np.dtype(dtype) in COMPLEX_DTYPES


def real_dtype(dtype) -> np.dtype:
    """The dtype of a complex dtype's parts (float32 for complex64; JAX's
    `_real_dtype`, np.finfo(dtype).dtype); a real dtype itself."""
    return np.dtype(np.finfo(dtype).dtype) if is_complex(dtype) else np.dtype(dtype)


def complex_dtype(dtype) -> np.dtype:
    """The complex dtype with parts of `dtype` (complex64 for float32;
    JAX's `_complex_dtype`); a complex dtype itself."""
    return (np.zeros((), dtype) + np.zeros((), np.complex64)).dtype


def supports_inf(dtype) -> bool:
    """Whether a float dtype has infinities (jax.dtypes.supports_inf): not
    the fnuz fp8 types, whose overflow is NaN."""
    return bool(np.isinf(np.array(np.inf).astype(np.dtype(dtype))))


def is_key(dtype) -> bool:
    """A typed PRNG key dtype (key<fry>)."""
    return np.dtype(dtype) in KEY_DTYPES


@dataclass(frozen=True)
class ArrayType:
    """The type of an array value: ``f32[3, 4]`` is ArrayType((3, 4), float32)."""
    shape: tuple[int, ...]
    dtype: np.dtype
    memory_space: str | None = None    # None: device memory; e.g. 'pinned_host' when offloaded

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))
        if any(d < 0 for d in self.shape):
            raise ValueError(f"negative dimension in shape {self.shape}")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def with_memory_space(self, memory_space) -> "ArrayType":
        return ArrayType(self.shape, self.dtype, memory_space)

    def __str__(self):
        space = "<host>" if self.memory_space and "host" in self.memory_space else (
            f"<{self.memory_space}>" if self.memory_space else "")
        return f"{SHORT_NAMES[self.dtype]}{space}[{','.join(map(str, self.shape))}]"

    __repr__ = __str__


class _DTypeName:
    """``spec.f32[3, 4]`` builds ArrayType((3, 4), float32); ``spec.f32[()]`` a scalar."""

    def __init__(self, name):
        self.name, self.dtype = name, DTYPES[name]

    def __getitem__(self, shape) -> ArrayType:
        if not isinstance(shape, tuple):
            shape = (shape,)
        return ArrayType(shape, self.dtype)

    def __repr__(self):
        return f"spec.{self.name}"


f64, f32, f16, bf16, i32, u32 = (_DTypeName(n) for n in ("f64", "f32", "f16", "bf16", "i32", "u32"))
bool_ = _DTypeName("bool")
key_fry = _DTypeName("key<fry>")


def type_of(value) -> ArrayType:
    """The ArrayType of a concrete numpy value."""
    value = np.asarray(value)
    return ArrayType(value.shape, value.dtype)


# --------------------------------------------------------------------------
# atoms, equations, programs

_var_ids = itertools.count()


class Var:
    """A variable: defined once (a program input or an equation output).

    Identity is object identity; `hint` only helps printing (names are
    assigned afresh by the printer, like jaxprs: a, b, c, ...)."""
    __slots__ = ("type", "id")

    def __init__(self, type: ArrayType):
        assert isinstance(type, ArrayType), type
        self.type = type
        self.id = next(_var_ids)

    def __repr__(self):
        return f"Var#{self.id}:{self.type}"


@dataclass(frozen=True, eq=False)
class Literal:
    """A constant written inline in the program. Scalars print as
    ``2.0:f32[]``; non-scalar constants print as constvars."""
    value: np.ndarray
    type: ArrayType
    # A constant JAX computes while tracing (a tracer there, which the jaxpr
    # shows folded to a literal): a JaxprTrace never keeps it inline, so when
    # linearizing it is a residual ("from a literal") whoever reads it.
    traced: bool = field(default=False, compare=False)

    @staticmethod
    def of(value, dtype=None) -> "Literal":
        value = np.asarray(value, dtype=dtype)
        return Literal(value, type_of(value))

    @property
    def is_scalar(self) -> bool:
        """Written inline (a JAX literal): a scalar number, not a 0-d array
        JAX keeps a constvar (`as_constvar`). A key is never one: JAX keeps
        a closed-over key a constvar (a constant)."""
        return (self.type.ndim == 0 and not is_key(self.type.dtype)
                and _CONSTVAR_ARRAYS.get(id(self.value)) is not self.value)

    def __repr__(self):
        return f"Literal({self.value!r})"


Atom = Var | Literal


# 0-d arrays JAX keeps as constvars, not inline (a closed-over 0-d jax Array:
# saved_residuals says "from a constant"), by identity: every Literal of one,
# however a rule passes the array on, is a constant (`Literal.is_scalar`)
_CONSTVAR_ARRAYS: "weakref.WeakValueDictionary[int, np.ndarray]" = weakref.WeakValueDictionary()


def as_constvar(value: np.ndarray) -> np.ndarray:
    """`value` (a 0-d array), marked one JAX keeps a constvar."""
    _CONSTVAR_ARRAYS[id(value)] = value
    return value


@dataclass(frozen=True, eq=False)
class Primitive:
    """A primitive operation. Its rules live in the tables of spec/core.py."""
    name: str
    multiple_results: bool = False

    def __repr__(self):
        return self.name


@dataclass(eq=False)
class Eqn:
    """``outputs = primitive[params] inputs``."""
    primitive: Primitive
    inputs: list[Atom]
    outputs: list[Var]
    params: dict[str, Any] = field(default_factory=dict)
    why: str | None = field(default=None, compare=False)   # set when a checkpoint's policy decided about it
    residual_outputs: int = field(default=0, compare=False)  # trailing outputs that are residuals (a known half)


@dataclass(eq=False)
class Program:
    """``{ lambda ; inputs. let eqns in (outputs,) }``.

    Non-scalar constants are Literals too; they are printed as constvars."""
    inputs: list[Var]
    eqns: list[Eqn]
    outputs: list[Atom]
    input_names: tuple[str, ...] | None = None   # the traced function's parameter names
    # a JVP program's tangent lifetimes, as JAX's linearization holds them
    # (spec.tangent_lifetimes.TangentHolds; None for any other program)
    tangent_holds: Any = field(default=None, repr=False)

    def __post_init__(self):
        if self.input_names is not None and not isinstance(self.input_names, tuple):
            self.input_names = tuple(self.input_names)    # a list given: what `+ tuple(...)` extends

    @property
    def in_types(self) -> list[ArrayType]:
        return [v.type for v in self.inputs]

    @property
    def out_types(self) -> list[ArrayType]:
        return [a.type for a in self.outputs]

    def __str__(self):
        return pp_program(self)

    def __repr__(self):
        return f"Program(\n{pp_program(self)})"

    def _repr_pretty_(self, p, cycle):  # IPython
        p.text(str(self))


def constants_read(prog: Program) -> list[Literal]:
    """The constants (non-scalar Literals) `prog`'s equations and outputs
    read directly, each once, in the order a trace meets them: the consts
    JAX's tracing of the same function closes over (pe.trace_to_jaxpr's
    constvars, first use first). Those of sub-programs are theirs."""
    seen, consts = set(), []
    for a in [a for e in prog.eqns for a in e.inputs] + list(prog.outputs):
        if isinstance(a, Literal) and not a.is_scalar and id(a.value) not in seen:
            seen.add(id(a.value))
            consts.append(a)
    return consts


def reading_constants_as_inputs(prog: Program, consts: list[Literal]) -> Program:
    """`prog` with one leading input per constant in `consts`, read where
    `prog` read the constant (a constant is the same one if its value is
    the same array): how JAX's control flow and jax.checkpoint pass the
    arrays a traced function closes over, as leading operands."""
    ins = [Var(c.type) for c in consts]
    by_value = {id(c.value): v for c, v in zip(consts, ins)}

    def read(a):
        return by_value.get(id(a.value), a) if isinstance(a, Literal) else a
    eqns = [Eqn(e.primitive, [read(a) for a in e.inputs], e.outputs, e.params, why=e.why,
                residual_outputs=e.residual_outputs) for e in prog.eqns]
    return Program(ins + list(prog.inputs), eqns, [read(a) for a in prog.outputs], input_names=(
        None if prog.input_names is None else ("",) * len(ins) + tuple(prog.input_names)))


def _is_program_tuple(v) -> bool:
    """A tuple-valued param of sub-programs: every entry a Program or None
    (custom_linear_solve's `jaxprs`, whose vecmat and transpose_solve may be
    absent), at least one a Program."""
    return (isinstance(v, tuple) and any(isinstance(b, Program) for b in v)
            and all(b is None or isinstance(b, Program) for b in v))


def subprograms(params: dict) -> list[tuple]:
    """The (key, program) pairs of an equation's params: key is the param
    name for a Program-valued param (call's and remat's `jaxpr`), and
    (name, i) for the i-th Program of a tuple-valued one (cond's
    `branches`; a None entry is skipped)."""
    out = []
    for k, v in params.items():
        if isinstance(v, Program):
            out.append((k, v))
        elif _is_program_tuple(v):
            out += [((k, i), b) for i, b in enumerate(v) if b is not None]
    return out


def map_subprograms(params: dict, fn) -> dict:
    """`params` with every sub-program p (see `subprograms`) replaced by fn(p).
    A lazily traced rule (a param with a `map_programs` method, such as a
    custom_jvp's JVP rule) becomes the rule whose programs are fn of its own."""
    out = dict(params)
    for k, v in params.items():
        if hasattr(v, "map_programs"):
            out[k] = v.map_programs(fn)
        elif isinstance(v, Program):
            out[k] = fn(v)
        elif _is_program_tuple(v):
            mapped = [None if b is None else fn(b) for b in v]
            out[k] = type(v)(*mapped) if hasattr(v, "_fields") else tuple(mapped)   # a named tuple stays one
    return out


# --------------------------------------------------------------------------
# printing

def _names():
    letters = "abcdefghijklmnopqrstuvwxyz"
    for n in itertools.count(1):
        for combo in itertools.product(letters, repeat=n):
            yield "".join(combo)


class _Namer:
    def __init__(self):
        self.names: dict[int, str] = {}
        self.fresh = _names()

    def __call__(self, v: Var) -> str:
        if v.id not in self.names:
            self.names[v.id] = next(self.fresh)
        return self.names[v.id]


def _fmt_literal(lit: Literal) -> str:
    v = lit.value
    if v.dtype == np.bool_:
        s = "True" if v else "False"
    elif np.issubdtype(v.dtype, np.integer):
        s = str(int(v))
    elif is_complex(v.dtype):
        s = repr(complex(v))        # as JAX prints it: 1j, (1+0j)
    else:
        s = repr(float(v))
    return f"{s}:{lit.type}"


def _fmt_param(value, namer, indent) -> str:
    if isinstance(value, Program):
        return _pp(value, namer, indent + 4).lstrip()
    if _is_program_tuple(value):
        return "(" + ", ".join("None" if b is None else _pp(b, namer, indent + 4).lstrip() for b in value) + ")"
    if isinstance(value, np.dtype):
        return SHORT_NAMES.get(value, str(value))
    if callable(value) and hasattr(value, "__name__") and not isinstance(value, type):
        return value.__name__
    return str(value)


def _pp(prog: Program, namer: _Namer, indent: int = 0) -> str:
    consts: list[Literal] = []
    seen = set()

    def atom(a: Atom) -> str:
        if isinstance(a, Var):
            return namer(a)
        if a.is_scalar:
            return _fmt_literal(a)
        if id(a) not in seen:
            seen.add(id(a))
            consts.append(a)
        return f"{_const_name(a)}"

    const_names: dict[int, str] = {}

    def _const_name(a):
        if id(a) not in const_names:
            const_names[id(a)] = next(namer.fresh)
        return const_names[id(a)]

    # constants must be named before inputs to read like a jaxpr: collect first
    for e in prog.eqns:
        for a in e.inputs:
            if isinstance(a, Literal) and not a.is_scalar:
                atom(a)
    for a in prog.outputs:
        if isinstance(a, Literal) and not a.is_scalar:
            atom(a)
    pad = " " * indent
    ins = " ".join(f"{namer(v)}:{v.type}" for v in prog.inputs)
    cs = " ".join(f"{_const_name(c)}:{c.type}" for c in consts)
    lines = []
    for e in prog.eqns:
        outs = " ".join(f"{namer(v)}:{v.type}" for v in e.outputs)
        params = ""
        shown = {k: v for k, v in e.params.items() if v is not None}   # defaults (None) are not shown
        if shown:
            body = " ".join(f"{k}={_fmt_param(v, namer, indent + 4)}" for k, v in shown.items())
            params = f"[{body}]"
        args = " ".join(atom(a) for a in e.inputs)
        lines.append(f"{pad}    {outs} = {e.primitive.name}{params} {args}".rstrip())
    outs = ", ".join(atom(a) for a in prog.outputs)
    if len(prog.outputs) == 1:
        outs += ","
    head = f"{pad}{{ lambda {cs}; {ins}. let"
    if not lines:
        return f"{head} in ({outs}) }}"
    return "\n".join([head, *lines, f"{pad}  in ({outs}) }}"])


def pp_program(prog: Program) -> str:
    """Print a program the way JAX prints a jaxpr."""
    return _pp(prog, _Namer())


# --------------------------------------------------------------------------
# type checking

class TypeCheckError(TypeError):
    pass


def check_program(prog: Program) -> None:
    """Check that `prog` is well formed and well typed.

    Every variable is defined once before use; every equation's output types
    equal its primitive's shape rule applied to its input types and params;
    sub-programs are checked recursively. Raises TypeCheckError."""
    from spec.core import check_complex, shape_rules  # the rules are registered there

    defined: set[int] = set()

    def define(v: Var, where: str):
        if not isinstance(v, Var):
            raise TypeCheckError(f"{where}: expected a Var, got {v!r}")
        if v.id in defined:
            raise TypeCheckError(f"{where}: variable {v!r} defined twice")
        defined.add(v.id)

    def use(a: Atom, where: str):
        if isinstance(a, Literal):
            if type_of(a.value) != a.type:
                raise TypeCheckError(f"{where}: literal {a!r} has type {type_of(a.value)}, says {a.type}")
            return
        if not isinstance(a, Var):
            raise TypeCheckError(f"{where}: expected a Var or Literal, got {a!r}")
        if a.id not in defined:
            raise TypeCheckError(f"{where}: variable {a!r} used before it is defined")

    for v in prog.inputs:
        define(v, "program input")
    for i, e in enumerate(prog.eqns):
        where = f"equation {i} ({e.primitive.name})"
        for a in e.inputs:
            use(a, where)
        for _, sub in subprograms(e.params):
            check_program(sub)
        rule = shape_rules.get(e.primitive)
        if rule is None:
            raise TypeCheckError(f"{where}: primitive {e.primitive.name!r} has no shape rule")
        expected = rule(*[a.type for a in e.inputs], **e.params)
        got = [v.type for v in e.outputs]
        check_complex(e.primitive, [a.type for a in e.inputs], got)
        if list(expected) != got:
            raise TypeCheckError(f"{where}: outputs typed {got}, shape rule says {list(expected)}")
        for v in e.outputs:
            define(v, where)
    for a in prog.outputs:
        use(a, "program output")
