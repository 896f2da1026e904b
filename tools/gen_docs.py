"""Generate the reference parts of docs/ (the package tools/gen_docs/ does it).

    python tools/gen_docs.py           # rewrite the generated pages and sections
    python tools/gen_docs.py --check   # exit 1 (and name them) if any is stale

`python -m tools.gen_docs` (from the repository root) is the same.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.gen_docs.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
