"""The parameter trees' helpers shared by Parameters and k-fold's params merging."""
from researchutils.chainer.training import _trees


def test_merge_sets_every_leaf_of_the_update_over_a_copy_of_the_base():
    base = {'training': {'optimizer_params': {'alpha': 1, 'beta1': 0.9}, 'num_epochs': 3}}
    merged = _trees.merge(base, {'training': {'optimizer_params': {'alpha': 2}},
                                 'model': {'n': 4}})
    assert merged == {'training': {'optimizer_params': {'alpha': 2, 'beta1': 0.9},
                                   'num_epochs': 3},
                      'model': {'n': 4}}
    assert base['training']['optimizer_params']['alpha'] == 1


def test_copy_tree_copies_dicts_and_lists_but_shares_the_leaves():
    leaf = object()
    tree = {'a': [{'b': leaf}]}
    copied = _trees.copy_tree(tree)
    copied['a'][0]['b'] = 1
    assert tree['a'][0]['b'] is leaf
    assert _trees.copy_tree(tree)['a'][0]['b'] is leaf


def test_walk_gives_inner_dicts_and_leaves_gives_only_the_values():
    tree = {'a': {'b': 1}, 'c': 2}
    assert list(_trees.walk(tree, ())) == [(('a',), {'b': 1}), (('a', 'b'), 1), (('c',), 2)]
    assert list(_trees.leaves(tree)) == [(('a', 'b'), 1), (('c',), 2)]
