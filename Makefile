# One-command set-up: `make test` and `make demo` create .venv and install everything first.
# --no-compile: byte-code is compiled on first import instead (saves ~20 s of install).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: install test test-all demo bench lint clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile -c constraints.txt "torch==2.13.0" -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# Functional tests on 2 workers; tests marked `expensive` also run when RUN_EXPENSIVE=1 or CI=true.
test: install
	$(PY) -m pytest -q -n 2 tests

test-all: install
	RUN_EXPENSIVE=1 $(PY) -m pytest -q -n 2 tests

demo: install
	$(PY) -m graphopt.demo

bench: install
	$(PY) bench/bench_sim.py

lint: install
	$(VENV)/bin/ruff check graphopt envs policies tests bench
	$(VENV)/bin/ruff format --check graphopt envs policies tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
