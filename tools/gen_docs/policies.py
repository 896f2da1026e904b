"""The generated sections of docs/policies.md: the reference models
(models.py), their programs, and what every reference policy saves on
them (spec.explain), as a summary table and one table per policy."""
from __future__ import annotations

import ast
import functools
import inspect

import spec

from tools.gen_docs import models

POLICY_CALLS = {   # how each reference policy is written, for the tables
    "everything_saveable": "everything_saveable",
    "nothing_saveable": "nothing_saveable",
    "dots_saveable": "dots_saveable",
    "dots_with_no_batch_dims_saveable": "dots_with_no_batch_dims_saveable",
    "offload_dot_with_no_batch_dims": "offload_dot_with_no_batch_dims('device', 'pinned_host')",
    "save_anything_except_these_names": "save_anything_except_these_names({n1!r})",
    "save_any_names_but_these": "save_any_names_but_these({n1!r})",
    "save_only_these_names": "save_only_these_names({n1!r})",
    "save_from_both_policies": "save_from_both_policies(dots_with_no_batch_dims_saveable, "
                               "save_only_these_names({n2!r}))",
    "save_and_offload_only_these_names": "save_and_offload_only_these_names(names_which_can_be_saved=[{n1!r}], "
                                         "names_which_can_be_offloaded=[{n2!r}], "
                                         "offload_src='device', offload_dst='pinned_host')",
}


def models_source() -> str:
    """models.py's code after its docstring: what the page shows and runs."""
    source = inspect.getsource(models)
    lines = source.splitlines(keepends=True)
    return "".join(lines[ast.parse(source).body[0].end_lineno:]).lstrip("\n")


@functools.lru_cache(maxsize=None)
def explanations(model_name: str):
    """[(policy name, policy call, Explanation)], the un-checkpointed model first."""
    model, types, (n1, n2) = models.MODELS[model_name]
    out = [("(no checkpoint)", "—", spec.explain(spec.trace(model, *types)))]
    for pname, policy in models.reference_policies(n1, n2).items():
        prog = spec.trace(models.checkpointed(model, policy), *types)
        out.append((pname, POLICY_CALLS[pname].format(n1=n1, n2=n2), spec.explain(prog)))
    return out


def _bytes_by_space(ex):
    device = sum(r.nbytes for r in ex.residuals if not r.residual.type.memory_space)
    return device, ex.saved_bytes - device


def summary_table(model_name: str) -> str:
    rows = ["| policy | residuals | device bytes | host bytes | recomputed equations | recompute FLOPs |",
            "|---|---:|---:|---:|---:|---:|"]
    for pname, call, ex in explanations(model_name):
        dev, host = _bytes_by_space(ex)
        label = pname if pname.startswith("(") else f"[`{call}`](#{model_name}-{pname.replace('_', '-')})"
        rows.append(f"| {label} | {len(ex.residuals)} | {dev} | {host} | {len(ex.recomputed)} | "
                    f"{ex.recompute_flops} |")
    return "\n".join(rows)


def explain_tables(model_name: str) -> str:
    out = []
    for pname, call, ex in explanations(model_name)[1:]:
        dev, host = _bytes_by_space(ex)
        anchor = f"{model_name}-{pname.replace('_', '-')}"
        out += [f'<a id="{anchor}"></a>', "", f"#### {model_name}: `{call}`", "",
                f"{len(ex.residuals)} residuals, {dev} bytes on the device"
                + (f" and {host} on the host" if host else "")
                + f"; {len(ex.recomputed)} equations ({ex.recompute_flops} FLOPs) recomputed.", "",
                "<details><summary>spec.explain</summary>", "", "```text", str(ex), "```", "",
                "</details>", ""]
    return "\n".join(out).rstrip()


def policy_sections() -> dict[str, str]:
    return {
        "models": "```python\n" + models_source().rstrip() + "\n```",
        "mlp-program": "```text\n" + str(spec.trace(models.mlp, *models.MLP_TYPES)) + "\n```",
        "attention-program": "```text\n" + str(spec.trace(models.attention, *models.ATTENTION_TYPES)) + "\n```",
        "mlp-summary": summary_table("mlp"),
        "attention-summary": summary_table("attention"),
        "mlp-tables": explain_tables("mlp"),
        "attention-tables": explain_tables("attention"),
    }
