"""Which modules ``make mutation`` measures, and with which tests (tools/mutation.py).

The lists here are what a new module's author edits: MODULES (or a GUARDED_FOLDERS entry),
EXTRA_TESTS where a module is tested through its user, MPI_TESTS where its code for several
ranks is tested under mpiexec, SAMPLE_MODULES for the CI-sized sample. Tested by
tests/test_mutation_tool.py (every module of a guarded folder is listed).
"""
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: The modules that guard data and results (issue 33), as paths under researchutils/: one
#: file each, so that each gets its own report and score. GUARDED_FOLDERS are listed whole
#: (every module of theirs with code, or NOT_MUTATED says why not;
#: tests/test_mutation_tool.py checks that none is left out), the rest one by one.
GUARDED_FOLDERS = [
    'chainer/training/_experiment/',
    'chainer/training/_experiment/search/',
    'chainer/data_loading/',
    'chainer/serializers/',
]
#: Modules of GUARDED_FOLDERS left out, and why.
NOT_MUTATED = {
    'chainer/data_loading/sequential_sampler.py': 'mutmut 3 makes no mutant of it',
    'chainer/training/_experiment/protocol.py': 'declares a Protocol only: no code runs',
}
MODULES = [
    'chainer/training/_experiment/checks.py',
    'chainer/training/_experiment/settings.py',
    'chainer/training/_experiment/files.py',
    'chainer/training/_experiment/model.py',
    'chainer/training/_experiment/model_selection.py',
    'chainer/training/_experiment/run_state.py',
    'chainer/training/_experiment/tracking.py',
    'chainer/training/_experiment/trainer.py',
    'chainer/training/_experiment/saving.py',
    'chainer/training/_experiment/progress.py',
    'chainer/training/_experiment/search/__init__.py',
    'chainer/training/_experiment/search/folders.py',
    'chainer/training/_experiment/search/objective.py',
    'chainer/training/_experiment/search/retries.py',
    'chainer/training/_experiment/search/space.py',
    'chainer/training/_experiment/search/studies.py',
    'chainer/training/_experiment/search/summary.py',
    'chainer/training/_experiment/search/tracking.py',
    'chainer/training/_experiment/search/full_study.py',
    'chainer/training/search_space.py',
    'chainer/training/json_values.py',
    'chainer/training/_ownership.py',
    'chainer/data_loading/_batch_iterator.py',
    'chainer/data_loading/_batches.py',
    'chainer/data_loading/abstract_dataset.py',
    'chainer/data_loading/abstract_sampler.py',
    'chainer/data_loading/data_manager.py',
    'chainer/data_loading/random_sampler.py',
    'chainer/training/extensions/preemption_snapshot.py',
    'chainer/training/extensions/_signal_handlers.py',
    'chainer/training/extensions/_slurm_requeue.py',
    'chainer/serializers/npz.py',
    'chainer/serializers/_load_checks.py',
    'chainer/serializers/_safe_npz.py',
    'files.py',
    '_files.py',
    '_process_pool.py',
    # Tracking (issue 47): the names, the background writer, the shared helpers.
    'chainer/training/extensions/_tracking.py',
    'chainer/training/extensions/_mlflow_names.py',
    'chainer/training/extensions/_background.py',
    # Export and the Trainer's plug-ins the experiment leans on (issue 47).
    'chainer/onnx/exporter.py',
    'chainer/onnx/converters.py',
    'chainer/onnx/_arguments.py',
    'chainer/onnx/_proto.py',
    'chainer/training/updaters/closure_updater.py',
    'chainer/training/triggers/',
    # The way into PyTorch (issue 44): the torch twins and the weights' conversion.
    '_layer_checks.py',
    'pytorch/functions.py',
    'pytorch/initializers.py',
    'pytorch/_tensor_checks.py',
    'pytorch/nn/_arguments.py',
    'pytorch/nn/grad_clip_lstm.py',
    'pytorch/nn/conv_lstm.py',
    'pytorch/nn/action_conditioned_lstm.py',
    'pytorch/nn/deconvolution_ps.py',
    'pytorch/nn/connection.py',
    'pytorch/nn/normalization.py',
    'pytorch/nn/recurrent.py',
    'pytorch/nn/n_step_rnn.py',
    'pytorch/nn/containers.py',
    'pytorch/weights/_rules.py',
    'pytorch/weights/_sources.py',
    'pytorch/weights/loading.py',
    'pytorch/weights/conversion.py',
    'pytorch/weights/comparison.py',
    'pytorch/optim/optimizers.py',
    'pytorch/optim/hooks.py',
    'pytorch/optim/schedules.py',
    'pytorch/optim/conversion.py',
    # Any Chainer model into torch (issue 45): the tracer, the table, the written source.
    'pytorch/tracing/',
]

_SEARCH_TESTS = ['tests/chainer/training/test_search.py',
                 'tests/chainer/training/test_search_retries.py']
_WEIGHTS_TESTS = ['tests/pytorch/weights/']
_ONNX_TESTS = ['tests/chainer/onnx/']
#: Tests beyond the mirrored ones, where a module's behaviour is tested through its user.
EXTRA_TESTS = {
    'chainer/training/_experiment/': ['tests/chainer/training/test_experiment.py'],
    'chainer/training/_experiment/search/': _SEARCH_TESTS,
    # Each of the search's modules is measured with its own tests alone (its mirror; for
    # __init__.py, whose mirror would be test_init__.py, named here): the search's tests run
    # whole searches, often in other processes, whose runs mutmut does not credit, minutes
    # a mutant.
    'chainer/training/_experiment/search/__init__.py': [
        'tests/chainer/training/_experiment/search/test_init.py'],
    'chainer/training/search_space.py': ['tests/chainer/training/_experiment/search/test_space.py',
                                         'tests/chainer/training/test_parameters.py'],
    'chainer/training/json_values.py': ['tests/chainer/training/test_parameters.py',
                                        'tests/chainer/training/test_search_space.py'],
    'chainer/training/extensions/_signal_handlers.py': [
        'tests/chainer/training/extensions/test_preemption_snapshot_handlers.py'],
    'chainer/training/extensions/preemption_snapshot.py': [
        'tests/chainer/training/extensions/test_preemption_snapshot_handlers.py',
        'tests/chainer/training/extensions/test_signal_handlers.py'],
    'chainer/serializers/': ['tests/chainer/training/test_experiment_preemption.py'],
    'chainer/data_loading/_batch_iterator.py': ['tests/chainer/data_loading/test_data_manager.py'],
    'chainer/data_loading/abstract_sampler.py': [
        'tests/chainer/data_loading/test_random_sampler.py',
        'tests/chainer/data_loading/test_sequential_sampler.py'],
    'chainer/data_loading/_batches.py': ['tests/chainer/data_loading/test_data_manager.py'],
    '_files.py': ['tests/test_files.py', 'tests/chainer/serializers/test_npz.py'],
    '_process_pool.py': ['tests/test_lazy_pool.py', 'tests/test_process_worker.py',
                         'tests/test_chunks.py'],
    # The export's modules are tested through export() (their mirrors do not exist).
    'chainer/onnx/exporter.py': _ONNX_TESTS,
    'chainer/onnx/converters.py': _ONNX_TESTS,
    'chainer/onnx/_arguments.py': _ONNX_TESTS,
    'chainer/onnx/_proto.py': _ONNX_TESTS,
    # The checks the Chainer links and their torch twins share, tested through both.
    '_layer_checks.py': ['tests/chainer/links/test_arguments.py',
                         'tests/chainer/test_clip_bounds.py',
                         'tests/chainer/links/connection/test_deconvolution_ps.py',
                         'tests/pytorch/nn/'],
    'pytorch/_tensor_checks.py': ['tests/pytorch/'],
    'pytorch/nn/_arguments.py': ['tests/pytorch/nn/'],
    # The twins of Chainer's own links are tested through their conversion from Chainer.
    'pytorch/nn/connection.py': _WEIGHTS_TESTS,
    'pytorch/nn/normalization.py': _WEIGHTS_TESTS,
    'pytorch/nn/recurrent.py': _WEIGHTS_TESTS,
    'pytorch/nn/n_step_rnn.py': _WEIGHTS_TESTS,
    'pytorch/nn/containers.py': _WEIGHTS_TESTS,
    'pytorch/weights/_rules.py': _WEIGHTS_TESTS,
    'pytorch/weights/_sources.py': ['tests/pytorch/weights/test_loading.py'],
}

#: Tests run only under ``mpiexec`` (ChainerMN): mutmut runs pytest in one process, where
#: they skip, so a module's code for several ranks survives it. ``--under-mpi`` runs each
#: survivor of such a module again with these tests under ``mpiexec -n 2``
#: (:func:`rerun_under_mpi`) and counts those they catch.
MPI_TESTS = {
    'chainer/training/_experiment/trainer.py': [
        'tests/chainer/training/test_experiment_mpi.py',
        'tests/chainer/training/test_experiment_preemption_mpi.py'],
    'chainer/training/_experiment/search/objective.py': [
        'tests/chainer/training/test_search_mpi.py'],
    'chainer/training/_experiment/search/__init__.py': [
        'tests/chainer/training/test_search_mpi.py'],
    'chainer/training/extensions/preemption_snapshot.py': [
        'tests/chainer/training/extensions/test_preemption_snapshot_mpi.py'],
}

#: ``make mutation-sample``, the CI-sized check ``make test`` runs: a fixed tenth of the
#: mutants (SAMPLE_PATTERN: those whose number ends in 0) of modules whose tests take
#: seconds, so a drop in the suite's strength shows in every run, in about two minutes.
SAMPLE_MODULES = [
    'chainer/training/json_values.py',
    'chainer/training/search_space.py',
]
SAMPLE_PATTERN = '*__mutmut_*0'


def mirrored_tests(module):
    """The test files and folders of ``module`` (a path under researchutils/): its mirror
    under tests/ when there is one, and those of EXTRA_TESTS."""
    if module.endswith('/'):
        mirror = [os.path.join('tests', module)]
    else:
        folder, name = os.path.split(module)
        mirror = [os.path.join('tests', folder, 'test_' + name.lstrip('_'))]
        mirror.append(os.path.join('tests', folder, 'test_' + name))
    found = [path for path in mirror + EXTRA_TESTS.get(module, [])
             if os.path.exists(os.path.join(REPO, path))]
    return sorted(set(found))


def slug(module):
    return module.strip('/').replace('/', '.').replace('.py', '') or 'researchutils'
