"""Run every benchmark script in this folder (``bench_*.py``) one after another.

Each script compares researchutils with the strongest alternative side by side in
one process and prints ratios. Usage: ``python benchmarks/run_all.py [name ...]``
where a name selects scripts whose file name contains it.
"""
import glob
import os
import subprocess
import sys


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    scripts = sorted(glob.glob(os.path.join(here, 'bench_*.py')))
    if argv:
        scripts = [s for s in scripts if any(name in os.path.basename(s) for name in argv)]
    failed = []
    for script in scripts:
        print('=' * 72, flush=True)
        print(os.path.basename(script), flush=True)
        print('=' * 72, flush=True)
        if subprocess.call([sys.executable, script]) != 0:
            failed.append(os.path.basename(script))
    if failed:
        print('failed: ' + ', '.join(failed))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
