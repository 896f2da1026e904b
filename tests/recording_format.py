"""The spec's side of the recordings: a spec program spelled the way the
recorders (tests/record_jax_*.py) spell JAX's jaxprs, so the tests can check
that the spec version of a recorded program is the same program."""
from spec.ir import Literal, Program


def spec_signature(prog: Program) -> list[str]:
    """One line per equation: `prim inputs -> outputs`, with literal and
    constant inputs marked, a `call` as `jit<name>{body}`, a `remat` as
    JAX's `remat2{body}`, a name as `name<h>`, and scan, cond, while and
    custom-call bodies nested as the recorders write them."""
    def atom(a):
        if isinstance(a, Literal):
            return ("lit:" if a.is_scalar else "const:") + str(a.type)
        return str(a.type)

    out = []
    for e in prog.eqns:
        name = e.primitive.name
        if name == "call":
            name = f"jit<{e.params['name']}>{{{'; '.join(spec_signature(e.params['jaxpr']))}}}"
        elif name == "remat":
            name = f"remat2{{{'; '.join(spec_signature(e.params['jaxpr']))}}}"
        elif name == "name":
            name = f"name<{e.params['name']}>"
        elif name == "cond":
            name = "cond{" + " | ".join("; ".join(spec_signature(b)) for b in e.params["branches"]) + "}"
        elif name == "while":
            name = (f"while<{e.params['cond_nconsts']},{e.params['body_nconsts']}>"
                    f"{{{'; '.join(spec_signature(e.params['cond_jaxpr']))} | "
                    f"{'; '.join(spec_signature(e.params['body_jaxpr']))}}}")
        elif name in ("custom_jvp_call", "custom_vjp_call"):
            name = f"{name}<{e.params['name']}>{{{'; '.join(spec_signature(e.params['jaxpr']))}}}"
        elif name == "scan":
            p = e.params
            name = (f"scan<length={p['length']},reverse={p['reverse']},consts={p['num_consts']},"
                    f"carry={p['num_carry']}>{{{'; '.join(spec_signature(p['jaxpr']))}}}")
        ins = " ".join(atom(a) for a in e.inputs)
        outs = " ".join(str(v.type) for v in e.outputs)
        out.append(f"{name} {ins} -> {outs}")
    return out
