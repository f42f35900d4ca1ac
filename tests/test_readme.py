"""Every Python snippet in README.md runs as written, except those that say what they need."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _snippets():
    with open(os.path.join(ROOT, 'README.md'), encoding='utf-8') as f:
        text = f.read()
    return re.findall(r'```python\n(.*?)```', text, flags=re.S)


SNIPPETS = _snippets()
RUNNABLE = [code for code in SNIPPETS if not code.startswith('# needs:')]


def test_readme_has_one_snippet_per_module():
    for name in ('grad_clip_lstm', 'average_k_step_squared_error', 'DecorableSerialIterator',
                 'save_model', 'SlackReport', 'DataParallelChainerNetwork',
                 'ChainerExperiment', 'create_communicator'):
        assert any(name in code for code in SNIPPETS), name


@pytest.mark.timeout(120)
@pytest.mark.parametrize('index', range(len(RUNNABLE)))
def test_readme_snippet_runs(index, tmp_path):
    script = tmp_path / 'snippet.py'
    script.write_text(RUNNABLE[index])
    result = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path),
                            capture_output=True, text=True, timeout=110)
    assert result.returncode == 0, result.stderr[-3000:]


def test_readme_has_a_snippet_for_each_module_beside_chainer():
    for name in ('researchutils.arrays import', 'researchutils.files import',
                 'researchutils.image import', 'researchutils.math.angle import',
                 'researchutils.task import'):
        assert any(name in code for code in RUNNABLE), name
