"""The order of validation scores shared by BestModelSaver and grid_search."""
import pytest

from researchutils.chainer.training import _scores


@pytest.mark.parametrize('mode, new, old, better', [
    ('lowest', 1.0, 2.0, True), ('lowest', 2.0, 1.0, False), ('lowest', 1.0, 1.0, False),
    ('highest', 2.0, 1.0, True), ('highest', 1.0, 2.0, False), ('highest', 1.0, 1.0, False),
])
def test_improves_only_when_strictly_better_in_the_mode(mode, new, old, better):
    assert _scores.improves(mode, new, old) is better


def test_a_mode_other_than_lowest_or_highest_is_refused_naming_the_argument():
    with pytest.raises(ValueError, match="val_score_mode.*'max'"):
        _scores.check_val_score_mode('max')
