"""Unified training API: Predictor memory over 10x more samples, experiment time per epoch.

1. Peak memory (tracemalloc, which sees NumPy's buffers) of
   ``Predictor.evaluate`` over a lazily generated dataset of N and of 10 N
   examples; target ratio <= 1.1. The alternative that keeps every
   prediction (concatenate, then compute the metric) is printed beside it.
2. Seconds per epoch of ``ChainerExperiment.run`` against a hand-written
   Chainer script doing the same work on the same model and data: Trainer +
   StandardUpdater over a SerialIterator, an Evaluator on the validation set,
   a snapshot, LogReport and two PlotReports per epoch; target ratio <= 1.1.
   An epoch's time is the difference of LogReport's ``elapsed_time`` between
   epochs (start-up and the end of a run are reported apart, as context).
   Runs alternate; the median of the rounds is compared.
"""
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
from chainer.training import extensions

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from researchutils.chainer.data_loading import (  # noqa: E402
    AbstractDataset,
    DataManager,
    RandomSampler,
    SequentialSampler,
)
from researchutils.chainer.training import (  # noqa: E402
    ChainerExperiment,
    Parameters,
    Predictor,
)
from tests.support.walkthrough import (  # noqa: E402
    ArrayDataset,
    SimpleNet,
    mean_squared_error,
)

N_IN, N_HIDDEN, N_OUT = 32, 256, 10
MODEL_KWARGS = {'num_inputs': N_IN, 'num_outputs': N_OUT, 'num_hidden': N_HIDDEN}


class LazyRegression(AbstractDataset):
    """Example i is generated from i alone, so the dataset itself takes no memory."""

    def __init__(self, size):
        super().__init__()
        self.size = size
        self.weights = np.random.RandomState(0).randn(N_IN, N_OUT).astype(np.float32)

    def __getitem__(self, index):
        x = np.random.RandomState(index).uniform(-1, 1, N_IN).astype(np.float32)
        return {'data': x, 'label': x @ self.weights}

    def __len__(self):
        return self.size


class PlainMLP(chainer.Chain):
    def __init__(self):
        super().__init__()
        with self.init_scope():
            self.fc1 = L.Linear(N_IN, N_HIDDEN)
            self.fc2 = L.Linear(N_HIDDEN, N_HIDDEN)
            self.fc3 = L.Linear(N_HIDDEN, N_OUT)

    def forward(self, x, t):
        loss = F.mean_squared_error(self.fc3(F.relu(self.fc2(F.relu(self.fc1(x))))), t)
        chainer.reporter.report({'loss': loss}, self)
        return loss


def peak_bytes(function, *args):
    tracemalloc.start()
    tracemalloc.reset_peak()
    function(*args)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def keep_everything(predictor, manager):
    preds, labels = [], []
    for batch in manager:
        preds.append(predictor.predict(batch)['pred'])
        labels.append(batch['label'])
    return mean_squared_error(np.concatenate(preds), np.concatenate(labels))


def bench_predictor_memory(size=2000, batch_size=100):
    predictor = Predictor(SimpleNet(**MODEL_KWARGS), {'x': 'data'})
    results = {}
    for n in (size, 10 * size):
        manager = DataManager(LazyRegression(n), batch_size)
        ours = peak_bytes(predictor.evaluate, manager, {'MSE': mean_squared_error})
        kept = peak_bytes(keep_everything, predictor, manager)
        results[n] = (ours, kept)
    (small, small_kept), (large, large_kept) = results[size], results[10 * size]
    print('Predictor peak memory, {} vs {} samples (batch {}):'.format(
        size, 10 * size, batch_size))
    print('  predict_data_mgr/evaluate: {:.0f} KiB vs {:.0f} KiB  ratio {:.3f}  (target <= 1.1)'
          .format(small / 1024, large / 1024, large / small))
    print('  keeping all predictions:   {:.0f} KiB vs {:.0f} KiB  ratio {:.3f}'.format(
        small_kept / 1024, large_kept / 1024, large_kept / small_kept))
    return large / small


def make_data(n_train, n_val):
    random_state = np.random.RandomState(0)
    weights = random_state.randn(N_IN, N_OUT).astype(np.float32)
    x = random_state.uniform(-1, 1, (n_train + n_val, N_IN)).astype(np.float32)
    y = x @ weights
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])


def run_plain(folder, train, val, epochs, batch_size):
    model = PlainMLP()
    optimizer = chainer.optimizers.Adam(alpha=1e-3).setup(model)
    train_iter = chainer.iterators.SerialIterator(chainer.datasets.TupleDataset(*train),
                                                  batch_size)
    val_iter = chainer.iterators.SerialIterator(chainer.datasets.TupleDataset(*val),
                                                batch_size, repeat=False, shuffle=False)
    updater = chainer.training.updaters.StandardUpdater(train_iter, optimizer)
    trainer = chainer.training.Trainer(updater, (epochs, 'epoch'), out=folder)
    trainer.extend(extensions.Evaluator(val_iter, model))
    trainer.extend(extensions.snapshot(filename='snapshot_epoch_{.updater.epoch}',
                                       n_retains=2), trigger=(1, 'epoch'))
    trainer.extend(extensions.LogReport(trigger=(1, 'epoch')))
    trainer.extend(extensions.PlotReport(['main/loss'], 'epoch', file_name='loss.png'))
    trainer.extend(extensions.PlotReport(['validation/main/loss'], 'epoch',
                                         file_name='metrics.png'))
    trainer.run()


def run_ours(folder, train, val, epochs, batch_size):
    params = Parameters({'model': MODEL_KWARGS, 'training': {
        'num_epochs': epochs, 'optimizer_cls': chainer.optimizers.Adam,
        'optimizer_params': {'alpha': 1e-3}, 'losses': {'loss': F.mean_squared_error},
        'val_metrics': {'loss': mean_squared_error}}})
    train_manager = DataManager(ArrayDataset(*train), batch_size, sampler_cls=RandomSampler)
    val_manager = DataManager(ArrayDataset(*val), batch_size, sampler_cls=SequentialSampler)
    ChainerExperiment(params, SimpleNet, name='bench', save_path=folder).run(train_manager,
                                                                            val_manager)


def epoch_times(log_path):
    with open(log_path) as stream:
        elapsed = [entry['elapsed_time'] for entry in json.load(stream)]
    return [later - earlier for earlier, later in zip(elapsed, elapsed[1:])]


def bench_experiment_epoch(n_train=16000, n_val=2000, batch_size=64, epochs=4, rounds=3):
    train, val = make_data(n_train, n_val)
    per_epoch = {'plain': [], 'ours': []}
    whole = {'plain': [], 'ours': []}
    for _ in range(rounds):
        for name, function in (('plain', run_plain), ('ours', run_ours)):
            folder = tempfile.mkdtemp()
            try:
                start = time.perf_counter()
                function(folder, train, val, epochs, batch_size)
                whole[name].append(time.perf_counter() - start)
                log = os.path.join(folder, 'bench', 'log') if name == 'ours' else os.path.join(
                    folder, 'log')
                per_epoch[name].extend(epoch_times(log))
            finally:
                shutil.rmtree(folder)
    plain, ours = statistics.median(per_epoch['plain']), statistics.median(per_epoch['ours'])
    print('Experiment time per epoch, MLP {}-{}-{}-{}, {} train / {} val samples, batch {}:'
          .format(N_IN, N_HIDDEN, N_HIDDEN, N_OUT, n_train, n_val, batch_size))
    print('  hand-written Trainer script: {:.3f} s   ChainerExperiment: {:.3f} s   '
          'ratio {:.3f}  (target <= 1.1; median of {} epochs in {} alternating rounds)'.format(
              plain, ours, ours / plain, len(per_epoch['ours']), rounds))
    plain_run, ours_run = statistics.median(whole['plain']), statistics.median(whole['ours'])
    print('  whole {}-epoch run (context: start-up, final model, run state): {:.3f} s vs '
          '{:.3f} s, ratio {:.3f}'.format(epochs, plain_run, ours_run, ours_run / plain_run))
    return ours / plain


if __name__ == '__main__':
    bench_predictor_memory()
    bench_experiment_epoch()
