# The GPU check, in two halves (included by the Makefile):
#   make wheelhouse      on a machine with the package registries: ./wheelhouse, every wheel
#                        the GPU machine lacks (Chainer built from its sdist, researchutils,
#                        slack_sdk and a few pure-Python fallbacks), under 20 MiB
#   make gpu-check       on the GPU machine (no network): install from ./wheelhouse only, run
#                        the gpu tests and the benchmarks' GPU rows, results in $OUT or
#                        ./gpu-check-results (tools/gpu_check.sh; without make, run that)
#   make gpu-check-dry   the same on any machine, GPU tests skipping: proves the wheelhouse
#   make gpu-compile-check  on this machine, no GPU needed: every CUDA kernel on our GPU paths
#                        compiled with NVRTC for sm_80 sm_90 sm_120 and the newest NVRTC knows,
#                        on the Python 3.13 stack (CuPy 14, CUDA 13 NVRTC; docs/gpu.rst)
# WHEELHOUSE_PYTHON runs pip for the build (default: $(PYTHON), else python3);
# GPU_CHECK_PYTHON is the interpreter whose NumPy and CuPy are tested (default python3).
.PHONY: wheelhouse gpu-check gpu-check-dry gpu-compile-check

WHEELHOUSE_PYTHON ?= $(or $(PYTHON),python3)

wheelhouse:
	PYTHON='$(WHEELHOUSE_PYTHON)' tools/build_wheelhouse.sh '$(CURDIR)/wheelhouse'

gpu-check:
	tools/gpu_check.sh

gpu-check-dry:
	tools/gpu_check.sh --dry-run

# The stack with CuPy and NVRTC: .venv itself when PYTHON is a 3.13, else .venv-3.13.
GPU_COMPILE_VENV := $(if $(filter 3.13,$(PY_VERSION)),$(VENV),.venv-3.13)

gpu-compile-check: $(filter $(GPU_COMPILE_VENV)/%,$(STAMPS))
	@test -x $(GPU_COMPILE_VENV)/bin/python || { echo 'gpu-compile-check needs Python 3.13 (set PYTHON_3.13=)' >&2; exit 1; }
	$(GPU_COMPILE_VENV)/bin/python -m tests.support.gpu_compile
