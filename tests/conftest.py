"""The test helpers in tests/ (program tables, recorders, recording_format)
import each other by module name: make tests/ importable whatever the
rootdir and import mode."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
