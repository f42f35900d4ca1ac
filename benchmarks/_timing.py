"""Side-by-side timing: alternate the candidates, repeat, report medians and ratios."""
import os
import statistics
import time

import numpy


def compare(candidates, repeat=15, number=20, warmup=3):
    """Time each callable in ``candidates`` (a dict name -> fn) in alternating rounds.

    Returns a dict name -> median seconds per call. Alternating rounds expose every
    candidate to the same machine state, so the ratios hold even when absolute times drift.
    """
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    samples = {name: [] for name in candidates}
    for _ in range(repeat):
        for name, fn in candidates.items():
            start = time.perf_counter()
            for _ in range(number):
                fn()
            samples[name].append((time.perf_counter() - start) / number)
    return {name: statistics.median(values) for name, values in samples.items()}


def report(title, medians, baseline):
    """Print each candidate's median time and its ratio to ``baseline``."""
    print(title)
    base = medians[baseline]
    for name, seconds in medians.items():
        print('  {:<44s} {:9.3f} ms   {:5.3f}x {}'.format(
            name, seconds * 1e3, seconds / base, baseline))


def synchronizer(device):
    """A function that waits for ``device``'s pending work (nothing to wait for on the CPU)."""
    if device.xp is numpy:
        return lambda: None
    return device.device.synchronize


def bench_devices():
    """The devices a benchmark times on: the CPU, and GPU 0 when CuPy sees a GPU.

    ``BENCH_DEVICES=gpu`` keeps the GPU rows alone and ``BENCH_DEVICES=cpu`` the CPU rows
    (``tools/gpu_check.sh`` runs the GPU rows); unset, or ``cpu,gpu``, keeps both. A GPU asked
    for where CuPy sees none is left out with a line saying so.
    """
    import chainer

    wanted = os.environ.get('BENCH_DEVICES', 'cpu,gpu').replace(' ', '').split(',')
    unknown = sorted(set(wanted) - {'cpu', 'gpu'})
    if unknown:
        raise ValueError('BENCH_DEVICES must list cpu and/or gpu, got {!r}'.format(
            os.environ['BENCH_DEVICES']))
    devices = []
    if 'cpu' in wanted:
        devices.append(chainer.get_device('@numpy'))
    if 'gpu' in wanted:
        if chainer.backends.cuda.available:
            devices.append(chainer.get_device('@cupy:0'))
        else:
            print('GPU rows skipped: CuPy sees no GPU', flush=True)
    return devices
