#!/usr/bin/env bash
# Build, on a machine that reaches the package registries, every wheel the GPU check needs
# beyond the GPU machine's own image, into one folder (default ./wheelhouse; git-ignored).
#
#   tools/build_wheelhouse.sh [DIR]        (what `make wheelhouse` runs)
#
# The GPU machine (docs: tools/gpu_check.sh) has Python 3.12, NumPy 2.5, cupy-cuda13x 14.2,
# pytest, setuptools, filelock, protobuf, typing-extensions, six, matplotlib and mpi4py, and
# no network. What it lacks, and this script provides:
#   chainer 7.8.1     built from its sdist (only an sdist exists; pure Python, py3-none-any)
#   researchutils     built from this checkout (carries its .pth compatibility hook)
#   slack_sdk         the `slack` extra: tests/.../test_slack_report*.py import it
# and, pure Python and small, so that a leaner image still installs: typing_extensions,
# filelock, six (Chainer's requirements), protobuf (Chainer's; abi3 manylinux wheel for
# CPython 3.12 x86_64) and pytest-timeout (tox.ini sets a per-test timeout).
# NumPy, CuPy and pytest are the image's: the check must test the image's own stack.
#
# Environment: PYTHON (default python3) runs pip; any Python 3.8+ will do, since every wheel
# here is pure Python or fetched for CPython 3.12 explicitly. PIP_BUILD_CONSTRAINT defaults
# to ./build-constraints.txt (Chainer's sdist needs setuptools < 70 inside pip's build
# isolation; pip < 25.3 reads it from PIP_CONSTRAINT, which defaults to the same file).
# WHEELHOUSE_MAX_MB (default 20) is the size limit.
#
# Nothing is lost: the wheels are built into a new folder beside DIR, checked, and only then
# put in DIR's place; a failed build (no network, a broken Python, over the size limit)
# leaves the previous wheelhouse as it was. A DIR that exists and is not a folder is refused.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=$(realpath -m -- "${1:-$here/wheelhouse}")
if [ -e "$dest" ] && [ ! -d "$dest" ]; then
    echo "build_wheelhouse.sh: $dest exists and is not a folder: refusing to replace it" >&2
    exit 2
fi
python=${PYTHON:-python3}
max_mb=${WHEELHOUSE_MAX_MB:-20}
export PIP_BUILD_CONSTRAINT=${PIP_BUILD_CONSTRAINT:-$here/build-constraints.txt}
export PIP_CONSTRAINT=${PIP_CONSTRAINT:-$PIP_BUILD_CONSTRAINT}
# The target machine's interpreter, for the wheels that are not pure Python.
target=(--only-binary=:all: --implementation cp --python-version 3.12 --abi cp312 --abi abi3
        --abi none --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
        --platform manylinux2014_x86_64 --platform any)

mkdir -p "$(dirname "$dest")"
# The new wheelhouse is built beside the old one (same file system, so the swap is a rename)
# and removed again on any failure.
build=$(mktemp -d "$(dirname "$dest")/.$(basename "$dest").new.XXXXXX")
trap 'rm -rf "$build"' EXIT
chmod a+rx,u+w "$build"     # mktemp's folder is private; a wheelhouse is not
cd "$here"
"$python" -m pip --version
# --no-deps throughout: the image supplies NumPy and CuPy, and a resolver run here would
# fetch NumPy (16 MB) for nothing. The GPU check's `pip install --no-index` then proves
# that the folder plus the image satisfy every requirement.
"$python" -m pip wheel --no-deps --no-cache-dir -w "$build" 'chainer==7.8.1' .
# The download step resolves no dependencies, so no constraint file applies to it (theirs
# pin setuptools<70 for the builds above, and would only get in the way).
PIP_CONSTRAINT= PIP_BUILD_CONSTRAINT= "$python" -m pip download --no-deps -d "$build" \
    "${target[@]}" 'slack_sdk>=3.19,<4' typing_extensions filelock six protobuf \
    'pytest-timeout>=2'

ls -l "$build"
kib=$(du -sk "$build" | cut -f1)
echo "wheelhouse: $(ls "$build" | wc -l) wheels, $((kib / 1024)).$(( (kib % 1024) * 10 / 1024 )) MiB"
if [ "$kib" -gt $((max_mb * 1024)) ]; then
    echo "wheelhouse is over ${max_mb} MiB: $dest left as it was" >&2
    exit 1
fi
# Only now does the old wheelhouse go: moved aside, the new one renamed into place, then the
# old one removed.
old=
if [ -d "$dest" ]; then
    old=$(mktemp -d "$(dirname "$dest")/.$(basename "$dest").old.XXXXXX")
    mv -T "$dest" "$old/wheelhouse"
fi
mv -T "$build" "$dest"
[ -z "$old" ] || rm -rf "$old"
echo "wheelhouse: $dest"
