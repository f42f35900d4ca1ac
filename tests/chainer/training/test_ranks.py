"""is_rank_zero: the one rule for which ChainerMN process writes, posts and asks."""
import collections

import pytest

from researchutils.chainer.training._ranks import is_rank_zero

Communicator = collections.namedtuple('Communicator', 'rank size')


def test_without_chainermn_the_one_process_is_rank_zero():
    assert is_rank_zero(None) is True


@pytest.mark.parametrize('rank, expected', [(0, True), (1, False), (3, False)])
def test_only_rank_zero_of_a_communicator_is(rank, expected):
    assert is_rank_zero(Communicator(rank, 4)) is expected


def test_slack_report_and_the_experiment_ask_the_same_rule():
    from researchutils.chainer.training import experiment
    from researchutils.chainer.training._experiment import model_selection, trainer
    from researchutils.chainer.training.extensions import slack_report
    for module in (slack_report, experiment, trainer, model_selection):
        assert module.is_rank_zero is is_rank_zero, module.__name__
