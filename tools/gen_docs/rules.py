"""docs/rules.md: every primitive of spec.primitives, grouped by the module
that declares it, each with what its block declares (declarations.py)."""
from __future__ import annotations

import inspect

from tools.gen_docs.declarations import RULES, Declaration, by_module, declarations
from tools.gen_docs.examples import example_lines
from tools.gen_docs.markdown import (anchor, code, docstring, fence, file_link, first_sentence,
                                     function_name, header, rule_name, source_path)

INTRO = [
    "Every primitive the spec knows, read from the registries its block fills "
    "(`spec.primitives`, and in spec/core.py the rule tables, `jax_facts` and `examples`), "
    "grouped by the module that declares it. For each: its JAX name and how the oracle emits "
    "it, its params, which rules it has, the docstrings of its op function and of its JVP rule "
    "(which follows, and quotes, JAX's rule: what a JVP reads is what a backward pass saves; "
    "see [semantics.md](semantics.md)), and its first `Example` traced, with what "
    "differentiating it saves inside `checkpoint(policy=everything_saveable)` "
    "(`spec.saved_residuals`). The examples are checked against numpy references, finite "
    "differences and JAX by tests/test_primitive_examples.py. Part of the "
    "[documentation](index.md).",
    "",
    "Rules: *shape* (types), *eval* (numpy and sympy evaluation), *jvp*, *transpose* (linear "
    "primitives), *batch* (vmap), *partial_eval* and *dce* (primitives with sub-programs), "
    "*cost* (FLOPs for `spec.explain`; without one, one operation per output element).",
]


def render_rules() -> str:
    groups = by_module(declarations())
    out = [header("the primitive declarations (spec.primitives and the registries of spec/core.py)"),
           "# Primitive rules", "", *INTRO, "", *index_table(groups), ""]
    for module, decls in groups:
        out += module_lines(module)
        for d in decls:
            out += primitive_lines(d)
    return "\n".join(out).rstrip() + "\n"


def index_table(groups) -> list[str]:
    n = sum(len(decls) for _, decls in groups)
    rows = [f"{n} primitives in {len(groups)} modules:", "",
            "| primitive | module | JAX | " + " | ".join(RULES) + " | examples |",
            "|---|---|---|" + "---|" * len(RULES) + "---:|"]
    for module, decls in groups:
        for d in decls:
            marks = " | ".join("✓" if kind in d.rules else "" for kind in RULES)
            jax = code(d.jax.name) if d.jax else ""
            rows.append(f"| [{code(d.name)}](#{anchor(code(d.name))}) | "
                        f"{module.__name__.split('.')[-1]} | {jax} | {marks} | {len(d.examples) or ''} |")
    return rows


def module_lines(module) -> list[str]:
    path = source_path(module)
    doc = inspect.getdoc(module)
    summary = " ".join(doc.split("\n\n")[0].split()) if doc else ""
    return [f"## {code(path)}", "", f"Declared in {file_link(path)}" + (f": {summary}" if summary else "."), ""]


def primitive_lines(d: Declaration) -> list[str]:
    out = [f"### {code(d.name)}", "", jax_line(d), "", rules_line(d), ""]
    described = docstring(d.op.fn, factory=False) if d.op else None   # a factory's describes the factory
    if described:
        out += [f"**Op** {code(signature(d.op))}:", "", *fence(described), ""]
    elif d.op:
        out += [f"**Op** {code(signature(d.op))}.", ""]
    elif docstring(d.rules.get("shape")):
        out += [f"No op function binds it. **Shape rule** {code(function_name(d.rules['shape']))}:", "",
                *fence(docstring(d.rules["shape"])), ""]
    jvp = d.rules.get("jvp")
    if docstring(jvp):
        out += [f"**JVP** {code(function_name(jvp))}:", "", *fence(docstring(jvp)), ""]
    batch = d.rules.get("batch")
    if docstring(batch):
        out += [f"**Batching** ({code(function_name(batch))}): {first_sentence(docstring(batch))}", ""]
    if d.examples:
        out += example_lines(d.examples[0], list(d.examples[1:]))
    return out


def jax_line(d: Declaration) -> str:
    params = ", ".join(code(p) for p in d.params) or "none"
    if d.jax is None:
        jax = "no `JaxFacts` registered"
    elif d.jax.emitter:
        jax = f"{code(d.jax.name)}, emitted as {code(d.jax.emitter)}"
    else:
        jax = f"{code(d.jax.name)}, no emitter (bound structurally by oracle/to_jax.py, or never emitted)"
    return f"JAX: {jax}. Params: {params}."


def rules_line(d: Declaration) -> str:
    home = source_path(d.module)
    have = []
    for kind, fn in d.rules.items():
        where = source_path(fn) if callable(fn) else None
        elsewhere = f" in {where}" if where and where != home else ""
        have.append(f"{kind} ({rule_name(fn)}{elsewhere})")
    missing = [kind for kind in RULES if kind not in d.rules and kind != "cost"]
    cost = "" if "cost" in d.rules else "; cost: the default"
    return ("Rules: " + ", ".join(have) + cost
            + (f"; none for {', '.join(missing)}." if missing else "."))


def signature(op) -> str:
    """`name(params)` of the op function, without annotations."""
    try:
        sig = inspect.signature(op.fn)
    except (TypeError, ValueError):
        return op.attr + "(...)"
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()]
    return op.attr + str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))
