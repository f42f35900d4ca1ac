"""``ChainerExperiment.save()``: ``experiment.json`` is the record of the run in its folder.

Once a run has started in the folder (a snapshot, a model file or ``run_state.json`` is
there), its ``experiment.json`` says what that run is, and ``ChainerExperiment.load`` takes
the run up from it: a save of other settings would make the folder describe a model its
weights do not fit. So a save writes only what the file already says, or into a folder
where no run has started; otherwise it is refused before anything is written, naming each
setting that differs and the way out. A save also holds the folder as a run does
(``_ownership.hold``): it never writes while another process's run owns it. Tests:
``tests/chainer/training/_experiment/test_saving.py``.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator

from researchutils.chainer.training import _ownership, json_values, train_utils
from researchutils.chainer.training._experiment import files, settings
from researchutils.chainer.training._experiment.protocol import Experiment
from researchutils.chainer.training._ranks import is_rank_zero

# At most this many differing settings are listed; a count says how many more there are.
_LISTED = 10


def started_run(folder: str) -> str | None:
    """The file that shows a run has started in ``folder`` (its ``run_state.json``, its
    newest snapshot or a model file, the first there), or None when no run has started
    there."""
    candidates = [os.path.join(folder, files.STATE_FILE), files.latest_snapshot(folder)] + [
        os.path.join(folder, name) for name in (files.FINAL_MODEL, files.BEST_MODEL)]
    return next((path for path in candidates
                 if path is not None and os.path.lexists(path)), None)


def differences(saved: json_values.JSONData, new: json_values.JSONData,
                where: str = '') -> Iterator[str]:
    """``"<key path>: <saved> -> <new>"`` for each value that differs between two JSON
    documents, in ``saved``'s key order, then the keys only ``new`` has."""
    if isinstance(saved, dict) and isinstance(new, dict):
        for key in list(saved) + [key for key in new if key not in saved]:
            path = '{}/{}'.format(where, key) if where else str(key)
            if key not in new:
                yield '{}: {} -> (not set)'.format(path, json.dumps(saved[key]))
            elif key not in saved:
                yield '{}: (not set) -> {}'.format(path, json.dumps(new[key]))
            else:
                yield from differences(saved[key], new[key], path)
    elif saved != new or type(saved) is not type(new):
        yield '{}: {} -> {}'.format(where or '(the whole file)', json.dumps(saved),
                                    json.dumps(new))


def save(experiment: Experiment) -> str:
    """Writes ``experiment``'s settings to ``experiment.json`` in its folder, unless the file
    describes a run that has started there with other settings (see the module's text).

    Returns:
        str: The path of the file (only rank 0 writes under ChainerMN).

    Raises:
        ValueError: A setting cannot be saved (naming it), or the folder holds a run started
            with other settings (naming them, and how to save this experiment instead).
        FolderInUseError: Another run holds the folder.
    """
    path = os.path.join(experiment.output_dir, files.SETTINGS_FILE)
    # Formatted first: a setting that cannot be saved is named before the folder is taken.
    text = json_values.dumps_json(settings.to_json(experiment))
    with _ownership.hold(experiment.output_dir, wait=experiment.wait_for_folder,
                         comm=experiment.comm):
        run = started_run(experiment.output_dir)
        if run is not None and os.path.lexists(path):
            changed = list(differences(json_values.load_json(path), json.loads(text)))
            if changed:
                listed = changed[:_LISTED] + (['and {} more'.format(len(changed) - _LISTED)]
                                              if len(changed) > _LISTED else [])
                raise ValueError(
                    '{} describes the run that has started in {} ({} is there), and this '
                    'experiment\'s settings differ from it: {}. Saving would make the folder '
                    'describe a model its files do not hold, so nothing was written. To '
                    'save and run these settings, give the experiment another name or '
                    'save_path; to take that run up, use ChainerExperiment.load({!r})'.format(
                        path, experiment.output_dir, os.path.basename(run),
                        '; '.join(listed), experiment.output_dir))
        if is_rank_zero(experiment.comm):
            train_utils.atomic_write_text(path, text)
    return path
