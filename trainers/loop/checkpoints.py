"""Finding the checkpoint to resume from, robustly against a run killed at any point.

A checkpoint is complete once TensorFlow has written ``checkpoint-<step>.index`` and its
data file: it must be resumable whatever was not yet written beside it (the status file,
the exported models, the curves). So candidates are the checkpoints the status lists
*and* every ``checkpoint-<step>.index`` found in the behavior's folder, newest first, and
a checkpoint that fails to restore (half-written when the run was killed) is skipped for
the previous one with a warning.
"""
from __future__ import annotations

import glob
import os
from typing import TYPE_CHECKING, Callable, List, Optional, Tuple

from trainers.exceptions import CheckpointError
from trainers.layout import RunLayout, checkpoint_step
from trainers.loop.status import CheckpointEntry, TrainingStatus

if TYPE_CHECKING:  # annotations only: trainers.trainer imports TensorFlow (and this package)
    from trainers.trainer import Trainer


def run_relative(behavior: str, prefix: str) -> str:
    """How ``training_status.json`` names a checkpoint: relative to the run folder
    (``<Behavior>/checkpoint-<step>``), so a run copied, moved or reached through another
    relative ``--results-dir`` still names its own files, and nothing else's."""
    return RunLayout.run_relative(behavior, prefix)


def checkpoint_candidates(run_dir: str, behavior: str, status: TrainingStatus) -> List[Tuple[int, str]]:
    """``[(step, prefix)]`` of ``behavior``, newest first, without duplicates.

    Prefixes are resolved inside ``run_dir`` (the status may hold paths relative to where
    training ran, or the run may have moved since). TensorFlow's temporary folders
    (``checkpoint-<step>_temp/``) never match.
    """
    layout = RunLayout(run_dir)
    found = {layout.in_run(behavior, c.file_path): c.steps for c in status.get_checkpoints(behavior)}
    for path in glob.glob(layout.checkpoint_index_glob(behavior)):
        prefix = path[: -len(".index")]  # the glob ends every match with .index
        step = checkpoint_step(os.path.basename(prefix))
        if step is not None:
            found[prefix] = step
    return sorted(((step, prefix) for prefix, step in found.items()), reverse=True)


def restore_newest(
    trainer: Trainer, candidates: List[Tuple[int, str]], warn: Callable[[str], None], reset_step: bool = False
) -> Optional[Tuple[int, str]]:
    """Restores the newest candidate that loads; returns its ``(step, prefix)`` or None.

    A candidate that does not restore (missing or half-written files) is skipped with one
    warning line; a later successful restore overwrites every variable, so a failed partial
    restore leaves nothing behind.
    """
    for step, prefix in candidates:
        try:
            trainer.load(prefix, reset_step=reset_step)
        except CheckpointError as exc:
            warn(f"skipping checkpoint {prefix} (incomplete: {exc}); trying the previous one")
            continue
        return step, prefix
    return None


def adopt_checkpoint(status: TrainingStatus, behavior: str, step: int, prefix: str) -> None:
    """Makes the status agree with the checkpoint a run resumes from: entries newer than it
    (never completed) are dropped, and it is listed (it may be missing when the run was
    killed before its status was written), so that ``keep_checkpoints`` pruning sees it at
    the next save."""
    entries = status.behavior(behavior).checkpoints
    entries[:] = [c for c in entries if c.steps <= step]
    if not any(os.path.basename(c.file_path) == os.path.basename(prefix) for c in entries):
        created = os.path.getmtime(prefix + ".index") if os.path.exists(prefix + ".index") else 0.0
        entries.append(CheckpointEntry(step, run_relative(behavior, prefix), created, None))
        entries.sort(key=lambda c: c.steps)
    status.set_step(behavior, step)
