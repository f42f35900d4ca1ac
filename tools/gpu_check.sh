#!/usr/bin/env bash
# The GPU check: every `gpu`-marked test, the CuPy-name tests and the benchmarks' GPU rows,
# on a GPU machine without network, installing only from ./wheelhouse (`make wheelhouse`).
#
#   tools/gpu_check.sh [--dry-run]         (what `make gpu-check` runs; dry: gpu-check-dry)
#
# Target machine: Python 3.12, NumPy 2.5, cupy-cuda13x 14.2, a CUDA 13 driver, no network.
# The check makes a venv that sees the image's packages (its NumPy and CuPy are the ones
# tested), installs researchutils[slack] with `pip install --no-index --find-links
# wheelhouse` (Chainer, researchutils, slack_sdk; the image has the rest), then runs:
#   1. pytest -m gpu tests                  -> pytest-gpu.xml, pytest-gpu.txt
#   2. pytest tests/test_cupy_names.py ...  -> pytest-cupy-names.xml, pytest-cupy-names.txt
#   3. BENCH_DEVICES=gpu, every benchmark with GPU rows -> benchmarks-gpu.txt
# and writes everything, with nvidia-smi, versions, pip list and summary.txt, into one
# folder: $OUT when set (the device tool's result folder), else ./gpu-check-results. It
# stops each step at its share of 8 minutes (GPU_CHECK_SECONDS, default 470).
#
# Without --dry-run it fails when Chainer sees no GPU or a gpu test was skipped, so a
# broken CUDA set-up cannot pass as a clean run. --dry-run (any machine: CPU-only is fine)
# runs the same install and selection, accepting that the GPU tests skip and the GPU rows
# are left out; it proves the wheelhouse and the selection work before a GPU is lent.
#
# Environment: GPU_CHECK_PYTHON (default python3, the image's), WHEELHOUSE (default
# ./wheelhouse), GPU_CHECK_VENV (default a fresh folder under $TMPDIR or /tmp, removed when
# the check ends).
#
# A results folder holds one run's results: the check refuses, before doing anything, a
# results folder that is not empty (an earlier run's files would stand beside this run's,
# and summary.txt would count an old pytest-gpu.xml), or one it cannot create. When the
# install fails, the test and benchmark steps are not started (they would test whatever the
# base interpreter has) and are reported as such.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dry=0
case "${1:-}" in
    --dry-run) dry=1 ;;
    '') ;;
    *) echo "usage: $0 [--dry-run]" >&2; exit 2 ;;
esac
results=${OUT:-$here/gpu-check-results}
wheelhouse=${WHEELHOUSE:-$here/wheelhouse}
python=${GPU_CHECK_PYTHON:-python3}
deadline=$((SECONDS + ${GPU_CHECK_SECONDS:-470}))
failed=()

# Checks first: nothing is built or written until the results folder is known to be usable.
if ! mkdir -p -- "$results" 2>/dev/null || [ ! -d "$results" ] || [ ! -w "$results" ]; then
    echo "gpu_check.sh: cannot write results into $results" >&2
    exit 2
fi
if [ -n "$(ls -A -- "$results")" ]; then
    echo "gpu_check.sh: $results is not empty (an earlier run's results?): give OUT an" \
         "empty or new folder, or remove it" >&2
    exit 2
fi
scratch=
if [ -n "${GPU_CHECK_VENV:-}" ]; then
    venv=$GPU_CHECK_VENV
else
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/researchutils-gpu-check.XXXXXX") || exit 2
    venv=$scratch/venv
    trap 'rm -rf "$scratch"' EXIT
fi
exec > >(tee "$results/gpu_check.log") 2>&1

# Nothing from the calling environment steers pip here: the Makefile's constraints are for
# its own venvs, and a site pip.conf may name indexes that are not there.
for name in $(compgen -e | grep '^PIP_'); do unset "$name"; done
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
export PYTHONDONTWRITEBYTECODE=1
# Nor does the caller's PYTHONPATH (a mutation tester's or a bisection's clone) steer what the
# venv imports: Chainer and researchutils are tested as the wheelhouse installed them.
unset PYTHONPATH PYTHONHOME PYTHONSTARTUP PYTHONUSERBASE

# step NAME SECONDS COMMAND...: run with a time limit (never past the deadline), record
# its exit status and duration in steps.tsv; a failure is noted and the check goes on.
step() {
    local name=$1 limit=$2 left start rc
    shift 2
    left=$((deadline - SECONDS))
    [ "$limit" -gt "$left" ] && limit=$left
    echo "== $name (limit ${limit}s): $*"
    start=$SECONDS
    if [ "$limit" -le 0 ]; then
        rc=124
        echo "not started: the check's time is spent"
    else
        # A shell function runs in a bash of its own, so that timeout can stop it.
        timeout --kill-after=10 "$limit" bash -c '"$@"' step "$@"
        rc=$?
    fi
    printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - start))" >> "$results/steps.tsv"
    [ "$rc" -eq 0 ] || { failed+=("$name (exit $rc$([ "$rc" -eq 124 ] && echo ', timed out'))"); }
    return "$rc"
}

machine() {
    date -u '+%Y-%m-%dT%H:%M:%SZ'
    uname -a
    echo "cpus: $(nproc)"
    free -g 2>/dev/null | sed -n 2p
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    else
        echo 'nvidia-smi: not found'
    fi
}

make_venv() {
    # --without-pip: a base interpreter without ensurepip (Debian's, without python3-venv)
    # still makes the venv; the image's own pip, reached through the .pth below, installs.
    "$python" -m venv --system-site-packages --without-pip "$venv" || return
    # --system-site-packages reaches the base interpreter's site-packages only; when the
    # image's python3 is itself a venv (/opt/torch/.venv), its packages (NumPy, CuPy,
    # pytest, pip) live in that venv, so add its site folders too (with their .pth files).
    local purelib
    purelib=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') || return
    "$python" -c 'import site, sys
dirs = site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])
print("import site; " + "; ".join("site.addsitedir(%r)" % d for d in dirs))' \
        > "$purelib/_gpu_check_image_site.pth"
}

install() {
    [ -d "$wheelhouse" ] || { echo "no wheelhouse at $wheelhouse: run \`make wheelhouse\` first" >&2; return 1; }
    ls -l "$wheelhouse"
    # Ours always come from the wheelhouse, even where the image (or, in a dry run, the
    # calling venv) has a copy; then the requirements are completed from both.
    "$venv/bin/python" -m pip install --no-index --find-links "$wheelhouse" --no-deps \
        --force-reinstall researchutils chainer slack_sdk || return
    "$venv/bin/python" -m pip install --no-index --find-links "$wheelhouse" \
        'researchutils[slack]' 'pytest-timeout>=2' || return
    "$venv/bin/python" -m pip list > "$results/pip-list.txt"
}

versions() {
    # From / so that the versions are those installed, not this checkout's sources. (The
    # tests run from the checkout; the .pth researchutils installs imports the installed
    # package at start-up, before pytest puts the checkout on sys.path.)
    cd / && "$venv/bin/python" - <<'EOF'
import sys
print('python', sys.version.replace('\n', ' '))
import numpy
print('numpy', numpy.__version__)
import chainer
import researchutils
print('chainer', chainer.__version__, chainer.__file__)
print('researchutils', researchutils.__version__, researchutils.__file__)
try:
    import cupy
    print('cupy', cupy.__version__, cupy.__file__)
    print('cuda runtime', cupy.cuda.runtime.runtimeGetVersion(),
          'driver', cupy.cuda.runtime.driverGetVersion())
    print('gpus', cupy.cuda.runtime.getDeviceCount(),
          cupy.cuda.runtime.getDeviceProperties(0)['name'].decode())
except Exception as error:
    print('cupy: {}: {}'.format(type(error).__name__, error))
from chainer.backends import cuda
print('chainer.backends.cuda.available', cuda.available)
print('chainer.backends.cuda.cudnn_enabled', cuda.cudnn_enabled)
if not cuda.available:
    print('why not:', repr(getattr(cuda, '_resolution_error', None)))
chainer.print_runtime_info()
EOF
    cd "$here" && "$venv/bin/python" -c 'import researchutils
print("researchutils as the tests from the checkout see it:", researchutils.__file__)'
}

cuda_seen() {
    "$venv/bin/python" -c 'import sys, chainer.backends.cuda as c; sys.exit(not c.available)'
}

pytest_run() {  # pytest_run NAME ARGS...: junit xml and text under NAME.*
    local name=$1
    shift
    (cd "$here" && "$venv/bin/python" -m pytest -p no:cacheprovider -ra -v \
        --junitxml="$results/$name.xml" "$@") > "$results/$name.txt" 2>&1
    local rc=$?
    tail -n 25 "$results/$name.txt"
    return "$rc"
}

benchmarks() {
    local scripts=() script
    for script in "$here"/benchmarks/bench_*.py; do
        grep -q 'bench_devices()' "$script" && scripts+=("$(basename "$script" .py)")
    done
    echo "scripts with GPU rows: ${scripts[*]}"
    (cd "$here" && BENCH_DEVICES=gpu "$venv/bin/python" benchmarks/run_all.py "${scripts[@]}") \
        > "$results/benchmarks-gpu.txt" 2>&1
    local rc=$?
    cat "$results/benchmarks-gpu.txt"
    return "$rc"
}

junit_counts() {  # tests/failures/errors/skipped of one junit file
    "$venv/bin/python" - "$1" <<'EOF'
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suite = root if root.tag == 'testsuite' else root.find('testsuite')
print(' '.join('{}={}'.format(k, suite.get(k)) for k in ('tests', 'failures', 'errors', 'skipped')))
EOF
}

export here results wheelhouse python venv
export -f machine make_venv install versions pytest_run benchmarks

echo "GPU check of researchutils $(git -C "$here" describe --always --dirty 2>/dev/null)" \
     "$([ "$dry" -eq 1 ] && echo '(dry run)') into $results"
step machine 30 machine > "$results/machine.txt"
cat "$results/machine.txt"
command -v nvidia-smi >/dev/null && { nvidia-smi > "$results/nvidia-smi.txt" 2>&1; cat "$results/nvidia-smi.txt"; }
installed=no
if step venv 60 make_venv; then
    step install 120 install && installed=yes
else
    printf 'install\tnot started\t0\n' >> "$results/steps.tsv"
fi
if [ "$installed" = yes ]; then
    step versions 60 versions > "$results/versions.txt"
    cat "$results/versions.txt"
    if ! cuda_seen; then
        if [ "$dry" -eq 1 ]; then
            echo 'dry run: Chainer sees no GPU, so the gpu tests skip and the GPU rows are left out'
        else
            failed+=('CUDA: Chainer sees no GPU (versions.txt says why)')
        fi
    fi
    step pytest-gpu 240 pytest_run pytest-gpu -m gpu tests
    step pytest-cupy-names 60 pytest_run pytest-cupy-names tests/test_cupy_names.py \
        tests/support/test_cupy_names.py
    step benchmarks-gpu 200 benchmarks
else
    echo 'the venv or the install failed: the tests and benchmarks are not started'
    for name in versions pytest-gpu pytest-cupy-names benchmarks-gpu; do
        printf '%s\tnot started\t0\n' "$name" >> "$results/steps.tsv"
    done
fi

{
    echo "GPU check $([ "$dry" -eq 1 ] && echo '(dry run) ')finished $(date -u '+%Y-%m-%dT%H:%M:%SZ') after ${SECONDS}s"
    for name in pytest-gpu pytest-cupy-names; do
        [ -f "$results/$name.xml" ] && echo "$name: $(junit_counts "$results/$name.xml")"
    done
    echo 'steps (name, exit status, seconds):'
    cat "$results/steps.tsv"
} > "$results/summary.txt"
if [ "$dry" -eq 0 ] && [ -f "$results/pytest-gpu.xml" ] && \
        ! grep -q ' skipped=0' <(junit_counts "$results/pytest-gpu.xml"); then
    failed+=('pytest-gpu: gpu tests were skipped on the GPU machine')
fi
if [ "${#failed[@]}" -gt 0 ]; then
    printf 'FAILED: %s\n' "${failed[@]}" >> "$results/summary.txt"
fi
cat "$results/summary.txt"
[ "${#failed[@]}" -eq 0 ]
