"""`python -m tools.gen_docs [--check]`: see tools/gen_docs/__init__.py."""
import sys

from tools.gen_docs.cli import main

sys.exit(main())
