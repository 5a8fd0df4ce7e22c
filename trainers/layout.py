"""The run folder, spelled in one place: every path under ``results/<run-id>/``.

A run writes (ML-Agents' names, so that its tools and habits find them)::

    results/<run-id>/
      configuration.yaml                 the resolved config (loads back unchanged)
      run_logs/
        training_status.json             steps, kept checkpoints, behavior specs
        timers.json                      seconds per part of the loop
        Player-<i>.log                   Unity builds' player logs (written by envs.unity)
        evaluation/Player-0.log          the evaluation build's player log (``evaluation:``)
      <Behavior>/                        `behavior_dir_name`: "/" becomes "_"
        checkpoint-<step>.index/.data-*  TensorFlow checkpoints (prefix ``checkpoint-<step>``)
        checkpoint                       TensorFlow's list of them (its name is TensorFlow's)
        <Behavior>.onnx, <Behavior>.pb   the latest exported models
        <Behavior>-<step>.onnx/.pb       the models exported at each kept checkpoint
        checkpoint-best.index/.data-*    the best evaluation's checkpoint (``evaluation:``)
        <Behavior>-best.onnx/.pb         the best evaluation's exported model
        stats.csv                        the statistics, long format
        events.out.tfevents.*            TensorBoard (the event file names are TensorBoard's)
        replay_buffer.npz                SAC with ``save_replay_buffer: true``

There is no lock file: a run is locked by ``flock`` on the run folder itself
(`trainers.loop.run_dir.RunLock`), so the lock cannot outlive its process or be deleted by
``--force``.

This module is a leaf (standard library only), so that every layer (the CLI, the loop, the
stats writers, the trainers, scripts) can import it without TensorFlow or a cycle.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from typing import Optional

#: The run's log folder (ML-Agents: ``results/<run-id>/run_logs``).
RUN_LOGS_DIR = "run_logs"
#: Per-behavior steps, checkpoints and specs, inside `RUN_LOGS_DIR`.
TRAINING_STATUS_FILE = "training_status.json"
#: Wall-clock timers of the loop, inside `RUN_LOGS_DIR`.
TIMERS_FILE = "timers.json"
#: The resolved configuration, at the top of the run folder.
CONFIGURATION_FILE = "configuration.yaml"
#: A behavior's statistics in long format, inside its folder.
STATS_FILE = "stats.csv"
#: SAC's saved replay buffer, inside the behavior's folder (beside its checkpoints).
REPLAY_BUFFER_FILE = "replay_buffer.npz"
#: A checkpoint prefix's base name: ``checkpoint-<step>`` (group 1: the step). A pattern,
#: not a compiled regex, so that callers anchor it as they need (whole name or suffix).
CHECKPOINT_PATTERN = r"checkpoint-(\d+)"
#: What marks the best evaluation's files: ``checkpoint-best`` (which `CHECKPOINT_PATTERN`
#: never matches, so resuming and pruning never take it for a numbered checkpoint) and
#: ``<Behavior>-best.<ext>``.
BEST = "best"
#: The evaluation env's own log folder, inside `RUN_LOGS_DIR` (Unity builds' player logs).
EVALUATION_LOGS_DIR = "evaluation"

_CHECKPOINT = re.compile(CHECKPOINT_PATTERN)


def behavior_dir_name(behavior: str) -> str:
    """A behavior's folder and file stem under the run directory.

    Behavior names are used as they are, except that a ``/`` (Gymnasium namespaces such as
    ``ALE/Pong-v5``) becomes ``_``, so each behavior gets one folder and its files.
    """
    return behavior.replace("/", "_").replace(os.sep, "_")


def checkpoint_name(step: int) -> str:
    """The base name of the checkpoint prefix saved at ``step``: ``checkpoint-<step>``."""
    return f"checkpoint-{step}"


def best_checkpoint_name() -> str:
    """The base name of the best evaluation's checkpoint prefix: ``checkpoint-best``."""
    return f"checkpoint-{BEST}"


def best_model_stem(behavior: str) -> str:
    """The file stem of the best evaluation's exported models: ``<Behavior>-best``."""
    return f"{behavior_dir_name(behavior)}-{BEST}"


def checkpoint_step(name: str) -> Optional[int]:
    """The step of a checkpoint prefix's base name (``checkpoint-<step>`` exactly); None
    for any other name (TensorFlow's ``checkpoint-<step>_temp`` folders, other files)."""
    match = _CHECKPOINT.fullmatch(name)
    return int(match.group(1)) if match else None


def model_file_name(stem: str, ext: str, step: Optional[int] = None) -> str:
    """An exported model's file name: ``<stem>.<ext>``, or ``<stem>-<step>.<ext>`` for the
    copy kept per checkpoint (``ext``: ``onnx`` or ``pb``, without the dot)."""
    return f"{stem}.{ext}" if step is None else f"{stem}-{int(step)}.{ext}"


@dataclass(frozen=True)
class RunLayout:
    """The paths of one run folder (``results/<run-id>``); computes paths, touches nothing.

    Behavior arguments are behavior names as the config keys them (``3DBall``, not
    ``3DBall?team=0``); their folders and file stems go through `behavior_dir_name`.
    """

    run_dir: str

    @classmethod
    def of_checkpoint(cls, prefix: str) -> "RunLayout":
        """The run a checkpoint prefix (``<run>/<Behavior>/checkpoint-<step>``) belongs to:
        the folder above its behavior folder, as an absolute path."""
        return cls(os.path.dirname(os.path.dirname(os.path.abspath(prefix))))

    @property
    def run_logs(self) -> str:
        """``<run>/run_logs``: the status, the timers and Unity builds' player logs."""
        return os.path.join(self.run_dir, RUN_LOGS_DIR)

    @property
    def training_status(self) -> str:
        """``<run>/run_logs/training_status.json``."""
        return os.path.join(self.run_dir, RUN_LOGS_DIR, TRAINING_STATUS_FILE)

    @property
    def timers(self) -> str:
        """``<run>/run_logs/timers.json``."""
        return os.path.join(self.run_dir, RUN_LOGS_DIR, TIMERS_FILE)

    @property
    def configuration(self) -> str:
        """``<run>/configuration.yaml``."""
        return os.path.join(self.run_dir, CONFIGURATION_FILE)

    def behavior_dir(self, behavior: str) -> str:
        """``<run>/<Behavior>``: checkpoints, exported models, statistics, events."""
        return os.path.join(self.run_dir, behavior_dir_name(behavior))

    def checkpoint_prefix(self, behavior: str, step: int) -> str:
        """``<run>/<Behavior>/checkpoint-<step>`` (TensorFlow adds ``.index``, ``.data-*``)."""
        return os.path.join(self.behavior_dir(behavior), checkpoint_name(step))

    def checkpoint_index_glob(self, behavior: str) -> str:
        """A `glob` pattern for the ``.index`` files of the behavior's checkpoints (the folder
        escaped, so a run folder named with ``[`` or ``*`` still matches only its own)."""
        return os.path.join(glob.escape(self.behavior_dir(behavior)), "checkpoint-*.index")

    def in_run(self, behavior: str, file_path: str) -> str:
        """A checkpoint named by the status (any path ending in its base name) as a prefix
        inside this run's behavior folder: the status may hold a path relative to where
        training ran, or the run may have been moved or copied since."""
        return os.path.join(self.behavior_dir(behavior), os.path.basename(file_path))

    @staticmethod
    def run_relative(behavior: str, prefix: str) -> str:
        """How ``training_status.json`` names a checkpoint: relative to the run folder
        (``<Behavior>/checkpoint-<step>``), so a run copied or moved still names its own."""
        return os.path.join(behavior_dir_name(behavior), os.path.basename(prefix))

    def exported(self, behavior: str, step: int, ext: str) -> str:
        """``<run>/<Behavior>/<Behavior>-<step>.<ext>``: the model exported at a checkpoint."""
        return os.path.join(self.behavior_dir(behavior), model_file_name(behavior_dir_name(behavior), ext, step))

    def final_model(self, behavior: str, ext: str) -> str:
        """``<run>/<Behavior>/<Behavior>.<ext>``: the latest exported model (training writes
        it beside the per-step copies; ``trainer-export`` writes into ``--out``)."""
        return os.path.join(self.behavior_dir(behavior), model_file_name(behavior_dir_name(behavior), ext))

    def best_checkpoint(self, behavior: str) -> str:
        """``<run>/<Behavior>/checkpoint-best``: the checkpoint of the best evaluation so far
        (``evaluation:``); never resumed from, never pruned."""
        return os.path.join(self.behavior_dir(behavior), best_checkpoint_name())

    def best_model(self, behavior: str, ext: str) -> str:
        """``<run>/<Behavior>/<Behavior>-best.<ext>``: the model of the best evaluation."""
        return os.path.join(self.behavior_dir(behavior), model_file_name(best_model_stem(behavior), ext))

    @property
    def evaluation_logs(self) -> str:
        """``<run>/run_logs/evaluation``: the evaluation env's logs (a Unity build's player
        log, apart from the training builds' ``Player-<i>.log``)."""
        return os.path.join(self.run_dir, RUN_LOGS_DIR, EVALUATION_LOGS_DIR)

    def stats_csv(self, behavior: str) -> str:
        """``<run>/<Behavior>/stats.csv``."""
        return os.path.join(self.behavior_dir(behavior), STATS_FILE)

    def replay_buffer(self, behavior: str) -> str:
        """``<run>/<Behavior>/replay_buffer.npz`` (SAC, ``save_replay_buffer: true``)."""
        return os.path.join(self.behavior_dir(behavior), REPLAY_BUFFER_FILE)
