"""Normalisations of JAX's saved_residuals names: where a release names
the same value, in the same memory, otherwise than the spec does (a
`named` input, `output of reduce_precision`, `output of pjit`, remat3's
`args[i]`), JAX's entry takes the spec's name before the lists are
compared. Each says which releases it holds for.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


import spec
from spec.ir import Program, Var, is_float, subprograms

from oracle.jax_api.versions import ALL, REMAT3, Releases, holds
from oracle.program_variants import has_primitive
from spec.partial_eval import source_of
import collections


@dataclass(frozen=True)
class Normalization:
    """A naming difference of one implementation, undone before comparing
    (and reported as a known divergence whenever it changed something)."""
    name: str
    reason: str
    apply: Callable   # (implementation, jax residuals, spec residuals, program, argument aliases)
                      # -> jax residuals
    releases: Releases = ALL   # the JAX releases it holds for (verified by its repro on each)


def _remat3_arg_names(impl, jax_res, spec_res, prog, aliases):
    """`from the argument args[0]['w']` -> `from the argument params['w']`:
    `aliases` maps the names JAX gives a `(*args, **kwargs)` signature to
    the leaves' names (oracle.conventions.Call.remat3_names)."""
    if impl != "remat3":
        return jax_res
    prefix = "from the argument "
    return [(t, prefix + aliases[s[len(prefix):]] if s.startswith(prefix) and s[len(prefix):] in aliases else s)
            for t, s in jax_res]


def _remat3_jit_names(impl, jax_res, spec_res, prog, aliases):
    if impl != "remat3":
        return jax_res
    out = []
    for i, (t, s) in enumerate(jax_res):
        if s == "output of jitted function '_remat3'" and i < len(spec_res) and spec_res[i][0] == t \
                and spec_res[i][1].startswith("output of jitted function "):
            s = spec_res[i][1]
        out.append((t, s))
    return out


def _rename_unmatched(jax_res, spec_res, accepts, renamings: list | None = None):
    """Each JAX entry the spec's list lacks takes, in order, the name of a
    spec entry of the same type that JAX's list lacks, where
    accepts(JAX's name, the spec's name); `renamings` gets each (JAX's
    name, the spec's name) pair renamed. Where renaming entries in place
    makes the lists equal, that is the renaming (two names that swap
    places: JAX's `named 'a'` for the spec's `output of div` and `named 'c'`
    for its `named 'a'`: found on 0.6.2)."""
    if len(jax_res) == len(spec_res):
        in_place = [s if j != s and j[0] == s[0] and accepts(j[1], s[1]) else j for j, s in zip(jax_res, spec_res)]
        if in_place == list(spec_res):
            return in_place
    extra = collections.Counter(jax_res) - collections.Counter(spec_res)
    # the spec entries JAX's list lacks: those no equal JAX entry matches, an
    # entry at the same place first (found on 0.4.36: gelu saves two `output
    # of mul`, the second rounded, and the rounded one took the first's name),
    # else the nearest (found on 0.6.2: two calls of one jitted function, the
    # second's outputs matched to the first's left the first's rounded output
    # to take another value's name)
    taken = [False] * len(spec_res)
    pending = []
    for i, r in enumerate(jax_res):
        if i < len(spec_res) and spec_res[i] == r:
            taken[i] = True
        else:
            pending.append((i, r))
    for i, r in pending:
        equal = [j for j, s in enumerate(spec_res) if not taken[j] and s == r]
        if equal:
            taken[min(equal, key=lambda j: (abs(j - i), j))] = True
    free = [r for r, t in zip(spec_res, taken) if not t]
    out, renamed = [], []
    for t, s in jax_res:
        match = None
        if extra[(t, s)] > 0:
            match = next((r for r in free if r[0] == t and accepts(s, r[1])), None)
        if match is not None:
            extra[(t, s)] -= 1
            free.remove(match)
            if renamings is not None:
                renamings.append((s, match[1]))
            s = match[1]
            renamed.append(len(out))
        out.append((t, s))
    return _listed_in_place(out, renamed, spec_res)


def _listing_kind(source: str) -> int:
    """Where saved_residuals lists an entry (jax/_src/ad_checkpoint.py:
    _saved_residuals): literals, constants, arguments, equation outputs."""
    if source in ("from a literal", "from a constant"):
        return 0 if source == "from a literal" else 1
    return 2 if source.startswith("from the argument ") else 3


def _listed_in_place(entries: list, renamed: list, spec_res) -> list:
    """`entries` with each renamed one that now names a literal, a constant
    or an argument moved where saved_residuals lists such an entry
    (arguments in parameter order, as the spec lists them): JAX listed it
    where the equation it was named after stood (found on 0.4.36: a
    program's own reduce_precision of an argument, listed after the
    outputs of cos)."""
    first = {r: i for i, r in reversed(list(enumerate(spec_res)))}
    key = lambda r: (_listing_kind(r[1]), first.get(r, len(spec_res)) if _listing_kind(r[1]) == 2 else 0)
    moving = [i for i in renamed if _listing_kind(entries[i][1]) < 3]
    out = [r for i, r in enumerate(entries) if i not in moving]
    for r in (entries[i] for i in moving):
        out.insert(next((j for j, q in enumerate(out) if key(q) > key(r)), len(out)), r)
    return out


def _renaming(accepts_for: Callable) -> Callable:
    """The apply() of a normalisation that renames JAX's unmatched entries
    (_rename_unmatched) where `accepts_for(implementation, jax residuals,
    spec residuals, program, aliases)` -> accepts(JAX's name, the spec's
    name) holds (None: nothing to rename in this program). Kept as
    `apply.accepts_for`, for renaming with several at once (`normalize`)."""
    def apply(impl, jax_res, spec_res, prog, aliases):
        accepts = accepts_for(impl, jax_res, spec_res, prog, aliases)
        return jax_res if accepts is None else _rename_unmatched(jax_res, spec_res, accepts)
    apply.accepts_for = accepts_for
    apply.__name__ = accepts_for.__name__
    return apply


def _misnamed(jax_name: str, spec_prefix: str = "", never: str | None = None):
    """A renaming: JAX's entries named `jax_name` take the names of the
    spec's entries starting with `spec_prefix`, but `never`."""
    def accepts_for(impl, jax_res, spec_res, prog, aliases):
        return lambda j, s: j == jax_name and s.startswith(spec_prefix) and s != never
    accepts_for.__name__ = f"_misnamed({jax_name!r})"
    return _renaming(accepts_for)


@_renaming
def _user_rounding_named(impl, jax_res, spec_res, prog, aliases):
    """JAX's `output of reduce_precision` for a value the spec names by what
    one of the program's own reduce_precision equations rounds."""
    rounded = set()

    def walk(p: Program):
        for e in p.eqns:
            if e.primitive.name == "reduce_precision":
                rounded.add(str(source_of(e.inputs[0], p)))
            for _, sub in subprograms(e.params):
                walk(sub)
    walk(prog)
    return (lambda j, s: j == "output of reduce_precision" and s in rounded) if rounded else None


@_renaming
def _name_inputs_named(impl, jax_res, spec_res, prog, aliases):
    """JAX's `named 'n'` for a value the spec names by its producer (or
    argument): the input of a checkpoint_name 'n'."""
    wrapped: dict = {}

    def walk(p: Program, outer: dict):
        """`outer`: the sources, in the enclosing program, of the inputs of a
        checkpoint body `p` (a name of a checkpoint's input names the
        value passed in: found on 0.6.2, `named 'b'` for an exp outside)."""
        names = {v.id: e.inputs[0] for e in p.eqns if e.primitive.name == "name" for v in e.outputs}

        def sources(a):     # through names of names (found on 0.6.2: 'c' of 'a' of a div)
            if a.id in outer:
                return outer[a.id]
            inner = names.get(a.id)
            return _sources(a, p, outer) | (sources(inner) if isinstance(inner, Var) else set())
        for e in p.eqns:
            if e.primitive.name == "name" and isinstance(e.inputs[0], Var):
                wrapped.setdefault(f"named '{e.params['name']}'", set()).update(sources(e.inputs[0]))
            for _, sub in subprograms(e.params):
                passed = {}
                if e.primitive.name == "remat":
                    passed = {v.id: sources(a) for v, a in zip(sub.inputs, e.inputs) if isinstance(a, Var)}
                elif e.primitive.name == "scan":
                    # a scan's const: the value passed in, where a checkpoint in
                    # the body names it and the scan's partial evaluation hoists
                    # the checkpoint's known part (found on 0.4.36; the other
                    # residual outputs of the const's producer are called by the
                    # name too: saved_residuals' `eqn := named_vars[v]` rebinds
                    # the equation it names the rest of its outputs by)
                    nc = e.params["num_consts"]
                    passed = {v.id: sources(a) for v, a in zip(sub.inputs[:nc], e.inputs[:nc]) if isinstance(a, Var)}
                walk(sub, passed)
    walk(prog, {})
    return (lambda j, s: s in wrapped.get(j, ())) if wrapped else None


def _sources(atom, prog: Program, outer: dict | None = None) -> set:
    """The names the spec may give the value `atom` of `prog` as a residual:
    its producer's, and for an output of a custom_jvp or custom_vjp call or
    of a checkpoint, those of what its body computes it with (the
    linearized program holds the rule's or the hoisted known equations,
    not the call: found on 0.6.2, names of a custom_jvp sin's output and of
    a checkpointed sin's); for one that returns its input (a jit's too),
    those of the value passed in. `outer`: the names of `prog`'s inputs
    (a checkpoint body's: the values passed in, through a jit that returns
    one: found on 0.6.2)."""
    if outer and isinstance(atom, Var) and atom.id in outer:
        return set(outer[atom.id])
    out = {str(source_of(atom, prog))} | _jvp_primal_sources(atom, prog)
    for e in prog.eqns:
        if e.primitive.name in ("custom_jvp_call", "custom_vjp_call", "remat", "call") \
                and any(v is atom for v in e.outputs):
            body = e.params["jaxpr"]
            passed = {v.id: a for v, a in zip(body.inputs, e.inputs)}
            for v, b in zip(e.outputs, body.outputs):
                if v is atom and isinstance(b, Var):
                    out |= _sources(b, body) if e.primitive.name != "call" else set()
                    # an input the body returns: the value passed in (found on
                    # 0.6.2, a name of a checkpoint's or a jit's forwarded input)
                    if isinstance(passed.get(b.id), Var):
                        out |= _sources(passed[b.id], prog, outer)
    return out


def _jvp_primal_sources(atom, prog: Program) -> set:
    """For an output of a primitive equation whose JVP rule computes the
    primal output anew (cumlogsumexp's associative scan, ending in an
    `add`), the name that rule's program gives it: what a linearization
    saves it as (found by a release campaign on 0.4.36, 1a094739e5: a
    cumlogsumexp's output named by checkpoint_name, saved by a while)."""
    e = next((e for e in prog.eqns if any(v is atom for v in e.outputs)), None)
    if e is None or subprograms(e.params) or not is_float(atom.type.dtype):
        return set()
    one = Program([a for a in e.inputs if isinstance(a, Var)], [e], list(e.outputs))
    try:
        jvp = spec.jvp_program(one)[0]
    except Exception:       # noqa: BLE001 -- no JVP the spec can build: no other name
        return set()
    k = next(i for i, v in enumerate(e.outputs) if v is atom)
    out = jvp.outputs[k]
    return {str(source_of(out, jvp))} if isinstance(out, Var) else set()


@_renaming
def _hoisted_checkpoint_values_named_remat2(impl, jax_res, spec_res, prog, aliases):
    """JAX's `output of remat2` for a value the spec names by the equation
    (of the linearized program) producing it, in a program with a
    checkpoint in a scan body (a loop-invariant residual computed there)."""
    def checkpoint_in_scan(p: Program, in_scan: bool) -> bool:
        return any((in_scan and e.primitive.name == "remat")
                   or any(checkpoint_in_scan(sub, in_scan or e.primitive.name == "scan")
                          for _, sub in subprograms(e.params)) for e in p.eqns)
    if not checkpoint_in_scan(prog, False):
        return None
    return lambda j, s: j == "output of remat2" and s.startswith("output of ") and s != "output of scan"


@_renaming
def _jit_constants_named_outputs(impl, jax_res, spec_res, prog, aliases):
    """JAX's `output of jitted function 'f'` (`output of pjit`) for a value
    the spec saves `from a constant`, in a program with a jit."""
    if not has_primitive(prog, "call"):
        return None
    jit_output = lambda j: j.startswith("output of jitted function ") or j == "output of pjit"
    return lambda j, s: jit_output(j) and s == "from a constant"


@_renaming
def _scan_forwarded_xs_named_by_their_operand(impl, jax_res, spec_res, prog, aliases):
    """JAX's name of the operand (`from the argument a`) for what the spec
    names `output of scan`: a scan's stacked output that is one of its xs
    unchanged (the body returns its slice as it is)."""
    names = set()

    def walk(p: Program):
        for e in p.eqns:
            if e.primitive.name == "scan":
                body, first_xs = e.params["jaxpr"], e.params["num_consts"] + e.params["num_carry"]
                ys = body.outputs[e.params["num_carry"]:]
                names.update(str(source_of(a, p)) for x, a in zip(body.inputs[first_xs:], e.inputs[first_xs:])
                             if any(y is x for y in ys))
            for _, sub in subprograms(e.params):
                walk(sub)
    walk(prog)
    return (lambda j, s: s == "output of scan" and j in names) if names else None


# the linear-algebra primitives whose JVP rules build triangular masks (jnp.tril, jnp.triu)
_MASKING_JVPS = ("triangular_solve", "lu", "cholesky", "qr")


@_renaming
def _linalg_masks_named_jit_outputs(impl, jax_res, spec_res, prog, aliases):
    """JAX's `output of pjit` for a value the spec names by the equation
    computing it, in a program with a linear-algebra primitive whose JVP
    rule builds a triangular mask (jnp.tril and triu are jitted there)."""
    if not any(has_primitive(prog, name) for name in _MASKING_JVPS):
        return None
    return lambda j, s: j == "output of pjit" and s.startswith("output of ")


def _rounded_listed_after_their_producers(impl, jax_res, spec_res, prog, aliases):
    """The spec's list where JAX's is it in the order a release that rounds
    saved values lists them: remat's `_insert_reduce_precision` puts the
    rounding of a saved float value that the known program also reads
    right after its producer (the producer then returns a fresh variable),
    each at the same place, so saved_residuals, listing by equation, gives
    the producer's other saved outputs first and the rounded ones after
    them, the last first (found on 0.6.2: nested checkpoints, the outer
    everything_saveable, the middle one's scalar output read by a product)."""
    if impl != "remat2" or list(jax_res) == list(spec_res) or \
            collections.Counter(jax_res) != collections.Counter(spec_res) or not has_primitive(prog, "remat"):
        return jax_res
    try:
        lin = spec.linearize(prog)
    except Exception:       # noqa: BLE001 -- a program the spec cannot linearize: nothing to say
        return jax_res
    if [(str(r.type), str(r.source)) for r in lin.residuals] != list(spec_res):
        return jax_res
    position = {id(r.var): i for i, r in enumerate(lin.residuals) if r.var is not None}
    read = {id(a) for e in lin.forward.eqns for a in e.inputs}
    produced, order = set(), []
    for e in lin.forward.eqns:
        saved = [position[id(v)] for v in e.outputs if id(v) in position]
        rounded = [i for i in saved if is_float(lin.residuals[i].type.dtype) and id(lin.residuals[i].var) in read
                   and e.primitive.name != "reduce_precision"]
        order += [i for i in saved if i not in rounded] + rounded[::-1]
        produced.update(saved)
    order = [i for i in range(len(spec_res)) if i not in produced] + order
    return list(spec_res) if [spec_res[i] for i in order] == list(jax_res) else jax_res


@_renaming
def _remat3_custom_jvp_outputs(impl, jax_res, spec_res, prog, aliases):
    """Under remat3, JAX's name for a value the spec calls `output of
    custom_jvp_call`: what computes it in the call's primal body (`output
    of max`), or the jitted function holding the call (`output of jitted
    function 'relu'`)."""
    if impl != "remat3":
        return None
    names = set()

    def walk(p: Program, jit: str | None):
        for e in p.eqns:
            if e.primitive.name == "custom_jvp_call":
                body = e.params["jaxpr"]
                names.update(str(source_of(o, body)) for o in body.outputs)
                if jit is not None:
                    names.add(f"output of jitted function '{jit}'")
            inner = e.params.get("name") if e.primitive.name == "call" and e.params.get("name") else jit
            for _, sub in subprograms(e.params):
                walk(sub, inner)
    walk(prog, None)
    return (lambda j, s: s == "output of custom_jvp_call" and j in names) if names else None


@_renaming
def _remat3_checkpoint_outputs_as_written(impl, jax_res, spec_res, prog, aliases):
    """Under remat3, JAX's name for a checkpoint's output that the enclosing
    linearization saves: what computes it in the body as written (`output
    of reduce_prod`), where the spec names what computes it in the body's
    JVP (reduce_prod's JVP ends in a squeeze): pairs of the two, from each
    checkpoint's body and its JVP program."""
    if impl != "remat3":
        return None
    pairs = set()

    def walk(p: Program):
        for e in p.eqns:
            if e.primitive.name == "remat":
                body = e.params["jaxpr"]
                jvp_body = spec.jvp_program(body)[0]
                for k, out in enumerate(body.outputs):
                    if isinstance(out, Var) and isinstance(jvp_body.outputs[k], Var):
                        pairs.add((str(source_of(out, body)), str(source_of(jvp_body.outputs[k], jvp_body))))
            for _, sub in subprograms(e.params):
                walk(sub)
    walk(prog)
    pairs = {(j, s) for j, s in pairs if j != s}
    return (lambda j, s: (j, s) in pairs) if pairs else None


NORMALIZATIONS = [
    Normalization("saved-residuals-names-the-input-of-a-name",
                  "From jax 0.4.26 (jax-ml/jax 566af12aca, 'make print_saved_residuals show more "
                  "checkpoint_name names') to 0.10.2 (bf1e6d9b49 removed it) saved_residuals calls "
                  "a saved value that is the *input* of a checkpoint_name `named 'n'`, where the "
                  "spec names its producer: e.g. save_anything_except_these_names('h') saving "
                  "sin(x) for checkpoint_name(sin(x), 'h') is reported as saving 'h'. Its "
                  "`eqn := named_vars[v]` rebinds the equation it names a residual by, so the "
                  "producer's saved outputs after that one are called by the name too (a scan's "
                  "stacked outputs, one of which a checkpoint in a later scan's body names, its "
                  "known part hoisted: found by a campaign on 0.4.36). The spec's name for such a "
                  "value is its producer's, or what the producer's JVP rule computes it with "
                  "(cumlogsumexp's associative scan ends in an `add`: found by a release campaign "
                  "on 0.4.36). Same values, same memory.",
                  _name_inputs_named, releases=Releases("0.4.26", "0.10.2")),
    Normalization("saved-residuals-names-a-users-reduce_precision",
                  "Before jax 0.10.2 (bf1e6d9b49 made _saved_residuals look through "
                  "reduce_precision) a value the program itself rounds with reduce_precision, "
                  "saved as that rounding's output, is named `output of reduce_precision`; the "
                  "spec (as 0.10.2) names the value it rounds. Found by a campaign on 0.4.36. "
                  "Only names of the inputs of the program's own reduce_precision equations are "
                  "taken. Same value, same memory.",
                  _user_rounding_named, releases=Releases("0.4.25", "0.10.2")),
    Normalization("saved-residuals-names-reduce_precision",
                  "From jax 0.4.31 (jax-ml/jax f498d7a3ba) remat's partial evaluation rounds every "
                  "saved float value through reduce_precision (against XLA's excess precision), and "
                  "saved_residuals names the residual `output of reduce_precision` instead of the "
                  "equation, name or argument it saves; 0.10.2 looks through it (bf1e6d9b49, 'fix "
                  "print_saved_residuals'). Same value, same memory.",
                  # (a literal is never one: partial_eval_jaxpr_custom keeps literals inline,
                  # so a saved literal is linearization's, outside any checkpoint; found on 0.6.2).
                  # After the one for a program's own reduce_precision, which takes the names of
                  # what it rounds first; the rest are remat's (found on 0.4.36: a checkpoint
                  # saving tanh beside a user's rounding, finding 29a20f31dd)
                  _misnamed("output of reduce_precision", never="from a literal"),
                  releases=Releases("0.4.31", "0.10.2")),
    Normalization("saved-residuals-lists-rounded-values-after-their-producers",
                  "From jax 0.4.31 to 0.10.1 remat's partial evaluation rounds a saved float "
                  "value that its known program also reads with a reduce_precision equation "
                  "inserted right after the producer (`_insert_reduce_precision`), and "
                  "saved_residuals lists residuals by equation: such a value comes after its "
                  "producer's other saved outputs (several of one producer, the last first); "
                  "0.10.2 lists it in its producer's place. Found by a campaign on 0.6.2 (nested "
                  "checkpoints, the outer everything_saveable). Same values, another order.",
                  _rounded_listed_after_their_producers, releases=Releases("0.4.31", "0.10.2")),
    Normalization("saved-residuals-names-jitted-functions-pjit",
                  "Before jax 0.4.34 saved_residuals named a jitted function's output `output of "
                  "pjit` (it looked for the `xla_call` primitive, removed in 2022; fixed by "
                  "jax-ml/jax 1fe0c5dad5) instead of `output of jitted function 'f'`.",
                  _misnamed("output of pjit", "output of jitted function "), releases=Releases("0.4.25", "0.4.34")),
    Normalization("linalg-jvp-masks-are-jit-outputs",
                  "On jax 0.4.25 the JVP rules of triangular_solve, lu, cholesky and qr build "
                  "their triangular masks and zeros with jnp.tril/jnp.triu, jitted functions there, "
                  "so saved_residuals names a saved mask or zero `output of pjit`, where the spec "
                  "(0.10.2's rules, which bind them inline) names the equation computing it "
                  "(`output of ge`, `output of broadcast_in_dim`). Same values. Found by a "
                  "campaign on 0.4.25 (triangular_solve and lu); 0.4.36 names them as the spec does.",
                  _linalg_masks_named_jit_outputs, releases=Releases("0.4.25", "0.4.34")),
    Normalization("saved-residuals-names-a-jits-constant-its-output",
                  "Before jax 0.10.2 (verified on 0.4.25, 0.4.36 and 0.6.2, with direct "
                  "linearization on or off; not bisected between 0.6.2 and 0.10.2) pjit's partial "
                  "evaluation passes an array a jitted function closes over, where a tangent "
                  "equation reads it, out of the known jit as a residual output, so saved_residuals "
                  "names it `output of jitted function 'f'` (`output of pjit` before 0.4.34); "
                  "0.10.2 forwards the jit's constants and names it `from a constant`, as the spec "
                  "does. Same value, one entry either way.",
                  _jit_constants_named_outputs, releases=Releases("0.4.25", "0.10.2")),
    Normalization("saved-residuals-names-a-scan-s-forwarded-xs-by-the-operand",
                  "Before jax 0.7.0 (measured with tools/releases.py: 0.4.25, 0.4.36 and 0.6.2 "
                  "forward, 0.7.0 to 0.10.2 do not; found by a release campaign on 0.4.36, "
                  "f61a674385) a scan's stacked output that is "
                  "one of its xs unchanged (the body returns its slice as it is) is the operand itself "
                  "to the partial evaluator, so a residual that is that output is named as the operand "
                  "(`from the argument a`), where the spec (as 0.10.2) names it `output of scan`. "
                  "Same value, same memory.",
                  _scan_forwarded_xs_named_by_their_operand, releases=Releases("0.4.25", "0.7.0")),
    Normalization("saved-residuals-names-a-scan-s-invariant-checkpoint-value-remat2",
                  "Before jax 0.4.36 (measured with tools/releases.py on every release from 0.4.25: "
                  "0.4.35 names it so, 0.4.36 does not) a loop-invariant residual of a scan body "
                  "that a checkpoint in it computes (_scan_partial_eval evaluates the known body "
                  "with its consts known) is named `output of remat2`, the known checkpoint kept "
                  "as an equation; from 0.4.36 a JaxprTrace evaluates a known checkpoint inline "
                  "(remat_partial_eval's `core.eval_jaxpr`) and the value is named by its "
                  "producer, as the spec does. Same value, same memory. Found by a campaign on "
                  "0.6.2 (a spec bug then) and measured on 0.4.25.",
                  _hoisted_checkpoint_values_named_remat2, releases=Releases("0.4.25", "0.4.36")),
    Normalization("remat3-names-arguments-args[i]",
                  "Under jax_remat3 (jax 0.10.2) saved_residuals names the arguments of a "
                  "checkpointed function `args[i]` (jax.checkpoint returns a functools.partial "
                  "without the function's signature); the spec uses the parameter names.",
                  _remat3_arg_names, releases=REMAT3),
    Normalization("remat3-names-jitted-checkpoints-_remat3",
                  "Under jax_remat3 (jax 0.10.2) jax.jit(jax.checkpoint(f)) is a jitted function "
                  "named '_remat3' (the partial's function), not 'f'; same value, same memory.",
                  _remat3_jit_names, releases=REMAT3),
    Normalization("remat3-names-custom_jvp-outputs-by-their-body",
                  "Under jax_remat3 (jax 0.10.2) a saved output of a custom_jvp function "
                  "(jax.nn.relu, jnp.logaddexp) is named by what computes it in the function's "
                  "primal body (`output of max`), or by the jitted function holding the call "
                  "(`output of jitted function 'relu'`), where remat2 and the spec say `output of "
                  "custom_jvp_call` (found by a sweep of model code: flax.nnx.remat around "
                  "nnx.relu). Same value, same memory.",
                  _remat3_custom_jvp_outputs, releases=REMAT3),
    Normalization("remat3-names-checkpoint-outputs-by-the-body-as-written",
                  "Under jax_remat3 (jax 0.10.2) a checkpoint's forward pass evaluates its body as "
                  "written (remat_transform binds each equation in the enclosing trace), so a "
                  "checkpoint output the enclosing linearization saves is named by the body's own "
                  "equation (`output of reduce_prod`), where remat2 and the spec compute it "
                  "through the JVP rules' primal halves (reduce_prod's JVP ends in `output of "
                  "squeeze`). Found by a pristine nightly (a checkpoint of reduce_prod scanned "
                  "over). Same value, same memory.",
                  _remat3_checkpoint_outputs_as_written, releases=REMAT3),
]


def normalize(impl, jax_res, spec_res, prog, aliases=None) -> tuple[list, list[str]]:
    """JAX's list with the installed release's normalisations undone against
    the spec's list, and the names of those that changed something. First
    every renaming at once, entry by entry in place (each alone may not
    make the lists equal where two apply to one list: a name's input and a
    rounding, found on 0.4.36); else each in turn."""
    active = [n for n in NORMALIZATIONS if holds(n.releases)]
    aliases = aliases or {}
    used = _renamed_in_place(active, impl, jax_res, spec_res, prog, aliases)
    if used is not None:
        return list(spec_res), used
    got, applied = _renamed_together(active, impl, jax_res, spec_res, prog, aliases)
    for norm in active:
        new = norm.apply(impl, got, spec_res, prog, aliases)
        if new != got:
            applied.append(norm.name)
            got = new
    return got, applied


def _renamed_together(active, impl, jax_res, spec_res, prog, aliases) -> tuple[list, list[str]]:
    """JAX's list with every renaming's unmatched entries renamed at once,
    each to the first spec entry one of them accepts (one renaming after
    the other took the first one's names for entries another's fit: found
    on 0.4.25, a qr's JVP masks and a jit's outputs, all `output of pjit`
    of the same two types), and the renamings that did it."""
    accepts = [(n.name, ok) for n in active if hasattr(n.apply, "accepts_for")
               for ok in [n.apply.accepts_for(impl, jax_res, spec_res, prog, aliases)] if ok is not None]
    renamings: list = []
    got = _rename_unmatched(jax_res, spec_res, lambda j, s: any(ok(j, s) for _, ok in accepts), renamings)
    used = [name for name, ok in accepts if any(ok(j, s) for j, s in renamings)]
    return got, used


def _renamed_in_place(active, impl, jax_res, spec_res, prog, aliases) -> list[str] | None:
    """The renamings that together turn JAX's list into the spec's, each
    differing entry renamed in its place (the same type, a name one of them
    accepts), or None."""
    if len(jax_res) != len(spec_res) or list(jax_res) == list(spec_res):
        return None
    accepts = [(n.name, n.apply.accepts_for(impl, jax_res, spec_res, prog, aliases))
               for n in active if hasattr(n.apply, "accepts_for")]
    used = []
    for j, s in zip(jax_res, spec_res):
        if j == s:
            continue
        name = next((name for name, ok in accepts if ok is not None and j[0] == s[0] and ok(j[1], s[1])), None)
        if name is None:
            return None
        used += [name] if name not in used else []
    return used

