"""What spec declares about each primitive, read from its registries
(`spec.primitives`, spec/core.py's rule tables, `jax_facts`, `examples`)
and from the module that declares it. There is no list of primitives
here: a primitive declared in a new block is found as it lands.

The op function of a primitive is the public function of spec that binds
it (`bind(p, ...)`, or an `Eqn` of it), preferring one named after it; its
home module is the op's module, else the one most of its rules are in."""
from __future__ import annotations

import collections
import inspect
import sys
import types
from dataclasses import dataclass
from typing import Callable

import spec
from spec import core
from spec.ir import Primitive

RULES = {"shape": core.shape_rules, "eval": core.eval_rules, "jvp": core.jvp_rules,
         "transpose": core.transpose_rules, "batch": core.batch_rules,
         "partial_eval": core.partial_eval_rules, "dce": core.dce_rules, "cost": core.cost_rules}
# modules of generic rules (made by factories for many primitives): never a home
GENERIC_MODULES = {"spec.batching", "spec.core", "spec.partial_eval", "spec.jvp", "spec.transpose"}


@dataclass(frozen=True)
class Declaration:
    name: str
    primitive: Primitive
    module: types.ModuleType
    op: "Op | None"
    rules: dict                  # rule kind (a key of RULES) -> function, the registered ones
    jax: core.JaxFacts | None
    params: tuple
    examples: tuple


def declarations() -> list[Declaration]:
    """Every primitive of spec.primitives, in declaration order."""
    candidates = _candidates()
    out = []
    for name, p in spec.primitives.items():
        rules = {kind: table[p] for kind, table in RULES.items() if p in table}
        op = _op(p, candidates.get(p, []))
        out.append(Declaration(name, p, _home(op, rules), op, rules, core.jax_facts.get(p),
                               core.param_specs[p], tuple(core.examples.get(p, ()))))
    return out


def by_module(decls: list[Declaration]) -> list[tuple[types.ModuleType, list[Declaration]]]:
    """The declarations grouped by home module, modules in the order of their first primitive."""
    groups: dict = {}
    for d in decls:
        groups.setdefault(d.module.__name__, (d.module, []))[1].append(d)
    return list(groups.values())


def _spec_modules() -> list[types.ModuleType]:
    return [m for n, m in list(sys.modules.items())
            if (n == "spec" or n.startswith("spec.")) and isinstance(m, types.ModuleType)]


def _codes(code: types.CodeType):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)


def _references(fn) -> dict:
    """primitive -> whether `fn` (or a function nested in it) binds it (or
    makes an `Eqn` of it), for every primitive its code names."""
    found: dict = {}
    cells = [cell.cell_contents for cell in fn.__closure__ or () if _filled(cell)]
    for c in _codes(fn.__code__):
        binds = "bind" in c.co_names or "Eqn" in c.co_names
        named = [fn.__globals__.get(n) for n in c.co_names] + (cells if c is fn.__code__ else [])
        for p in (v for v in named if isinstance(v, Primitive)):
            found[p] = found.get(p, False) or binds
    return found


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Op:
    """A public function of spec that names a primitive (`attr` in `module`)."""
    attr: str
    fn: Callable
    binds: bool

    @property
    def module(self) -> str:
        return self.fn.__module__


def _candidates() -> dict[Primitive, list[Op]]:
    """primitive -> the public functions of spec's modules that name it."""
    out: dict = {}
    for m in _spec_modules():
        for attr, fn in vars(m).items():
            if attr.startswith("_") or not inspect.isfunction(fn) or fn.__module__ != m.__name__:
                continue
            for p, binds in _references(fn).items():
                if all(o.fn is not fn for o in out.setdefault(p, [])):
                    out[p].append(Op(attr, fn, binds))
    return out


def _op(p: Primitive, ops: list[Op]) -> Op | None:
    """The op function: named after the primitive, else one that binds it."""
    names = {p.name, p.name + "_", p.name.replace("-", "_")}
    named = [o for o in ops if o.attr in names]
    binding = [o for o in ops if o.binds]
    return min(named or binding, default=None,
               key=lambda o: (not o.binds, o.attr.endswith("_eqn"), o.module, o.fn.__code__.co_firstlineno))


def _home(op: Op | None, rules: dict) -> types.ModuleType:
    if op is not None:
        return sys.modules[op.module]
    mods = [getattr(fn, "__module__", None) for fn in rules.values()]
    counts = collections.Counter(m for m in mods if m and m not in GENERIC_MODULES)
    name = max(counts, key=lambda m: (counts[m], -mods.index(m))) if counts else "spec.core"
    return sys.modules[name]
