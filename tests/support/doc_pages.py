"""The order of the tutorials, as a user needs them, and where the front page and the README
list them.

Every tutorial has a place in :data:`TUTORIAL_ORDER` (``tests/test_docs.py`` checks it): a
new one is added where a reader needs it, and docs/index.rst and README.md list it there.
A name listed before its page exists is one that another branch is writing; the front page
has a comment where it goes.
"""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(ROOT, 'docs')
TUTORIALS = os.path.join(DOCS, 'tutorials')

TUTORIAL_ORDER = [
    # The main example: the pieces working together.
    'video_prediction',
    # The pieces a Chainer script imports, one capability each.
    'lstm_and_loss', 'links', 'decorable_iterators', 'serializers', 'slack_report',
    'tracking',
    # The experiment API and its search.
    'experiment', 'search',
    # Many devices and machines.
    'data_parallel', 'chainermn', 'cluster',
    # Leaving Chainer: a trained model exported, or its run continued in PyTorch.
    'onnx', 'pytorch',
    # The original researchutils' helpers, last.
    'arrays', 'files', 'image', 'math', 'task',
]


def tutorials_on_disk():
    """The names of the pages in docs/tutorials (without ``.rst``), sorted."""
    return sorted(name[:-4] for name in os.listdir(TUTORIALS) if name.endswith('.rst'))


def tutorials_in_order():
    """The tutorials that exist, in :data:`TUTORIAL_ORDER`."""
    present = set(tutorials_on_disk())
    return [name for name in TUTORIAL_ORDER if name in present]


def front_page_tutorials():
    """The tutorials docs/index.rst's toctrees list, in the order they list them."""
    with open(os.path.join(DOCS, 'index.rst'), encoding='utf-8') as f:
        text = f.read()
    return re.findall(r'^   tutorials/(\S+)$', text, flags=re.M)
