"""The run's ``run_logs/training_status.json``: per-behavior step, elapsed time, episodes
and checkpoints, saved atomically (`TrainingStatus`)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from trainers import __version__
from trainers.exceptions import CheckpointError


STATS_FORMAT_VERSION = "0.3"


@dataclass(frozen=True)
class CheckpointEntry:
    """One saved checkpoint of a behavior."""

    steps: int
    """The behavior's step when it was saved."""
    file_path: str
    """The checkpoint (prefix) path."""
    creation_time: float
    """time.time() when it was saved."""
    reward: Optional[float] = None
    """Mean cumulative reward at the time, None if no episode had finished."""

    def to_json(self) -> Dict[str, Any]:
        reward = self.reward
        if reward is not None and not math.isfinite(reward):
            reward = None  # JSON has no NaN
        return {
            "steps": self.steps,
            "file_path": self.file_path,
            "creation_time": self.creation_time,
            "reward": reward,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "CheckpointEntry":
        reward = data.get("reward")
        return cls(
            steps=int(data["steps"]),
            file_path=str(data["file_path"]),
            creation_time=float(data["creation_time"]),
            reward=None if reward is None else float(reward),
        )


@dataclass
class BehaviorStatus:
    """What a run knows about one behavior across restarts."""

    step: int = 0
    elapsed_seconds: float = 0.0
    episodes: int = 0
    checkpoints: List[CheckpointEntry] = field(default_factory=list)
    """Kept checkpoints, oldest first."""
    final_checkpoint: Optional[CheckpointEntry] = None
    """The checkpoint saved when training ended (or was interrupted)."""


@dataclass
class StatusMetadata:
    """Versions that wrote the status file."""

    stats_format_version: str = STATS_FORMAT_VERSION
    trainer_learn_version: str = __version__
    tensorflow_version: str = ""


class TrainingStatus:
    """The run's ``run_logs/training_status.json``.

    Layout::

        {"metadata": {"stats_format_version": "0.3", "trainer_learn_version": "0.1.0",
                      "tensorflow_version": "2.16.1"},
         "behaviors": {"CartPole": {"step": 20000, "elapsed_seconds": 41.2, "episodes": 100,
                                    "checkpoints": [{"steps": ..., "file_path": ...,
                                                     "creation_time": ..., "reward": ...}],
                                    "final_checkpoint": null}}}
    """

    def __init__(self, tensorflow_version: str = "") -> None:
        self.metadata = StatusMetadata(tensorflow_version=tensorflow_version)
        self.behaviors: Dict[str, BehaviorStatus] = {}

    def behavior(self, name: str) -> BehaviorStatus:
        """The status of a behavior (created empty on first use)."""
        return self.behaviors.setdefault(name, BehaviorStatus())

    def set_step(self, behavior: str, step: int) -> None:
        self.behavior(behavior).step = int(step)

    def get_step(self, behavior: str) -> int:
        """The behavior's saved step; 0 if unknown."""
        return self.behaviors[behavior].step if behavior in self.behaviors else 0

    def set_elapsed_seconds(self, behavior: str, seconds: float) -> None:
        self.behavior(behavior).elapsed_seconds = float(seconds)

    def get_elapsed_seconds(self, behavior: str) -> float:
        return self.behaviors[behavior].elapsed_seconds if behavior in self.behaviors else 0.0

    def set_episodes(self, behavior: str, episodes: int) -> None:
        self.behavior(behavior).episodes = int(episodes)

    def get_episodes(self, behavior: str) -> int:
        return self.behaviors[behavior].episodes if behavior in self.behaviors else 0

    def get_checkpoints(self, behavior: str) -> List[CheckpointEntry]:
        """Kept checkpoints, oldest first (a copy)."""
        return list(self.behaviors[behavior].checkpoints) if behavior in self.behaviors else []

    def add_checkpoint(
        self, behavior: str, entry: CheckpointEntry, keep: int
    ) -> List[CheckpointEntry]:
        """Records a checkpoint and keeps only the newest `keep`.

        An entry with the same file_path as a kept one replaces it (the file was rewritten).

        Returns:
          The entries dropped, oldest first: the caller deletes their files.
        """
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        status = self.behavior(behavior)
        status.checkpoints = [c for c in status.checkpoints if c.file_path != entry.file_path]
        status.checkpoints.append(entry)
        excess = len(status.checkpoints) - keep
        dropped = status.checkpoints[:excess] if excess > 0 else []
        status.checkpoints = status.checkpoints[len(dropped):]
        return dropped

    def set_final_checkpoint(self, behavior: str, entry: CheckpointEntry) -> None:
        self.behavior(behavior).final_checkpoint = entry

    def get_final_checkpoint(self, behavior: str) -> Optional[CheckpointEntry]:
        return self.behaviors[behavior].final_checkpoint if behavior in self.behaviors else None

    def to_json(self) -> Dict[str, Any]:
        return {
            "metadata": {
                "stats_format_version": self.metadata.stats_format_version,
                "trainer_learn_version": self.metadata.trainer_learn_version,
                "tensorflow_version": self.metadata.tensorflow_version,
            },
            "behaviors": {
                name: {
                    "step": status.step,
                    "elapsed_seconds": status.elapsed_seconds,
                    "episodes": status.episodes,
                    "checkpoints": [c.to_json() for c in status.checkpoints],
                    "final_checkpoint": (
                        status.final_checkpoint.to_json() if status.final_checkpoint else None
                    ),
                }
                for name, status in self.behaviors.items()
            },
        }

    def save(self, path: str) -> None:
        """Writes the file atomically (a temporary file, then os.replace)."""
        directory = os.path.dirname(path) or "."
        os.makedirs(directory, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(prefix=".training_status.", dir=directory)
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
                json.dump(self.to_json(), stream, indent=2)
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(temporary, path)
        except BaseException:
            if os.path.exists(temporary):
                os.remove(temporary)
            raise

    @classmethod
    def load(cls, path: str) -> "TrainingStatus":
        """Reads the file; a missing file gives an empty status.

        Raises:
          CheckpointError: the file is not valid JSON or not a training status.
        """
        status = cls()
        try:
            with open(path, "r", encoding="utf-8") as stream:
                data = json.load(stream)
        except FileNotFoundError:
            return status
        except (OSError, UnicodeDecodeError) as error:
            raise CheckpointError(f"{path}: cannot read the training status: {error}") from None
        except json.JSONDecodeError as error:
            raise CheckpointError(
                f"{path}: corrupt training status (line {error.lineno}: {error.msg}); "
                "delete it or the run to start over"
            ) from None
        try:
            metadata = data.get("metadata", {})
            status.metadata = StatusMetadata(
                stats_format_version=str(metadata.get("stats_format_version", "")),
                trainer_learn_version=str(metadata.get("trainer_learn_version", "")),
                tensorflow_version=str(metadata.get("tensorflow_version", "")),
            )
            for name, entry in data.get("behaviors", {}).items():
                final = entry.get("final_checkpoint")
                status.behaviors[name] = BehaviorStatus(
                    step=int(entry.get("step", 0)),
                    elapsed_seconds=float(entry.get("elapsed_seconds", 0.0)),
                    episodes=int(entry.get("episodes", 0)),
                    checkpoints=[
                        CheckpointEntry.from_json(c) for c in entry.get("checkpoints", [])
                    ],
                    final_checkpoint=CheckpointEntry.from_json(final) if final else None,
                )
        except (AttributeError, KeyError, TypeError, ValueError) as error:
            raise CheckpointError(
                f"{path}: not a valid training status ({type(error).__name__}: {error}); "
                "delete it or the run to start over"
            ) from None
        return status
