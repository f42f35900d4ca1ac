"""The Experiment protocol declares exactly the settings of the table, as ChainerExperiment
keeps them."""
import typing

from researchutils.chainer.training._experiment import protocol, settings
from researchutils.chainer.training.experiment import ChainerExperiment


def _declared(cls):
    return list(typing.get_type_hints(cls))


def test_the_protocol_declares_every_setting_in_the_table_order():
    assert _declared(protocol.Experiment) == [setting.name for setting in settings.SETTINGS]


def test_chainer_experiment_is_the_protocol_with_its_trainer_and_devices():
    assert protocol.Experiment in ChainerExperiment.__mro__
    assert _declared(ChainerExperiment) == (_declared(protocol.Experiment)
                                            + ['trainer', 'devices'])


def test_the_protocol_asks_for_the_folder_and_the_run():
    for name in ('output_dir', 'run', 'test'):
        assert name in vars(protocol.Experiment), name
