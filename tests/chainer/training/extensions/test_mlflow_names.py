"""Names as MLflow takes them (_mlflow_names.mlflow_name); the reference is MLflow's own
check of a name, where mlflow is installed, and the expected names written out."""
import posixpath

import pytest

from researchutils.chainer.training.extensions._mlflow_names import MAX_NAME, mlflow_name


@pytest.mark.parametrize('name, expected', [
    ('main/loss', 'main/loss'),
    ('val/acc-1.5 top_k', 'val/acc-1.5 top_k'),  # every character MLflow allows
    ('val/acc@1', 'val/acc_1'),
    ('a:b,c(d)', 'a_b_c_d_'),
    ('/a//b/', 'a/b'),
    ('a/./b', 'a/b'),
    ('a/../b', 'a/__/b'),
    ('/', '_'),
    ('', '_'),
])
def test_a_name_becomes_one_mlflow_takes(name, expected):
    assert mlflow_name(name) == expected


def test_a_long_name_is_cut_to_250_characters():
    assert MAX_NAME == 250
    assert mlflow_name('y' * 260) == 'y' * 250
    assert mlflow_name('X' * 260) == 'X' * 250  # only a '/' goes from the end of a cut
    assert mlflow_name('y' * 249 + '/z') == 'y' * 249  # the '/' the cut leaves last goes


def test_a_cut_that_leaves_a_path_mlflow_would_change_has_no_slash_left():
    name = mlflow_name('y' * 248 + '/.z')  # cut to 'yyy.../.', which a path normalizes
    assert name == 'y' * 248 + '_.'
    assert posixpath.normpath(name) == name


def test_mlflow_accepts_every_name_made():
    validation = pytest.importorskip('mlflow.utils.validation')
    for name in ('val/acc@1', '/a//b/', 'a/../b', 'y' * 260, 'y' * 248 + '/.z', ''):
        validation._validate_metric_name(mlflow_name(name))
