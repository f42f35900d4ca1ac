"""``scontrol requeue $SLURM_JOB_ID`` (extensions/_slurm_requeue.py), with a stand-in
``scontrol`` on PATH: every failure is a RuntimeWarning saying the job was not requeued."""
import os
import shutil
import warnings

import pytest

from researchutils.chainer.training.extensions._slurm_requeue import requeue_slurm_job

# Found before the tests narrow PATH to the stand-in's folder.
SLEEP, CAT = shutil.which('sleep'), shutil.which('cat')


@pytest.fixture
def scontrol(tmp_path, monkeypatch):
    """Makes a stand-in ``scontrol`` that records its arguments and runs ``body``; returns
    the file of its calls."""
    folder = tmp_path / 'bin'
    folder.mkdir()
    calls = tmp_path / 'calls'
    monkeypatch.setenv('PATH', str(folder))
    monkeypatch.setenv('SLURM_JOB_ID', '4242')

    def make(body):
        script = folder / 'scontrol'
        script.write_text('#!/bin/sh\necho "$@" >> "{}"\n{}\n'.format(calls, body))
        script.chmod(0o755)
        return calls
    return make


def _quietly(timeout=30):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        accepted = requeue_slurm_job(timeout)
    # Each warning points at the code that asked for the requeue (PreemptionSnapshot's
    # line; here, this file, or what a mutation tester puts between), never at the helper.
    assert not any(os.path.basename(w.filename) == '_slurm_requeue.py' for w in caught)
    return accepted, [str(w.message) for w in caught if w.category is RuntimeWarning]


def test_an_accepted_requeue_asks_once_for_this_job_and_warns_nothing(scontrol):
    calls = scontrol('exit 0')
    assert _quietly() == (True, [])
    assert calls.read_text() == 'requeue 4242\n'


def test_a_refusal_warns_with_the_command_its_status_and_what_it_said(scontrol):
    calls = scontrol('echo "Requested operation is presently disabled" >&2\nexit 1')
    accepted, messages = _quietly()
    assert accepted is False and calls.read_text() == 'requeue 4242\n'
    message, = messages
    # The command, its status and its words, and the consequence: not the exact wording.
    # scontrol's words are quoted as the text they are.
    for part in ("'scontrol requeue 4242'", 'status 1: Requested operation is presently '
                 'disabled;', 'not requeued'):
        assert part in message


def test_a_refusal_that_says_nothing_on_stderr_shows_its_stdout(scontrol):
    scontrol('echo "no such job"\nexit 3')
    accepted, messages = _quietly()
    assert accepted is False
    assert 'status 3' in messages[0] and 'no such job' in messages[0]


def test_an_scontrol_that_does_not_answer_in_time_warns_and_returns(scontrol):
    scontrol('exec {} 60'.format(SLEEP))
    accepted, messages = _quietly(timeout=0.5)
    assert accepted is False
    message, = messages
    for part in ("'scontrol requeue 4242' failed", 'timed out after 0.5 seconds',
                 'not requeued'):
        assert part in message


def test_no_scontrol_on_path_warns_and_returns(tmp_path, monkeypatch):
    monkeypatch.setenv('PATH', str(tmp_path))
    monkeypatch.setenv('SLURM_JOB_ID', '4242')
    accepted, messages = _quietly()
    assert accepted is False
    assert "'scontrol requeue 4242' failed" in messages[0] and 'not requeued' in messages[0]


@pytest.mark.parametrize('job', [None, ''])
def test_outside_a_slurm_job_nothing_is_run(scontrol, monkeypatch, job):
    calls = scontrol('exit 0')
    if job is None:
        monkeypatch.delenv('SLURM_JOB_ID')
    else:
        monkeypatch.setenv('SLURM_JOB_ID', job)
    accepted, messages = _quietly()
    assert accepted is False and not calls.exists()
    message, = messages
    assert 'SLURM_JOB_ID is not set' in message and 'nothing was requeued' in message


def test_scontrol_never_waits_for_input_from_the_trainings_stdin(scontrol):
    # A stand-in that reads its input to the end: with the training's stdin (here a pipe
    # that stays open) it would wait until the timeout.
    calls = scontrol('{} > /dev/null\nexit 0'.format(CAT))
    read_end, write_end = os.pipe()
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        assert _quietly(timeout=20) == (True, [])
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
    assert calls.read_text() == 'requeue 4242\n'
