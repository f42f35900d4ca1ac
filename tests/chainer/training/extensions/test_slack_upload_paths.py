"""SlackReport uploads only files under the trainer's out: never an absolute path or ``..``."""
import pytest

from researchutils.chainer.training.extensions import SlackReport


@pytest.mark.parametrize('path', ['/etc/passwd', '../secret.txt', 'plots/../../secret.txt',
                                  '..', ''])
def test_an_upload_path_outside_the_trainer_out_is_refused_naming_it(server, path):
    with pytest.raises(ValueError, match=r"upload.*{}".format(repr(path).replace('.', r'\.'))):
        SlackReport(server.client(), upload=['loss.png', path])


def test_relative_upload_paths_under_the_trainer_out_are_accepted(server):
    SlackReport(server.client(), upload=['loss.png', 'plots/metrics.png', 'plots/./x.png'])
