# Set-up is part of every target: a fresh clone needs only `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
FUZZ_MINUTES ?= 2

.PHONY: test test-slow fuzz test-jax test-release test-models clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,cluster]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto tests fuzz

# the `slow` tests directly in tests/ (whole campaigns in subprocesses: a
# planted bug found by a cluster campaign, hangs stopped by the watchdog;
# and single tests over 10 s: four of the five planted-bug hunts, ...),
# which `make test` skips to keep within ten minutes; CI runs them (.ci/run)
test-slow: $(STAMP)
	RUN_SLOW_TESTS=1 $(BIN)/python -m pytest -q -n auto -m slow tests --ignore=tests/models

# A fuzz campaign against the installed JAX (FUZZ_MINUTES, 2 jobs); findings,
# each with a standalone repro.py, go to fuzz-findings/. Exit 1 on a finding.
fuzz: $(STAMP)
	$(BIN)/remat-oracle fuzz --minutes $(FUZZ_MINUTES) --jobs 2 --out fuzz-findings

# The release matrix: `make test-jax JAX=0.4.36` makes .venv-jax-0.4.36 with that
# JAX release (numpy < 2 where its jaxlib was built against numpy 1: before 0.4.26),
# runs the release-independent tests there (RELEASE_TESTS, split over the cores; a
# recording's freshness test skips on another release, saying so) and a
# JAX_FUZZ_MINUTES campaign (findings under fuzz-findings-jax-<release>/).
# `make test-release JAX=...` runs the tests alone (CI: .ci/run, JAX=0.4.25).
JAX ?= 0.10.2
JAX_VENV := .venv-jax-$(JAX)
JAX_FUZZ_MINUTES ?= 1
NUMPY_FOR_JAX = $(shell $(PY) -c "v = tuple(int(p) for p in '$(JAX)'.split('.')[:3]); print('numpy<2' if v < (0, 4, 26) else 'numpy')")

$(JAX_VENV)/.installed: pyproject.toml Makefile
	$(PY) -m venv $(JAX_VENV)
	$(JAX_VENV)/bin/pip install -q --upgrade pip
	$(JAX_VENV)/bin/pip install -q "jax==$(JAX)" "jaxlib==$(JAX)" "$(NUMPY_FOR_JAX)" ml_dtypes "sympy==1.14.0" \
		"hypothesis==6.170.17" "pytest==9.2.0" "pytest-xdist==3.8.0" "execnet==2.1.2"
	$(JAX_VENV)/bin/pip install -q --no-deps -e .
	touch $@

# the release-independent tests: the spec's own (no JAX), the spec against the
# recorded answers, oracle.check on the docs' examples, every divergence's
# release range both ways, the historic bugs' reproducers. (The rest of the
# suite pins jax 0.10.2's behaviour: remat3, its API spellings in planted
# bugs and mutation overlays.)
RELEASE_TESTS = tests/test_ir.py tests/test_primitives.py tests/test_batching.py tests/test_remat.py \
	tests/test_rules_exact.py tests/test_scan.py tests/test_readme.py tests/test_no_jax.py \
	fuzz/test_coverage.py fuzz/test_spec_properties.py fuzz/test_symbolic.py \
	tests/test_recorded_residuals.py tests/test_recorded_remat_residuals.py \
	tests/test_recorded_scan_residuals.py tests/test_recorded_cond_residuals.py \
	tests/test_recorded_custom_residuals.py tests/test_recorded_composed_residuals.py \
	tests/test_release_examples.py tests/test_divergences.py tests/test_historic_bugs.py \
	tests/test_prims_debug.py tests/test_campaign_findings.py tests/test_prims_approx_top_k.py \
	tests/test_primitive_examples.py

test-release: $(JAX_VENV)/.installed
	$(JAX_VENV)/bin/python -m pytest -q -n auto $(RELEASE_TESTS)

# The real-model suite (tests/models) on a release: the model libraries as
# released in that JAX release's time (a module written for an API they lack
# yet, flax.nnx before 0.8.3, is left out, saying so), pinned per release.
MODEL_LIBS_0.4.25 = "flax==0.8.1" "equinox==0.11.3" "dm-haiku==0.0.12" "optax==0.1.9"
MODEL_LIBS_0.4.36 = "flax==0.10.2" "equinox==0.11.10" "dm-haiku==0.0.13" "optax==0.2.4"
MODEL_LIBS_0.6.2 = "flax==0.10.7" "equinox==0.13.0" "dm-haiku==0.0.14" "optax==0.2.5"

$(JAX_VENV)/.models: $(JAX_VENV)/.installed
	@test -n '$(MODEL_LIBS_$(JAX))' || { echo "no model-library pins for jax $(JAX) (Makefile MODEL_LIBS_*)"; exit 2; }
	printf 'jax==$(JAX)\njaxlib==$(JAX)\n$(NUMPY_FOR_JAX)\n' > $(JAX_VENV)/constraints.txt
	$(JAX_VENV)/bin/pip install -q -c $(JAX_VENV)/constraints.txt $(MODEL_LIBS_$(JAX))
	touch $@

test-models: $(JAX_VENV)/.models
	cd tests && ../$(JAX_VENV)/bin/python -m pytest -q -n auto models

test-jax: test-release
	$(JAX_VENV)/bin/remat-oracle fuzz --minutes $(JAX_FUZZ_MINUTES) --jobs 2 --out fuzz-findings-jax-$(JAX)

clean:
	rm -rf $(VENV) .venv-jax-* build *.egg-info
