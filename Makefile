# Set-up is part of every target: a fresh clone needs only `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
FUZZ_MINUTES ?= 2

.PHONY: test fuzz clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q tests fuzz

# A fuzz campaign against the installed JAX (FUZZ_MINUTES, 2 jobs); findings,
# each with a standalone repro.py, go to fuzz-findings/. Exit 1 on a finding.
fuzz: $(STAMP)
	$(BIN)/remat-oracle fuzz --minutes $(FUZZ_MINUTES) --jobs 2 --out fuzz-findings

clean:
	rm -rf $(VENV) build *.egg-info
