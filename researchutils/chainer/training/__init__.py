"""The unified training and prediction API: Parameters, Predictor, ChainerExperiment."""
from researchutils.chainer.training.experiment import ChainerExperiment
from researchutils.chainer.training.parameters import Parameters
from researchutils.chainer.training.predictor import Predictor
from researchutils.chainer.training.train_utils import create_optims_default_chainer

__all__ = ['ChainerExperiment', 'Parameters', 'Predictor', 'create_optims_default_chainer']
