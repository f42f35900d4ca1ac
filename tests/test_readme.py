"""README.md is a front door: short, its Python runs as written, and its links lead somewhere.

The per-module examples live in the tutorials, whose examples run as tests
(``tests/test_doc_examples.py``); this file checks that each piece keeps one there.
"""
import glob
import os
import re
import subprocess
import sys

import pytest

from tests.support.doc_pages import tutorials_in_order

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, 'README.md')
TUTORIALS = sorted(glob.glob(os.path.join(ROOT, 'docs', 'tutorials', '*.rst')))


def _readme():
    with open(README, encoding='utf-8') as f:
        return f.read()


def _snippets():
    return re.findall(r'```python\n(.*?)```', _readme(), flags=re.S)


SNIPPETS = _snippets()
RUNNABLE = [code for code in SNIPPETS if not code.startswith('# needs:')]


def _doctest_lines():
    """The doctest source lines (``>>>`` and ``...``) of every tutorial, as one text."""
    lines = []
    for path in TUTORIALS:
        with open(path, encoding='utf-8') as f:
            lines += [line.strip()[4:] for line in f
                      if line.strip().startswith(('>>> ', '... '))]
    return '\n'.join(lines)


def test_readme_is_at_most_8_kb():
    assert len(_readme().encode('utf-8')) <= 8 * 1024


def test_readme_has_a_runnable_example():
    assert RUNNABLE


@pytest.mark.timeout(120)
@pytest.mark.parametrize('index', range(len(RUNNABLE)))
def test_readme_snippet_runs(index, tmp_path):
    script = tmp_path / 'snippet.py'
    script.write_text(RUNNABLE[index])
    result = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path),
                            capture_output=True, text=True, timeout=110)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.parametrize('name', [
    'grad_clip_lstm', 'GradClipLSTM', 'average_k_step_squared_error', 'ConvLSTM',
    'ActionConditionedLSTM', 'DeconvolutionPS', 'NormalWithLoc',
    'DecorableSerialIterator', 'DecorableMultiprocessIterator', 'save_model', 'load_model',
    'SlackReport', 'DataParallelChainerNetwork', 'DataParallelChainerOptimizer',
    'ChainerExperiment', 'Predictor', 'researchutils.arrays import',
    'researchutils.files import', 'researchutils.image import',
    'researchutils.math.angle import', 'researchutils.math.normalization import',
    'researchutils.task import', 'researchutils.chainer.onnx import export'])
def test_each_piece_has_a_tutorial_example_that_runs(name):
    # The README once held one snippet per module; they moved into the tutorials as doctests.
    assert name in _doctest_lines(), name


def test_readme_links_lead_to_files_of_the_repository():
    targets = re.findall(r'\]\(([^)#]+)\)', _readme())
    local = [t for t in targets if '://' not in t]
    assert local
    missing = [t for t in local if not os.path.exists(os.path.join(ROOT, t))]
    assert missing == []


def test_readme_links_the_tutorials_in_the_front_pages_order():
    section = _readme()[_readme().index('\n## Documentation\n'):]
    linked = re.findall(r'\]\(docs/tutorials/(\w+)\.rst\)', section)
    assert linked == tutorials_in_order()


def test_the_front_page_shows_the_readme_example():
    # The same example at both front doors; the README's runs as a test.
    with open(os.path.join(ROOT, 'docs', 'index.rst'), encoding='utf-8') as f:
        page = f.read()
    block = page[page.index('.. code-block:: python\n\n'):].split('\n\n', 1)[1]
    lines = []
    for line in block.splitlines():
        if line and not line.startswith('   '):
            break
        lines.append(line[3:])
    assert '\n'.join(lines).strip() == RUNNABLE[0].strip()
