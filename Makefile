# One-command set-up: `make test` and `make demo` create .venv and install everything first
# (`make install VENV=/tmp/venv` installs elsewhere).
#
# pip installs torch (pinned by constraints.txt: the local CPU build on these machines) and uv;
# uv installs the rest, downloading in parallel (5-7 s against pip's 62 s). uv does not look
# at the local torch file, so torch must come first: with it installed, the pin is satisfied and
# uv downloads no other torch.
#
# Byte-code is compiled at install: pip installs with --no-compile, then compileall compiles the
# venv's site-packages and the project on every core (faster than pip's one file at a time).
# Where PYTHONDONTWRITEBYTECODE=1 is set (as in many Docker images) Python never writes .pyc files
# itself, so without this every `graphopt` process would compile torch and the rest from source
# again (seconds per command); .pyc files that exist are still read. The project's own modules are
# compiled again by every `make install` (only the changed ones; Python ignores a stale .pyc).
# Test suites inside the packages (and torch's test helpers, some of which need Python 3.12) are
# not compiled: nothing imports them at run time. Nor are the packages that neither the tests nor
# the graphopt command import (measured): mypy and mypyc (mypy's modules are compiled extensions;
# only `make lint` runs it), setuptools and pkg_resources, the markdown parsers of rich and
# tensorboard, tensorboard's web server (werkzeug), aiohttp and pathspec: about 700 files, 2-4 s
# of the install on 2 cores. Compile errors do not stop the install, as with pip: a module that
# cannot be compiled is compiled (or refused) when imported.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv pip
STAMP := $(VENV)/.installed-stamp
COMPILED := $(VENV)/.compiled-stamp
COMPILE := -m compileall -j 0 --invalidation-mode timestamp
NOT_COMPILED := site-packages/((.*/)?(tests?|testing/_internal)|mypyc?|setuptools|pkg_resources|markdown_it|werkzeug|aiohttp|markdown|pathspec)/
SITE_PACKAGES = $$($(PY) -c 'import sysconfig; print(*sorted({sysconfig.get_path(k) for k in ("purelib", "platlib")}))')

.PHONY: install warmup test test-ray test-all test-tour demo bench bench-ray bench-startup lint clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile -c constraints.txt torch uv
	$(UV) install --python $(PY) --quiet --no-compile -c constraints.txt -e ".[dev]"
	touch $(STAMP)

# A step of its own, so that a venv installed before it gets compiled without reinstalling.
$(COMPILED): $(STAMP)
	$(PY) $(COMPILE) -qq -x '$(NOT_COMPILED)' $(SITE_PACKAGES) || true
	touch $(COMPILED)

install: $(COMPILED)
	@$(PY) $(COMPILE) -q graphopt envs policies || true

# Functional tests on 2 workers; tests marked `expensive` also run when RUN_EXPENSIVE=1 or CI=true.
# PYTHONDONTWRITEBYTECODE is unset for pytest so that it caches the test modules it rewrites for
# its assertion messages (otherwise every worker rewrites all of them on every run: about 10 s).
# --dist worksteal: a worker that runs out of tests takes some of the other's, so the run does
# not end on one worker's tail (warm, back to back: 153 s against 164 s with --dist load).
test: install
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q -n 2 --dist worksteal tests

# The tests that need Ray: installs the extra graphopt[ray] (about 10 s from a warm cache) and runs
# them on a local Ray with 2 CPUs; without the extra `make test` skips them, naming this target.
RAY_TESTS := tests/graphopt/test_distributed.py tests/graphopt/train/test_ray_vec_env.py \
	tests/graphopt/cli/test_train_workers.py tests/graphopt/train/test_sweep.py \
	tests/graphopt/cli/test_baselines_workers.py tests/graphopt/cli/test_evaluate_workers.py \
	tests/graphopt/cli/test_costmodel_workers.py tests/graphopt/cli/test_baselines_curve_workers.py \
	tests/graphopt/train/test_learned_baselines_ray.py
test-ray: install
	$(UV) install --python $(PY) --quiet --no-compile -c constraints.txt -e ".[ray]"
	$(PY) -m pytest -q $(RAY_TESTS)

test-all: install
	RUN_EXPENSIVE=1 $(PY) -m pytest -q -n 2 --dist worksteal tests

# numba's compiled functions into its on-disk cache ahead of first use (graphopt/warmup.py: the
# simulator, then the heuristics and decoders in parallel processes; about 2 minutes from cold).
# Not part of install: on a fresh clone `make test`'s two workers compile what they use while
# other tests run, 47 s sooner in all than warming first (7:16 against 8:02, measured).
warmup: install
	$(PY) -m graphopt.warmup

# The README's tour, top to bottom, with small budgets (10-15 minutes on 2 cores).
test-tour: install
	RUN_TOUR=1 $(PY) -m pytest -q tests/test_readme_tour.py

demo: install
	$(PY) -m graphopt.demo

bench: install
	$(PY) bench/bench_sim.py

# Rollout throughput on 1 and 2 Ray workers and Ray's start-up cost (needs graphopt[ray]).
bench-ray: install
	$(PY) bench/bench_ray.py

# Start-up of the graphopt command with PYTHONDONTWRITEBYTECODE=1 (targets: --help 0.3 s, simulate 3 s).
bench-startup: install
	$(PY) bench/bench_startup.py

lint: install
	$(VENV)/bin/ruff check graphopt envs policies tests bench
	$(VENV)/bin/ruff format --check graphopt envs policies tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
