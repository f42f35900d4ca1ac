"""The documented install works: docs/installation.rst's recipe, and a distribution ready to
publish (``make dist``: a wheel and an sdist that ``twine check`` passes, the README rendered
as the long description).

System tests, run once, on the newest stack (tests/support/stacks.py), and ``slow``: each
makes a fresh venv outside the checkout and installs into it with pip, as a user would (pip
reads the index, or its cache).
"""
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.support import wheel
from tests.support.processes import own_env

pytestmark = pytest.mark.slow

REPO = wheel.REPO
INSTALLATION = os.path.join(REPO, 'docs', 'installation.rst')

# A plain Chainer script: a link and an extension of researchutils in Chainer's own Trainer.
SCRIPT = '''
import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
from chainer import training

from researchutils.chainer.links import GradClipLSTM
from researchutils.chainer.training.extensions import BestModelSaver


class Model(chainer.Chain):
    def __init__(self):
        super().__init__()
        with self.init_scope():
            self.lstm = GradClipLSTM(3, 4, clip_min=-1.0, clip_max=1.0)
            self.out = L.Linear(4, 1)

    def forward(self, x, t):
        self.lstm.reset_state()
        loss = F.mean_squared_error(self.out(self.lstm(x)), t)
        chainer.report({'loss': loss}, self)
        return loss


model = Model()
data = chainer.datasets.TupleDataset(np.ones((4, 3), np.float32), np.zeros((4, 1), np.float32))
optimizer = chainer.optimizers.SGD().setup(model)
updater = training.StandardUpdater(chainer.iterators.SerialIterator(data, 2), optimizer)
trainer = training.Trainer(updater, (2, 'epoch'), out='result')
trainer.extend(training.extensions.Evaluator(
    chainer.iterators.SerialIterator(data, 2, repeat=False, shuffle=False), model))
trainer.extend(BestModelSaver(model, 'validation/main/loss', 'lowest', 'result/best.npz'))
trainer.run()
print('trained', updater.iteration, 'iterations; best model saved:',
      chainer.serializers.load_npz('result/best.npz', Model()) is None)
'''


def _code_blocks(text):
    """The bash code blocks of an rst page, each as its list of lines."""
    blocks = []
    for match in re.finditer(r'\.\. code-block:: bash\n\n((?:   .*\n|\n)+)', text):
        blocks.append([line[3:] for line in match.group(1).splitlines() if line.strip()])
    return blocks


def _user_env(venv):
    """A user's shell with ``venv`` activated: none of this run's pins or import paths."""
    env = own_env()
    for name in ('PIP_CONSTRAINT', 'PIP_BUILD_CONSTRAINT', 'VIRTUAL_ENV', 'PYTHONHOME'):
        env.pop(name, None)
    env['PATH'] = os.path.join(str(venv), 'bin') + os.pathsep + env['PATH']
    env['VIRTUAL_ENV'] = str(venv)
    return env


def _bash(lines, cwd, env, timeout=900):
    result = subprocess.run(['bash', '-euo', 'pipefail', '-c', '\n'.join(lines)], cwd=cwd,
                            env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, '\n'.join(lines) + '\n' + result.stdout[-3000:] + \
        result.stderr[-5000:]
    return result


def _wheel_recipe():
    """The installation page's recipe for a wheel: the block that installs a ``.whl``."""
    with open(INSTALLATION, encoding='utf-8') as f:
        text = f.read()
    return [block for block in _code_blocks(text) if any('.whl' in line for line in block)]


def test_the_install_page_opens_with_the_install_command():
    with open(INSTALLATION, encoding='utf-8') as f:
        text = f.read()
    first_block = _code_blocks(text)[0]
    assert first_block[-1].startswith("pip install './researchutils[")
    assert text.index('.. code-block:: bash') < text.index('Supported versions')
    assert '``research-utils`` on PyPI is another person\'s project' in text


def test_the_documented_wheel_install_runs_a_plain_chainer_script(researchutils_wheel,
                                                                  tmp_path):
    recipes = _wheel_recipe()
    assert len(recipes) == 1
    recipe = recipes[0]
    # The page names the wheel this checkout builds (its version included).
    assert any(researchutils_wheel.name in line for line in recipe), recipe
    user = tmp_path / 'user'
    user.mkdir()
    shutil.copy(researchutils_wheel, user)
    shutil.copy(os.path.join(REPO, 'build-constraints.txt'), user)
    venv = tmp_path / 'venv'
    subprocess.run([sys.executable, '-m', 'venv', str(venv)], check=True, env=own_env())
    env = _user_env(venv)
    _bash(recipe, user, env)
    (user / 'train.py').write_text(SCRIPT)
    result = _bash(['python train.py'], user, env, timeout=300)
    assert 'trained 4 iterations; best model saved: True' in result.stdout
    # The install is the wheel's, in the venv, not this checkout.
    where = _bash(['python -c "import researchutils; print(researchutils.__file__)"'],
                  user, env)
    assert where.stdout.strip().startswith(str(venv))


def test_make_dist_files_pass_twine_check_and_the_readme_renders(tmp_path):
    source = wheel.copy_source(tmp_path)
    for name in ('pyproject.toml', 'build-constraints.txt'):
        shutil.copy(os.path.join(REPO, name), source / name)
    tools = tmp_path / 'tools'
    subprocess.run([sys.executable, '-m', 'venv', str(tools)], check=True, env=own_env())
    env = _user_env(tools)
    env['PIP_BUILD_CONSTRAINT'] = str(source / 'build-constraints.txt')
    _bash(['python -m pip install -q --upgrade pip build twine "readme-renderer[md]"',
           'python -m build --outdir dist .',
           'python -m twine check --strict dist/*'], source, env)
    built = sorted(os.listdir(source / 'dist'))
    assert [re.sub(r'\d+\.\d+\.\d+', 'V', name) for name in built] == [
        'researchutils-V-py3-none-any.whl', 'researchutils-V.tar.gz']
    with zipfile.ZipFile(source / 'dist' / built[0]) as archive:
        metadata = next(name for name in archive.namelist() if name.endswith('/METADATA'))
        text = archive.read(metadata).decode('utf-8')
    assert 'Description-Content-Type: text/markdown' in text
    with open(os.path.join(REPO, 'README.md'), encoding='utf-8') as f:
        readme = f.read()
    assert readme.strip() in text  # the README is the long description, whole
    render = ('import sys, readme_renderer.markdown as m; html = m.render(sys.stdin.read()); '
              'print(html is not None, len(html or ""))')
    with open(os.path.join(REPO, 'README.md'), 'rb') as stdin:
        rendered = subprocess.run([str(tools / 'bin' / 'python'), '-W', 'error', '-c', render],
                                  stdin=stdin, env=env, capture_output=True, text=True,
                                  timeout=120, check=True)
    ok, size = rendered.stdout.split()
    assert ok == 'True' and int(size) > len(readme) // 2
