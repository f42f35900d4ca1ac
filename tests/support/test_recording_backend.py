"""The recording backend counts as a display for matplotlib and records each show."""
import os
import subprocess
import sys

import pytest

pytest.importorskip('matplotlib')

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_recording_backend_records_each_show(tmp_path):
    log = tmp_path / 'log'
    env = dict(os.environ, MPLBACKEND='module://tests.support.recording_backend',
               RECORDING_BACKEND_LOG=str(log), PYTHONPATH=ROOT)
    code = ('import matplotlib, matplotlib.pyplot as plt\n'
            'plt.plot([1, 2])\n'
            'plt.show()\n'
            'plt.show(block=False)\n'
            'print(matplotlib.get_backend())\n')
    out = subprocess.run([sys.executable, '-c', code], env=env, cwd=str(tmp_path), check=True,
                         capture_output=True, text=True).stdout
    assert out.strip() == 'module://tests.support.recording_backend'
    assert log.read_text().splitlines() == ['show block=None', 'show block=False']
