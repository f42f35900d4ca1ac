"""Where each test file runs: on every stack, or once, on the newest (a system test).

``make test`` runs the suite on three stacks (Python 3.11 + NumPy 1.26, 3.12 + NumPy 2.0,
3.13 + the newest NumPy). A test whose subject can differ between them runs on each: NumPy's
and Chainer's behaviour, the compatibility package, file formats, numerics, Python's import
and process machinery. An end-to-end test of process orchestration (SLURM, PostgreSQL across
hosts, searches and experiments stopped and resumed, folders shared between processes, the
demo's runs) tests the same thing on every stack: it runs once, on the newest stack chosen.

Every test file is in exactly one of the two tables below, under the reason for its side
(tests/test_stacks.py holds this, and that docs/testing.rst lists the system tests).
``tests/conftest.py`` marks each test of a SYSTEM file ``system``; a single test of an
EVERY_STACK file may carry ``@pytest.mark.system`` itself. A new test file goes into one
table with its reason.
"""
import os

#: Run once, on the newest stack: reason -> test files (paths from the checkout's root).
SYSTEM = {
    'SLURM: a real single-node cluster, jobs requeued, time limits': [
        'tests/chainer/training/extensions/test_preemption_snapshot_slurm.py',
        'tests/chainer/training/test_search_slurm.py',
    ],
    'a study on PostgreSQL shared by processes on several hosts': [
        'tests/chainer/training/test_search_postgres.py',
        'tests/support/test_netns_hosts.py',
        'tests/support/test_postgres_server.py',
        'tests/support/test_search_nodes.py',
    ],
    'searches whose processes are killed and resumed, or share one study': [
        'tests/chainer/training/_experiment/search/test_full_study.py',
        'tests/chainer/training/test_search_resume.py',
        'tests/chainer/training/test_search_retries.py',
        'tests/chainer/training/test_search_tracking.py',
    ],
    'experiments preempted by signals at awkward moments, in other processes': [
        'tests/chainer/training/extensions/test_preemption_snapshot_group.py',
        'tests/chainer/training/test_experiment_preemption.py',
        'tests/chainer/training/test_experiment_preemption_mpi.py',
    ],
    'a search whose ranks agree under mpiexec': [
        'tests/chainer/training/test_search_mpi.py',
    ],
    'a folder claimed by one process and refused to another': [
        'tests/chainer/training/test_experiment_ownership.py',
    ],
    "the demo's tiny runs, whole scripts in interpreters of their own": [
        'tests/examples/test_video_prediction.py',
    ],
    "the suite's own machinery: what a run leaves, records and times": [
        'tests/support/test_leftovers.py',
        'tests/support/test_run_record.py',
        'tests/test_stacks.py',
    ],
    "researchutils' wheel and sdist built, installed into a fresh venv as the docs say (one "
    "extra at a time for the tracking tutorial), and a user's mypy run on it": [
        'tests/test_install.py',
        'tests/test_tracking_extras.py',
        'tests/test_typing.py',
    ],
    "a real MLflow server's start and stop (the fixture the tracking tests share)": [
        'tests/support/test_mlflow_server.py',
    ],
}

#: Run on every stack: reason -> test files.
EVERY_STACK = {
    'numerics: forward and every gradient against NumPy references': [
        'tests/chainer/functions/activation/test_grad_clip_lstm.py',
        'tests/chainer/functions/loss/test_average_k_step_squared_error.py',
        'tests/chainer/initializers/test_normal_with_loc.py',
        'tests/chainer/links/connection/test_action_conditioned_lstm.py',
        'tests/chainer/links/connection/test_conv_lstm.py',
        'tests/chainer/links/connection/test_deconvolution_ps.py',
        'tests/chainer/links/connection/test_grad_clip_lstm.py',
        'tests/chainer/links/test_arguments.py',
        'tests/chainer/test_clip_bounds.py',
        'tests/math/test_angle.py',
        'tests/math/test_normalization.py',
        'tests/test_arrays.py',
        'tests/image/test_converter.py',
        'tests/image/test_preprocess.py',
        'tests/support/test_clip_gradient.py',
    ],
    "NumPy's and Chainer's behaviour: iterators, data, models, the Trainer's plug-ins": [
        'tests/chainer/data_loading/test_abstract_dataset.py',
        'tests/chainer/data_loading/test_data_manager.py',
        'tests/chainer/data_loading/test_data_manager_seed.py',
        'tests/chainer/data_loading/test_random_sampler.py',
        'tests/chainer/data_loading/test_sequential_sampler.py',
        'tests/chainer/iterators/test_decorable_iterator.py',
        'tests/chainer/iterators/test_decorable_multiprocess_iterator.py',
        'tests/chainer/iterators/test_decorable_multithread_iterator.py',
        'tests/chainer/iterators/test_decorable_serial_iterator.py',
        'tests/chainer/iterators/test_unmodifiable_decorable_list.py',
        'tests/chainer/models/test_abstract_network.py',
        'tests/chainer/models/test_data_parallel.py',
        'tests/chainer/models/test_data_parallel_optimizer.py',
        'tests/chainer/models/test_multi_node.py',
        'tests/chainer/models/test_scatter_gather.py',
        'tests/chainer/training/extensions/test_best_model_saver.py',
        'tests/chainer/training/extensions/test_chainer_pruning_extension.py',
        'tests/chainer/training/extensions/test_predictor_evaluator.py',
        'tests/chainer/training/extensions/test_stop_on_non_number.py',
        'tests/chainer/training/triggers/test_resumable_early_stopping_trigger.py',
        'tests/chainer/training/updaters/test_closure_updater.py',
        'tests/chainer/training/test_predictor.py',
        'tests/chainer/training/test_ranks.py',
        'tests/chainer/training/test_scores.py',
        'tests/chainer/training/test_trees.py',
        'tests/test_numpy_random.py',
        'tests/examples/test_bouncing_balls.py',
        'tests/examples/test_pushed_examples.py',
        'tests/image/test_viewer.py',
        'tests/task/test_plotter.py',
    ],
    "the experiment API on Chainer's Trainer: runs, resumes and searches in this process": [
        'tests/chainer/training/_experiment/search/test_folders.py',
        'tests/chainer/training/_experiment/search/test_init.py',
        'tests/chainer/training/_experiment/search/test_objective.py',
        'tests/chainer/training/_experiment/search/test_retries.py',
        'tests/chainer/training/_experiment/search/test_space.py',
        'tests/chainer/training/_experiment/search/test_studies.py',
        'tests/chainer/training/_experiment/search/test_summary.py',
        'tests/chainer/training/_experiment/search/test_tracking.py',
        'tests/chainer/training/_experiment/test_checks.py',
        'tests/chainer/training/_experiment/test_files.py',
        'tests/chainer/training/_experiment/test_model.py',
        'tests/chainer/training/_experiment/test_model_selection.py',
        'tests/chainer/training/_experiment/test_progress.py',
        'tests/chainer/training/_experiment/test_protocol.py',
        'tests/chainer/training/_experiment/test_saving.py',
        'tests/chainer/training/_experiment/test_run_state.py',
        'tests/chainer/training/_experiment/test_settings.py',
        'tests/chainer/training/_experiment/test_tracking.py',
        'tests/chainer/training/_experiment/test_trainer.py',
        'tests/chainer/training/test_experiment.py',
        'tests/chainer/training/test_search.py',
        'tests/chainer/training/test_search_space.py',
        'tests/chainer/training/test_parameters.py',
        'tests/chainer/training/test_walkthrough.py',
    ],
    'file formats: npz, JSON values and references, snapshots, atomic files': [
        'tests/chainer/serializers/test_npz.py',
        'tests/chainer/serializers/test_safe_npz.py',
        'tests/chainer/serializers/test_load_checks.py',
        'tests/chainer/training/test_json_values.py',
        'tests/chainer/training/test_references.py',
        'tests/chainer/training/test_train_utils.py',
        'tests/chainer/training/test_ownership.py',
        'tests/test_files.py',
        'tests/test_storage_drivers.py',
    ],
    "signals and Python's process machinery (handlers, start methods, pipes)": [
        'tests/chainer/training/extensions/test_preemption_snapshot.py',
        'tests/chainer/training/extensions/test_preemption_snapshot_handlers.py',
        'tests/chainer/training/extensions/test_preemption_snapshot_reuse.py',
        'tests/chainer/training/extensions/test_signal_handlers.py',
        'tests/chainer/training/extensions/test_slurm_requeue.py',
        'tests/test_process_pipe.py',
        'tests/test_process_pool.py',
        'tests/test_process_worker.py',
        'tests/test_lazy_pool.py',
        'tests/test_chunks.py',
        'tests/support/test_start_methods.py',
    ],
    'reporters: Slack, TensorBoard and MLflow clients of each stack': [
        'tests/chainer/training/extensions/test_background.py',
        'tests/chainer/training/extensions/test_mlflow_report.py',
        'tests/chainer/training/extensions/test_mlflow_report_faults.py',
        'tests/chainer/training/extensions/test_mlflow_names.py',
        'tests/chainer/training/extensions/test_mlflow_sender.py',
        'tests/chainer/training/extensions/test_mlflow_unsent.py',
        'tests/chainer/training/extensions/test_slack_messages.py',
        'tests/chainer/training/extensions/test_slack_poster.py',
        'tests/chainer/training/extensions/test_slack_queue.py',
        'tests/chainer/training/extensions/test_slack_report.py',
        'tests/chainer/training/extensions/test_tensorboard_report.py',
        'tests/chainer/training/extensions/test_tracking.py',
        'tests/support/test_slack_server.py',
        'tests/support/test_recording_backend.py',
    ],
    "ChainerMN over MPI: mpi4py and Chainer's communicators of each stack": [
        'tests/chainer/training/test_experiment_mpi.py',
        'tests/chainer/training/extensions/test_preemption_snapshot_mpi.py',
    ],
    "the PyTorch side against Chainer's own results, on each stack that has torch (make test "
    "installs it on the newest)": [
        'tests/pytorch/nn/test_action_conditioned_lstm.py',
        'tests/pytorch/nn/test_conv_lstm.py',
        'tests/pytorch/nn/test_deconvolution_ps.py',
        'tests/pytorch/nn/test_grad_clip_lstm.py',
        'tests/pytorch/test_functions.py',
        'tests/pytorch/test_initializers.py',
        'tests/pytorch/optim/test_conversion.py',
        'tests/pytorch/optim/test_hooks.py',
        'tests/pytorch/optim/test_optimizers.py',
        'tests/pytorch/optim/test_schedules.py',
        'tests/examples/test_continue_video_prediction.py',
        'tests/pytorch/tracing/test_convert.py',
        'tests/pytorch/tracing/test_functions.py',
        'tests/pytorch/tracing/test_models.py',
        'tests/pytorch/tracing/test_toolkit.py',
        'tests/pytorch/tracing/test_write_source.py',
        'tests/pytorch/weights/test_comparison.py',
        'tests/pytorch/weights/test_conversion.py',
        'tests/pytorch/weights/test_loading.py',
        'tests/pytorch/weights/test_recurrent.py',
        'tests/support/test_torch_twins.py',
    ],
    'export: onnx and onnxruntime of each stack': [
        'tests/chainer/onnx/test_arguments.py',
        'tests/chainer/onnx/test_export.py',
        'tests/chainer/onnx/test_export_refusals.py',
        'tests/chainer/onnx/test_proto.py',
    ],
    'the compatibility package, CuPy names and kernels: what each stack lacks differs': [
        'tests/test_chainer_compat.py',
        'tests/test_chainer_compat_patches.py',
        'tests/test_chainer_compat_pkg_resources.py',
        'tests/test_cupy_names.py',
        'tests/test_gpu_compile.py',
        'tests/support/test_cupy_names.py',
        'tests/support/test_cuda_kernels.py',
        'tests/test_bench_devices.py',
    ],
    "imports, the public API and argument checks: Python's import system and typing": [
        'tests/test_checks.py',
        'tests/test_original_contract.py',
        'tests/test_every_argument_checked.py',
        'tests/test_import_paths.py',
        'tests/test_imports.py',
        'tests/test_lazy.py',
        'tests/test_module_api.py',
        'tests/test_public_api.py',
        'tests/support/test_api_reference.py',
        'tests/support/test_import_probe.py',
    ],
    "the documentation's and README's examples, run as written on each stack": [
        'tests/test_doc_examples.py',
        'tests/test_docs.py',
        'tests/test_readme.py',
        'tests/test_changelog.py',
        'tests/test_maintaining.py',
    ],
    "the suite's and tools' own checks, which run the stack's interpreter": [
        'tests/test_conftest.py',
        'tests/test_mutation_tool.py',
        'tests/test_gpu_check.py',
    ],
}


def _by_file(table):
    return {path: reason for reason, paths in table.items() for path in paths}


SYSTEM_FILES = _by_file(SYSTEM)
EVERY_STACK_FILES = _by_file(EVERY_STACK)
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def is_system_file(path):
    """Whether the test file at ``path`` (absolute, or from the checkout's root) is a
    system test's."""
    return os.path.relpath(os.path.abspath(path), _REPO) in SYSTEM_FILES


def system_list_rst():
    """docs/testing.rst's list of the system test files under their reasons."""
    lines = []
    for reason, paths in SYSTEM.items():
        lines += ['* {}:'.format(reason), '']
        lines += ['  - ``{}``'.format(path) for path in paths]
        lines.append('')
    return '\n'.join(lines).rstrip() + '\n'


if __name__ == '__main__':
    print(system_list_rst(), end='')
