"""Standalone reproducers: a jax + numpy script that fails with the discrepancy.

The script rebuilds the program from the spec IR as jax.lax calls, so it
needs neither the user's code nor this project."""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np

import spec
from spec.ir import Program, Var
from spec import policies as sp

from oracle.jax_names import EMITTERS_SOURCE as _EMITTERS   # the same table, embedded in reproducers


@dataclass
class Repro:
    text: str
    path: str | None = None


def _policy_source(policy) -> str:
    from oracle.checker import AS_IS
    if policy is None or policy is AS_IS:
        return "None"
    cp = "jax.checkpoint_policies"
    simple = {id(sp.everything_saveable): f"{cp}.everything_saveable",
              id(sp.nothing_saveable): f"{cp}.nothing_saveable",
              id(sp.dots_saveable): f"{cp}.dots_saveable",
              id(sp.dots_with_no_batch_dims_saveable): f"{cp}.dots_with_no_batch_dims_saveable"}
    if id(policy) in simple:
        return simple[id(policy)]
    for cls in ("save_only_these_names", "save_any_names_but_these", "save_anything_except_these_names"):
        if isinstance(policy, getattr(sp, cls)):
            return f"{cp}.{cls}(" + ", ".join(repr(n) for n in sorted(policy.names)) + ")"
    if isinstance(policy, sp.offload_dot_with_no_batch_dims):
        return f"{cp}.offload_dot_with_no_batch_dims({policy.offload_src!r}, {policy.offload_dst!r})"
    if isinstance(policy, sp.save_and_offload_only_these_names):
        return (f"{cp}.save_and_offload_only_these_names(names_which_can_be_saved="
                f"{sorted(policy.names_which_can_be_saved)!r}, names_which_can_be_offloaded="
                f"{sorted(policy.names_which_can_be_offloaded)!r}, offload_src={policy.offload_src!r}, "
                f"offload_dst={policy.offload_dst!r})")
    if isinstance(policy, sp._SaveFromBoth):
        return f"{cp}.save_from_both_policies({_policy_source(policy.policy_1)}, {_policy_source(policy.policy_2)})"
    fn = getattr(policy, "fn", policy)
    if callable(getattr(fn, "jax_source", None)):   # a policy that can write itself out
        return fn.jax_source()
    # any other user policy's source cannot be written out: the reproducer
    # defines a stand-in that says so when asked (paste the real policy there)
    return f"user_policy({getattr(fn, '__name__', None) or type(fn).__name__!r})"


def program_source(prog: Program, name: str = "f") -> str:
    """Python source of a function that computes `prog` with jax.lax."""
    lines, counter = [], [0]

    def emit(p: Program, fname: str, indent: str):
        names = {}
        args = []
        given = p.input_names or ()
        for i, v in enumerate(p.inputs):
            ok = i < len(given) and str(given[i]).isidentifier() and not str(given[i]).startswith("v")
            names[v.id] = str(given[i]) if ok else f"v{counter[0]}"
            counter[0] += 1
            args.append(names[v.id])
        lines.append(f"{indent}def {fname}({', '.join(args)}):")
        body = indent + "    "

        def atom(a):
            if isinstance(a, Var):
                return names[a.id]
            v = a.value
            if a.is_scalar:
                return f"np.{v.dtype.name}({v.item()!r})" if v.dtype != np.bool_ else repr(bool(v))
            return f"np.array({v.tolist()!r}, dtype=np.{v.dtype.name})"
        for e in p.eqns:
            outs = []
            for v in e.outputs:
                names[v.id] = f"v{counter[0]}"
                counter[0] += 1
                outs.append(names[v.id])
            ins = ", ".join(atom(a) for a in e.inputs)
            pname = e.primitive.name
            if pname in ("call", "remat"):
                sub = f"{fname}_{pname}{counter[0]}"
                counter[0] += 1
                emit(e.params["jaxpr"], sub, body)
                if pname == "call":
                    lines.append(f"{body}{sub}.__name__ = {e.params['name']!r}")
                    lines.append(f"{body}{', '.join(outs)}, = jax.jit({sub})({ins})")
                else:
                    lines.append(f"{body}{', '.join(outs)}, = jax.checkpoint({sub}, policy="
                                 f"{_policy_source(e.params['policy'])}, prevent_cse={e.params['prevent_cse']!r})({ins})")
            elif pname == "name":
                lines.append(f"{body}{outs[0]} = checkpoint_name({ins}, {e.params['name']!r})")
            else:
                params = ", ".join(f"{k}={_param_source(v)}" for k, v in e.params.items())
                call = f"E[{pname!r}]({ins}{', ' if params and ins else ''}{params})"
                lines.append(f"{body}{', '.join(outs)}{',' if e.primitive.multiple_results else ''} = {call}")
        lines.append(f"{body}return ({', '.join(atom(a) for a in p.outputs)},)")
    emit(prog, name, "")
    return "\n".join(lines)


def _param_source(v):
    if isinstance(v, np.dtype):
        return f"np.dtype({v.name!r})"
    return repr(v)


def _array_source(a) -> str:
    a = np.asarray(a)
    return f"np.array({a.tolist()!r}, dtype=np.{a.dtype.name})"


_PROPERTY_CODE = {
    "values": "got = list(jax.jit(f)(*args))",
    "jvp": "got = list(jax.jit(lambda *d: jax.jvp(lambda *dd: f(*with_diff(dd)), d, tuple(tangents[i] for i in diff)))(*[args[i] for i in diff])[1])",
    "vjp": "got = list(jax.jit(lambda *d: jax.vjp(lambda *dd: f(*with_diff(dd)), *d)[1](tuple(cts)))(*[args[i] for i in diff]))",
    "second_order": ("pullback = lambda *d: jax.vjp(lambda *dd: f(*with_diff(dd)), *d)[1](tuple(cts))\n"
                     "got = list(jax.jit(lambda *d: jax.jvp(pullback, d, tuple(tangents[i] for i in diff))[1])(*[args[i] for i in diff]))"),
    "vmap": "got = list(jax.jit(jax.vmap(f))(*batched))",
}


def write_repro(prog: Program, policy, args, prop: str, impl: str, message: str, directory=None,
                numeric: dict | None = None) -> Repro:
    """A standalone jax + numpy script that fails with the discrepancy:
    the program is rebuilt from the spec IR (checkpoints included), the
    inputs and the spec's expected answer are embedded."""
    expected_res = [f"{r.type} {r.source}" for r in spec.saved_residuals(prog)]
    text = f'''"""oracle.check reproducer: {prop} differs under {impl}.

{message}
"""
import re

import jax, jaxlib
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name
''' + _EMITTERS
    text += ("\n\ndef user_policy(name):\n"
             "    def policy(prim, *avals, **params):\n"
             "        raise NotImplementedError(f'paste the checkpoint policy {name} here')\n"
             "    return policy\n")
    text += f"\njax.config.update('jax_remat3', {impl == 'remat3'})\n"
    text += "print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, jax.default_backend())\n\n"
    text += program_source(prog) + "\n\n"
    text += "args = [\n" + "".join(f"    {_array_source(a)},\n" for a in args) + "]\n"
    if prop in ("residuals", "vjp_leaves", "prevent_cse"):
        text += f"expected = {expected_res!r}  # the spec's answer\n"
        text += ("from jax._src.ad_checkpoint import saved_residuals\n"
                 "got = [f\"{a.str_short(short_dtypes=True).replace(' ', '')} {re.sub(r' from .*$', '', s)}\" "
                 "for a, s in saved_residuals(f, *args)]\n"
                 "print('JAX residuals: ', got)\nprint('spec residuals:', expected)\n")
        if prop == "residuals":
            text += "assert got == expected, 'saved residuals differ from the spec'\n"
        else:
            text += f"raise SystemExit({message.splitlines()[0]!r})\n"
    else:
        n = numeric or {}
        text += "diff = " + repr([i for i, a in enumerate(args) if np.issubdtype(np.asarray(a).dtype, np.floating)]) + "\n"
        text += ("def with_diff(d):\n    full = list(args)\n    for i, x in zip(diff, d):\n"
                 "        full[i] = x\n    return full\n")
        for key in ("tangents", "cts", "batched"):
            text += f"{key} = [" + ", ".join(_array_source(a) for a in n.get(key, [])) + "]\n"
        text += "expected = [" + ", ".join(_array_source(a) for a in n.get("expected", [])) + "]  # the spec's answer\n"
        text += f"atol = {n.get('atol', 0.0)!r}  # oracle.tolerances for this program\n"
        text += _PROPERTY_CODE[prop] + "\n"
        text += ("for i, (g, w) in enumerate(zip(got, expected)):\n"
                 "    err = float(np.max(np.abs(np.asarray(g, np.float64) - w))) if np.size(w) else 0.0\n"
                 "    print(f'output {i}: max abs error {err:.4g} (tolerance {atol:.3g})')\n"
                 f"    assert err <= atol, f'output {{i}}: {prop} differs from the spec'\n")
    path = None
    if directory:
        os.makedirs(directory, exist_ok=True)
        digest = hashlib.sha1(text.encode()).hexdigest()[:10]
        path = os.path.join(directory, f"repro_{prop}_{impl}_{digest}.py")
        with open(path, "w") as fh:
            fh.write(text)
    return Repro(text, path)

