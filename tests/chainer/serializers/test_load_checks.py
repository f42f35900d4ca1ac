"""The messages of a load that does not fit: what the file holds, and how to load it.

The checks themselves (shapes, dtypes, nothing written before all pass) are tested through
the public functions in test_npz.py; these are the hints of
researchutils/chainer/serializers/_load_checks.py.
"""
import chainer
import chainer.links as L
import pytest

from researchutils.chainer import serializers


def _saved(tmp_path, model, name='model.npz'):
    path = str(tmp_path / name)
    chainer.serializers.save_npz(path, model)
    return path


def _chain(**links):
    chain = chainer.Chain()
    with chain.init_scope():
        for name, link in links.items():
            setattr(chain, name, link)
    return chain


def test_a_file_lacking_the_models_names_lists_the_names_it_holds(tmp_path):
    path = _saved(tmp_path, _chain(encoder=L.Linear(2, 3)))
    with pytest.raises(KeyError) as raised:
        serializers.load_model(path, _chain(decoder=L.Linear(2, 3)))
    message = raised.value.args[0]
    assert "no array 'decoder/W', 'decoder/b' needed by the model" in message
    assert "it holds 'encoder/W', 'encoder/b'" in message


def test_a_classifiers_file_says_its_prefix_and_how_to_load_the_predictor(tmp_path):
    path = _saved(tmp_path, L.Classifier(L.Linear(2, 3)))
    with pytest.raises(KeyError) as raised:
        serializers.load_model(path, L.Linear(2, 3))
    message = raised.value.args[0]
    assert "it holds 'predictor/W', 'predictor/b'" in message
    assert "under 'predictor/'" in message
    assert "key='predictor/'" in message
    model = serializers.load_model_from_snapshot(path, L.Linear(2, 3), key='predictor/')
    assert model.W.shape == (3, 2)


def test_a_predictors_file_into_a_classifier_says_to_load_into_the_predictor(tmp_path):
    path = _saved(tmp_path, L.Linear(2, 3))
    with pytest.raises(KeyError) as raised:
        serializers.load_model(path, L.Classifier(L.Linear(2, 3)))
    message = raised.value.args[0]
    assert "it holds 'W', 'b'" in message
    assert 'model.predictor' in message
    model = L.Classifier(L.Linear(2, 3))
    serializers.load_model(path, model.predictor)


def test_the_names_listed_are_the_first_eight(tmp_path):
    path = _saved(tmp_path, _chain(**{'l{}'.format(index): L.Linear(1, 1)
                                      for index in range(10)}))
    with pytest.raises(KeyError) as raised:
        serializers.load_model(path, L.Linear(1, 1))
    message = raised.value.args[0]
    assert "'l0/W', 'l0/b', 'l1/W'" in message
    assert 'and 12 more' in message
