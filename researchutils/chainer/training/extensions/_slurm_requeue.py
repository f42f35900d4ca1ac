"""Put this SLURM job back in the queue: ``scontrol requeue $SLURM_JOB_ID`` (private).

Used by PreemptionSnapshot(requeue=True) once the snapshot is written. Nothing here may
stop the run from exiting with its snapshot: every failure (not a SLURM job, no
``scontrol``, a refusal, no answer within the timeout) is a RuntimeWarning that says the
job was not requeued.

Tests: tests/chainer/training/extensions/test_preemption_snapshot.py (a stand-in
``scontrol``) and test_preemption_snapshot_slurm.py (a real single-node SLURM).
"""
import os
import subprocess
import warnings


def requeue_slurm_job(timeout: float) -> bool:
    """Runs ``scontrol requeue $SLURM_JOB_ID``, waiting at most ``timeout`` seconds.

    Returns:
        bool: Whether SLURM accepted the request (otherwise a RuntimeWarning says why).
    """
    job = os.environ.get('SLURM_JOB_ID')
    if not job:
        warnings.warn('PreemptionSnapshot(requeue=True): SLURM_JOB_ID is not set, so this is '
                      'not a SLURM job; nothing was requeued', RuntimeWarning, stacklevel=2)
        return False
    command = ['scontrol', 'requeue', job]
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as error:
        warnings.warn('PreemptionSnapshot: {!r} failed: {}; the job was not requeued'.format(
            ' '.join(command), error), RuntimeWarning, stacklevel=2)
        return False
    if done.returncode != 0:
        warnings.warn('PreemptionSnapshot: {!r} exited with status {}: {}; the job was not '
                      'requeued'.format(' '.join(command), done.returncode,
                                        (done.stderr or done.stdout).strip()),
                      RuntimeWarning, stacklevel=2)
        return False
    return True
