# The GPU check, in two halves (included by the Makefile):
#   make wheelhouse      on a machine with the package registries: ./wheelhouse, every wheel
#                        the GPU machine lacks (Chainer built from its sdist, researchutils,
#                        slack_sdk and a few pure-Python fallbacks), under 20 MiB
#   make gpu-check       on the GPU machine (no network): install from ./wheelhouse only, run
#                        the gpu tests and the benchmarks' GPU rows, results in $OUT or
#                        ./gpu-check-results (tools/gpu_check.sh; without make, run that)
#   make gpu-check-dry   the same on any machine, GPU tests skipping: proves the wheelhouse
# WHEELHOUSE_PYTHON runs pip for the build (default: $(PYTHON), else python3);
# GPU_CHECK_PYTHON is the interpreter whose NumPy and CuPy are tested (default python3).
.PHONY: wheelhouse gpu-check gpu-check-dry

WHEELHOUSE_PYTHON ?= $(or $(PYTHON),python3)

wheelhouse:
	PYTHON='$(WHEELHOUSE_PYTHON)' tools/build_wheelhouse.sh '$(CURDIR)/wheelhouse'

gpu-check:
	tools/gpu_check.sh

gpu-check-dry:
	tools/gpu_check.sh --dry-run
