"""Generate the reference parts of docs/ from the code, so they cannot go stale.

    python tools/gen_docs.py           # rewrite the generated pages and sections
    python tools/gen_docs.py --check   # exit 1 (and name them) if any is stale

What is generated:

* docs/rules.md, all of it: every primitive of `spec.primitives`, grouped
  by the module that declares it, with what its block declares: its rules,
  its JAX name and params (`spec.core.jax_facts`), the docstrings of its op
  function and JVP rule, and its first `spec.core.Example` traced, with
  what differentiating it saves (declarations.py, rules.py, examples.py);
* docs/divergences.md, all of it: oracle/divergences.py's DIVERGENCES and
  NORMALIZATIONS (divergences.py);
* docs/policies.md, between `<!-- BEGIN GENERATED: name -->` and
  `<!-- END GENERATED: name -->` markers (sections.py): the reference
  models (models.py) and every table of what each policy saves on them
  (policies.py, with spec.explain).

cli.py writes or checks the pages; markdown.py has the shared pieces.
Nothing here imports jax.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:          # spec and oracle, when run from a checkout
    sys.path.insert(0, str(ROOT))
