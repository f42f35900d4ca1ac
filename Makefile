# Two commands do all the set-up on a fresh machine with pip and Python 3.11, 3.12 or 3.13:
#   make demo   runs the main example
#   make test   the venvs (installed side by side), lint (ruff, then mypy), docs (warnings
#               are errors), then pytest and, when mpiexec exists, the MPI tests on every
#               stack below whose Python is found, then a sample of mutants (under 90%
#               killed fails); at the end, a table of each step's time
# One stack, one file: `make test-unit STACKS=3.12 PYTEST_ARGS=tests/test_files.py`
# (docs/testing.rst).
SHELL := /bin/bash
comma := ,

# The stacks the suite runs on, oldest first: Python, the NumPy it gets, the setuptools it
# gets at run time. 3.11: NumPy 1.26 and a setuptools with pkg_resources (the stack Chainer
# knew); 3.12: the first NumPy 2; 3.13: the newest NumPy and setuptools (no pkg_resources)
# and CuPy 14.
SUPPORTED := 3.11 3.12 3.13
NUMPY_3.11 := numpy==1.26.*
NUMPY_3.12 := numpy==2.0.*
NUMPY_3.13 := numpy>=2
SETUPTOOLS_3.11 := setuptools<70
SETUPTOOLS_3.12 := setuptools
SETUPTOOLS_3.13 := setuptools
# The newest stack also has CuPy, as a GPU user's environment would (no CUDA driver here:
# it checks that Chainer and researchutils import beside CuPy 14 and that every CuPy name
# they use exists), and CUDA 13's NVRTC and headers, with which every kernel on our GPU
# paths is compiled for today's GPUs (`make gpu-compile-check`; docs/gpu.rst). CuPy stays on
# the minor version whose internals that check reads (TESTED_CUPY in
# tests/support/gpu_compile.py).
# The newest stack also has the full mlflow, whose server the tracking tests start once a
# session, for every stack (tests/support/mlflow_server.py finds it in this venv): with the
# tracking extras, 4 min 42 s and 800 MB more in that venv on this machine (pandas, pyarrow,
# scipy, scikit-learn), against 48 s and 300 MB in each other one (tensorboardX,
# mlflow-skinny, tensorboard).
EXTRA_PACKAGES_3.13 := cupy-cuda13x==14.2.* nvidia-cuda-nvrtc==13.* nvidia-cuda-runtime==13.* mlflow>=3
# The newest stack also has torch (the `torch` extra: researchutils.pytorch and its tests,
# which compare every torch twin with Chainer's): the default build from PyPI, about 77 s and
# 5 GB with its CUDA libraries; it runs on CPU without a GPU.
STACK_EXTRAS_3.13 := $(comma)torch
# setuptools < 70 builds wheels only with the wheel package (later ones carry bdist_wheel);
# the .pth tests build researchutils' wheel with the venv's own setuptools.
EXTRA_PACKAGES_3.11 := wheel

# $(call find_python,3.12): the first python3.12 that really runs and can make a venv, by
# its real path: the one on PATH (a pyenv shim for a version pyenv has not selected exists
# but fails), else the newest one pyenv installed.
find_python = $(shell for p in "$$(command -v python$(1))" \
    $$(ls -d "$${PYENV_ROOT:-$$HOME/.pyenv}"/versions/$(1).*/bin/python$(1) 2>/dev/null | sort -rV); \
    do [ -n "$$p" ] && real=$$("$$p" -c 'import sys, venv, ensurepip; \
    print(sys.executable) if sys.version_info[:2] == ($(subst .,$(comma),$(1))) else sys.exit(1)' \
    2>/dev/null) && { echo "$$real"; break; }; done)
version_of = $(shell $(1) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)

# PYTHON_3.11 / PYTHON_3.12 / PYTHON_3.13 name the interpreters (`make test PYTHON_3.12=`
# leaves that stack out); PYTHON, the one for .venv (lint, docs, demo, bench), defaults to
# the first found. STACKS chooses the stacks test-unit and test-mpi run (default: all).
$(foreach v,$(SUPPORTED),$(if $(filter undefined,$(origin PYTHON_$(v))),\
    $(eval PYTHON_$(v) := $(call find_python,$(v)))))
ifeq ($(origin PYTHON),undefined)
PYTHON := $(or $(firstword $(foreach v,$(SUPPORTED),$(PYTHON_$(v)))),python3)
endif
PY_VERSION := $(call version_of,$(PYTHON))
VENV := .venv
PY := $(VENV)/bin/python
# Every other stack whose Python is found gets a venv of its own for the test suite.
TEST_VERSIONS := $(foreach v,$(filter-out $(PY_VERSION),$(SUPPORTED)),$(if $(PYTHON_$(v)),$(v)))
VENVS := $(VENV) $(foreach v,$(TEST_VERSIONS),.venv-$(v))
STACKS ?= $(SUPPORTED)
venv_of = $(if $(filter $(PY_VERSION),$(1)),$(VENV),$(if $(filter $(TEST_VERSIONS),$(1)),.venv-$(1)))
TEST_VENVS := $(strip $(foreach v,$(STACKS),$(call venv_of,$(v))))

# Chainer ships only as an sdist whose setup.py imports pkg_resources: it builds only with
# setuptools < 70 inside pip's build isolation (build constraints, pip >= 25.3). Nothing
# pins setuptools at run time. constraints.txt keeps the lint and docs tools on the major
# versions this project was checked with.
export PIP_BUILD_CONSTRAINT := $(CURDIR)/build-constraints.txt
export PIP_CONSTRAINT := $(CURDIR)/constraints.txt
HAVE_MPI := $(shell command -v mpiexec >/dev/null 2>&1 && echo yes)
# .venv also builds the docs; the other venvs only run the suite, which needs no Sphinx.
TEST_EXTRAS := test,slack,plot,search,search-db,onnx,tensorboard,mlflow$(if $(HAVE_MPI),$(comma)mpi)
EXTRAS := $(TEST_EXTRAS),docs
MPIEXEC := mpiexec --allow-run-as-root --oversubscribe -n 2
PYTEST_ARGS ?=
DEMO_ARGS ?=
STAMPS :=

# pytest runs each stack's suite on TEST_WORKERS processes (pytest-xdist; 0 runs it in
# pytest's own process), by default two a core: much of the suite waits on the processes
# and servers it starts (training workers, SLURM, PostgreSQL, a job's time limit), and a
# second worker a core keeps the cores busy meanwhile (on 2 cores, one stack: 4 min 46 s
# on 2 workers, 3:44 on 3, 3:28 on 4, 3:47 on 6; docs/testing.rst). loadgroup keeps the
# tests that share a module-scoped fixture or a resource (xdist_group markers,
# tests/conftest.py) on one worker.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$((2 * n)))
XDIST := -n $(TEST_WORKERS) --dist loadgroup
# Tests marked one_stack check the repository's tools rather than the package on a stack:
# the GPU check's scripts (tests/test_gpu_check.py: a wheelhouse built from the registries
# and a venv installed from it, 2 to 5 minutes of a worker), which the GPU machine runs with
# its Python 3.12. They run on ONE_STACK (else on the first stack chosen), not on every one.
ONE_STACK ?= 3.12
ONE_STACK_VENV := $(or $(filter $(call venv_of,$(ONE_STACK)),$(TEST_VENVS)),$(firstword $(TEST_VENVS)))
# Tests marked system are end-to-end runs of process orchestration (SLURM, PostgreSQL across
# hosts, searches and experiments killed and resumed, folder ownership, the demo's runs):
# their subject is the same on every stack, so they run once, on the newest stack chosen
# (whatever the order STACKS names them in).
# tests/support/stacks.py says which test files are system tests, and why
# (docs/testing.rst, "Where each test runs").
SYSTEM_VENV := $(lastword $(foreach v,$(SUPPORTED),$(if $(filter $(v),$(STACKS)),$(call venv_of,$(v)))))
# make test writes what became of each test on each stack to RESEARCHUTILS_TEST_RECORD and
# prints the counts at its end (tests/support/run_record.py).
# Each stack's run ends with its 30 slowest tests, so a test that grows slow is seen in the
# log of every run (`make test-unit DURATIONS=0` lists them all).
DURATIONS ?= 30
# The MPI tests' files: the test_*.py files that mark a test `mpi` (pytest.mark.mpi). Each
# rank then imports these files only, not the whole suite; tests/test_conftest.py checks
# that every mpi test is in one of them.
MPI_TESTS ?= $(shell grep -rl --include='test_*.py' 'mark\.mpi' tests | sort)
# `make test` prints the time of each step at the end (tools/step_times.sh).
TIMED := tools/step_times.sh run

.PHONY: all install venvs dist test test-quick test-unit test-mpi lint typecheck docs docs-images bench demo clean \
	mutation mutation-check mutation-sample

all: test

# $(call venv_rules,DIR,INTERPRETER,VERSION): DIR/bin/python, with researchutils installed
# editable on that version's stack. The stamp records the Python version and the extras, so
# a second run reinstalls only when those, setup.py, the Makefile or the constraints
# changed, and a venv of another version is made anew.
define venv_rules
STAMPS += $(1)/.installed-$(3)-$(4)
$(1)/.installed-$(3)-$(4): setup.py Makefile constraints.txt build-constraints.txt researchutils/_version.py
	@test -n '$(3)' || { echo 'No Python 3.11, 3.12 or 3.13 found that runs ($(2)): set PYTHON=' >&2; exit 1; }
	@if [ -e $(1) ] && ! $(1)/bin/python -c 'import sys; \
	        sys.exit(sys.version_info[:2] != ($(subst .,$(comma),$(3))))' 2>/dev/null; then \
	    echo '$(1) is not a Python $(3) environment: making it anew'; rm -rf $(1); fi
	test -x $(1)/bin/python || $(2) -m venv $(1)
	$(1)/bin/python -m pip install -q --upgrade 'pip>=25.3'
	$(1)/bin/python -m pip install -q --upgrade -e '.[$(4)]' '$(NUMPY_$(3))' \
	    '$(SETUPTOOLS_$(3))' $(foreach p,$(EXTRA_PACKAGES_$(3)),'$(p)')
	rm -f $(1)/.installed-*
	touch $$@
endef
$(eval $(call venv_rules,$(VENV),$(PYTHON),$(PY_VERSION),$(EXTRAS)$(STACK_EXTRAS_$(PY_VERSION))))
$(foreach v,$(TEST_VERSIONS),$(eval $(call venv_rules,.venv-$(v),$(PYTHON_$(v)),$(v),$(TEST_EXTRAS)$(STACK_EXTRAS_$(v)))))
stamp_of = $(filter $(1)/%,$(STAMPS))

install: $(firstword $(STAMPS))

# Every venv; `make -j3 venvs` installs them side by side (as `make test` does).
venvs: $(STAMPS)

# mypy reads its settings, the files it checks and the list of strictly typed modules from
# pyproject.toml ([tool.mypy]).
MYPY := $(VENV)/bin/mypy

lint: install
	$(VENV)/bin/ruff check researchutils _researchutils_chainer_compat tests benchmarks examples docs setup.py
	$(MYPY)

typecheck: install
	$(MYPY)

docs: install
	rm -rf docs/_build
	$(VENV)/bin/sphinx-build -W --keep-going -q -b html docs docs/_build/html

# The suite under each chosen stack's venv in turn, on TEST_WORKERS processes; the first
# failure stops make. The stacks run one after another: each already keeps every core busy.
test-unit: $(foreach venv,$(TEST_VENVS),$(call stamp_of,$(venv)))
	@test -n '$(TEST_VENVS)' || { echo 'no venv for STACKS=$(STACKS)' >&2; exit 1; }
	@set -e; for venv in $(TEST_VENVS); do \
	    stack="$$($$venv/bin/python -c 'import sys, numpy, chainer; \
	        print("Python %d.%d.%d" % sys.version_info[:3], "NumPy", numpy.__version__, \
	        "Chainer", chainer.__version__)')"; \
	    marks='not mpi'; [ "$$venv" = '$(ONE_STACK_VENV)' ] || marks="$$marks and not one_stack"; \
	    [ "$$venv" = '$(SYSTEM_VENV)' ] || marks="$$marks and not system"; \
	    echo "== pytest, $$stack ($$venv): -m '$$marks'"; \
	    $(TIMED) "pytest, $${stack% Chainer*}" \
	        $$venv/bin/python -m pytest -m "$$marks" $(XDIST) --durations=$(DURATIONS) $(PYTEST_ARGS); done

test-mpi: $(foreach venv,$(TEST_VENVS),$(call stamp_of,$(venv)))
	@test -n '$(TEST_VENVS)' || { echo 'no venv for STACKS=$(STACKS)' >&2; exit 1; }
	@set -e; for venv in $(TEST_VENVS); do \
	    echo "== MPI tests, $$($$venv/bin/python --version) ($$venv)"; \
	    marks='mpi'; [ "$$venv" = '$(SYSTEM_VENV)' ] || marks='mpi and not system'; \
	    $(TIMED) "MPI tests, $$($$venv/bin/python --version)" \
	        $(MPIEXEC) $$venv/bin/python -m pytest -m "$$marks" -p no:cacheprovider -q \
	        $(MPI_TESTS) $(PYTEST_ARGS); \
	done

# Each step in turn, timed; the venvs first, installed side by side (their downloads and
# builds overlap). The table of times comes at the end, after a failure too.
test:
	@export STEP_TIMES="$${STEP_TIMES:-$$(mktemp)}" RESEARCHUTILS_TEST_RECORD="$$(mktemp)"; \
	status=0; \
	$(TIMED) 'install the venvs (side by side)' $(MAKE) --no-print-directory -j3 venvs \
	&& $(TIMED) 'lint (ruff, mypy)' $(MAKE) --no-print-directory lint \
	&& $(TIMED) 'docs (sphinx -W)' $(MAKE) --no-print-directory docs \
	&& $(MAKE) --no-print-directory test-unit STACKS='$(STACKS)' \
	&& if [ '$(HAVE_MPI)' = yes ]; then \
	    $(MAKE) --no-print-directory test-mpi STACKS='$(STACKS)'; \
	else echo 'mpiexec not found: MPI tests not run (install openmpi-bin libopenmpi-dev)'; fi \
	&& $(TIMED) 'mutation sample (a tenth of two modules)' \
	    $(MAKE) --no-print-directory mutation-sample \
	|| status=$$?; \
	$(PY) -m tests.support.run_record "$$RESEARCHUTILS_TEST_RECORD"; \
	rm -f "$$RESEARCHUTILS_TEST_RECORD"; \
	tools/step_times.sh table "$$STEP_TIMES"; exit $$status

# The loop while editing: lint, then the newest stack's tests that are neither system tests
# nor slow, on TEST_WORKERS processes (4 min 23 s on a quiet 2-core machine;
# docs/testing.rst). `make test` runs everything.
QUICK_VENV := $(lastword $(foreach v,$(SUPPORTED),$(call venv_of,$(v))))
test-quick: $(call stamp_of,$(QUICK_VENV))
	@$(MAKE) --no-print-directory lint
	$(QUICK_VENV)/bin/python -m pytest -m 'not mpi and not system and not slow and not one_stack' \
	    $(XDIST) -q --durations=$(DURATIONS) $(PYTEST_ARGS)

# The documentation's pictures in docs/images (tools/docs_images.py says which): the main
# example runs as `make demo` runs it (a few minutes on 2 cores), then its frames and loss
# curve, a small search's figures and a decorated batch are written as small PNG files.
# DOCS_IMAGES_ARGS='--demo-run result/video_prediction' takes the demo's pictures from a
# run already made.
DOCS_IMAGES_ARGS ?=
docs-images: install
	$(PY) tools/docs_images.py $(DOCS_IMAGES_ARGS)

# The distribution: a wheel and an sdist in dist/, built by the PyPA builder in a throwaway
# venv under build/ (no project venv needed) with the build constraint above, then checked
# with twine (the README renders as the long description). docs/installation.rst installs it.
DIST_VENV := build/dist-venv
dist:
	rm -rf dist $(DIST_VENV)
	$(PYTHON) -m venv $(DIST_VENV)
	$(DIST_VENV)/bin/python -m pip install -q --upgrade pip build twine 'readme-renderer[md]'
	$(DIST_VENV)/bin/python -m build --outdir dist .
	$(DIST_VENV)/bin/python -m twine check --strict dist/*

bench: install
	$(PY) benchmarks/run_all.py

demo: install
	$(PY) examples/video_prediction/train.py $(DEMO_ARGS)

clean:
	rm -rf $(VENV) $(VENV)-3.* docs/_build .pytest_cache .mypy_cache wheelhouse gpu-check-results

# Mutation testing (tools/mutation.py, docs/testing.rst): mutmut on the modules that guard
# data and results, one at a time, each with its mirrored tests; reports in build/mutation/.
#   make mutation [MODULE=chainer/training/json_values.py] [MUTATION_WORKERS=1]
#   make mutation-check [MODULE=...]   fails when a module's score is under 90%
# It runs on the newest stack (the one mutmut 3 was measured on); not part of `make test`.
MUTATION_VENV := $(if $(filter 3.13,$(PY_VERSION)),$(VENV),$(if $(filter 3.13,$(TEST_VERSIONS)),.venv-3.13,$(VENV)))
MUTATION_WORKERS ?= 1
MODULE ?=
MUTATION_CHECK_MODULE ?= chainer/training/extensions/_slurm_requeue.py
$(MUTATION_VENV)/.mutation-installed: setup.py $(call stamp_of,$(MUTATION_VENV))
	$(MUTATION_VENV)/bin/python -m pip install -q -e '.[mutation]'
	touch $@

mutation: $(MUTATION_VENV)/.mutation-installed
	$(MUTATION_VENV)/bin/python tools/mutation.py --workers $(MUTATION_WORKERS) $(MODULE)

# The CI-sized check `make test` runs last: a fixed tenth of the mutants of the modules in
# SAMPLE_MODULES (tools/mutation.py), whose tests take seconds; fails under 90%.
mutation-sample: $(MUTATION_VENV)/.mutation-installed
	$(MUTATION_VENV)/bin/python tools/mutation.py --workers $(MUTATION_WORKERS) --check 90 --sample

mutation-check: $(MUTATION_VENV)/.mutation-installed
	$(MUTATION_VENV)/bin/python tools/mutation.py --workers $(MUTATION_WORKERS) --check 90 \
	    $(or $(MODULE),$(MUTATION_CHECK_MODULE))

include tools/gpu.mk
