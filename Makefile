# Two commands do all the set-up on a fresh machine with Python 3.11 and pip:
#   make demo   runs the main example
#   make test   lint, docs (warnings are errors), pytest, and the MPI tests when mpiexec exists
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
# Chainer's sdist only builds with setuptools < 70 inside pip's build isolation.
export PIP_CONSTRAINT := $(CURDIR)/constraints.txt
# pip >= 25.3 deprecates PIP_CONSTRAINT for isolated builds in favour of build constraints.
export PIP_BUILD_CONSTRAINT := $(CURDIR)/constraints.txt
comma := ,
HAVE_MPI := $(shell command -v mpiexec >/dev/null 2>&1 && echo yes)
EXTRAS := test,docs,slack,plot$(if $(HAVE_MPI),$(comma)mpi)
MPIEXEC := mpiexec --allow-run-as-root --oversubscribe -n 2
PYTEST_ARGS ?=
DEMO_ARGS ?=

.PHONY: all install test test-unit test-mpi lint docs bench demo clean

all: test

# The stamp records which extras were installed, so a second run reinstalls
# only when setup.py, the constraints or the set of extras changed.
$(VENV)/.installed-$(EXTRAS): setup.py constraints.txt researchutils/_version.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip 'setuptools<70' wheel
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	rm -f $(VENV)/.installed-*
	touch $@

install: $(VENV)/.installed-$(EXTRAS)

lint: install
	$(VENV)/bin/ruff check researchutils tests benchmarks examples docs setup.py

docs: install
	rm -rf docs/_build
	$(VENV)/bin/sphinx-build -W --keep-going -q -b html docs docs/_build/html

test-unit: install
	$(PY) -m pytest -m 'not mpi' $(PYTEST_ARGS)

test-mpi: install
	$(MPIEXEC) $(PY) -m pytest -m mpi -p no:cacheprovider -q tests $(PYTEST_ARGS)

test: lint docs test-unit
ifeq ($(HAVE_MPI),yes)
	$(MAKE) test-mpi
else
	@echo "mpiexec not found: MPI tests not run (install openmpi-bin libopenmpi-dev)"
endif

bench: install
	$(PY) benchmarks/run_all.py

demo: install
	$(PY) examples/video_prediction/train.py $(DEMO_ARGS)

clean:
	rm -rf $(VENV) docs/_build .pytest_cache
