"""The run's ``run_logs/training_status.json``: per-behavior step, elapsed time, episodes,
checkpoints and behavior spec, saved atomically (`TrainingStatus`)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

from envs.base_env import ActionSpec, BehaviorSpec, ObservationKind, ObservationSpec
from trainers import __version__
from trainers.exceptions import CheckpointError


STATS_FORMAT_VERSION = "0.3"


def spec_to_json(spec: BehaviorSpec) -> Dict[str, Any]:
    """A behavior spec as ``training_status.json`` stores it: the fields of
    `envs.base_env.BehaviorSpec`, by name (shapes as lists, the kind as its value)::

        {"observation_specs": [{"shape": [8], "name": "obs", "kind": "vector"}],
         "action_spec": {"continuous_size": 2, "discrete_branches": [3, 2]}}
    """
    return {
        "observation_specs": [
            {"shape": list(o.shape), "name": o.name, "kind": o.kind.value} for o in spec.observation_specs
        ],
        "action_spec": {
            "continuous_size": spec.action_spec.continuous_size,
            "discrete_branches": list(spec.action_spec.discrete_branches),
        },
    }


def _sizes(value: Any, what: str, minimum: int) -> List[int]:
    """A JSON list of integers >= ``minimum``; ValueError naming ``what`` otherwise (a bool or
    a float is refused, so a hand-edited file cannot build a policy of another size)."""
    if not isinstance(value, list) or not all(type(v) is int and v >= minimum for v in value):
        raise ValueError(f"{what}: expected a list of integers >= {minimum}, got {value!r}")
    return value


def spec_from_json(data: Any) -> BehaviorSpec:
    """The inverse of `spec_to_json`.

    Raises:
      ValueError, KeyError, TypeError: not a spec as `spec_to_json` writes it (the status
        loader turns these into one `CheckpointError` line naming the file).
    """
    if not isinstance(data, dict) or not isinstance(data.get("observation_specs"), list):
        raise ValueError(f"behavior_spec: expected observation_specs and action_spec, got {data!r}")
    observations = []
    for o in data["observation_specs"]:
        if not isinstance(o, dict) or not isinstance(o.get("name"), str):
            raise ValueError(f"behavior_spec.observation_specs: expected shape, name and kind, got {o!r}")
        shape = _sizes(o["shape"], "behavior_spec.observation_specs.shape", 1)
        observations.append(ObservationSpec(tuple(shape), o["name"], ObservationKind(o["kind"])))
    action = data["action_spec"]
    if not isinstance(action, dict):
        raise ValueError(f"behavior_spec.action_spec: expected continuous_size and discrete_branches, got {action!r}")
    continuous = action["continuous_size"]
    if type(continuous) is not int or continuous < 0:
        raise ValueError(f"behavior_spec.action_spec.continuous_size: expected an integer >= 0, got {continuous!r}")
    branches = _sizes(action["discrete_branches"], "behavior_spec.action_spec.discrete_branches", 1)
    return BehaviorSpec(tuple(observations), ActionSpec(continuous, tuple(branches)))


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
    behavior_spec: Optional[BehaviorSpec] = None
    """What the behavior observes and how it acts, as the env reported it when training:
    enough to rebuild its actor without the env (``trainer-export``). None in a status
    written before specs were recorded."""
    best_checkpoint: Optional[CheckpointEntry] = None
    """The checkpoint of the best evaluation so far (``evaluation:``; ``checkpoint-best``),
    its ``reward`` the evaluation's mean return and ``steps`` the step it was made at. None:
    no evaluation yet (or a status written before evaluations existed)."""
    elo: Optional[float] = None
    """Self-play (``self_play:``): the learning policy's ELO rating at the last checkpoint,
    ML-Agents' ``elo`` (a run resumed without the checkpoint's self-play state starts from
    it). None: no self-play."""


@dataclass
class StatusMetadata:
    """Versions that wrote the status file."""

    stats_format_version: str = STATS_FORMAT_VERSION
    trainer_learn_version: str = __version__
    tensorflow_version: str = ""


@dataclass
class CurriculumStatus:
    """Where the run's curricula are (``environment_parameters:``), kept across --resume
    (`trainers.loop.curriculum`): per parameter its lesson and smoothed measure, per
    behavior the returns of its episodes since the last lesson change (at most the
    largest ``min_lesson_length``)."""

    lessons: Dict[str, int] = field(default_factory=dict)
    smoothed: Dict[str, float] = field(default_factory=dict)
    reward_buffers: Mapping[str, Sequence[float]] = field(default_factory=dict)

    def to_json(self) -> Dict[str, Any]:
        return {
            "parameters": {
                name: {"lesson_num": lesson, "smoothed_value": _finite(self.smoothed.get(name, 0.0))}
                for name, lesson in self.lessons.items()
            },
            "reward_buffers": {name: [_finite(r) for r in rewards] for name, rewards in self.reward_buffers.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "CurriculumStatus":
        out = cls()
        for name, entry in data.get("parameters", {}).items():
            out.lessons[str(name)] = int(entry["lesson_num"])
            out.smoothed[str(name)] = float(entry.get("smoothed_value", 0.0))
        out.reward_buffers = {
            str(name): [float(r) for r in rewards] for name, rewards in data.get("reward_buffers", {}).items()
        }
        return out


def _finite(value: float) -> float:
    return float(value) if math.isfinite(value) else 0.0  # JSON has no NaN


class TrainingStatus:
    """The run's ``run_logs/training_status.json``.

    Layout::

        {"metadata": {"stats_format_version": "0.3", "trainer_learn_version": "0.1.0",
                      "tensorflow_version": "2.16.1"},
         "behaviors": {"CartPole": {"step": 20000, "elapsed_seconds": 41.2, "episodes": 100,
                                    "checkpoints": [{"steps": ..., "file_path": ...,
                                                     "creation_time": ..., "reward": ...}],
                                    "final_checkpoint": null,
                                    "behavior_spec": {"observation_specs": [...],
                                                      "action_spec": {...}},
                                    "best_checkpoint": {"steps": ..., "file_path":
                                                        "CartPole/checkpoint-best", ...}}}}

    With ``environment_parameters:`` a top-level ``"environment_parameters": {"parameters":
    {"<name>": {"lesson_num": 1, "smoothed_value": 0.93}}, "reward_buffers": {"<behavior>":
    [returns]}}`` (`CurriculumStatus`) keeps the lessons for --resume.

    ``behavior_spec`` (`spec_to_json`) and ``best_checkpoint`` (runs with ``evaluation:``;
    its ``reward`` is the best evaluation's mean return) are additions that ML-Agents'
    readers, which ignore unknown keys, and this format version's older files, which lack
    them, both accept: no version bump. A file without them loads with neither. A
    behavior with ``self_play:`` also has ``"elo"``, its rating at the last checkpoint
    (ML-Agents' key; `trainers.loop.self_play` keeps the rest beside the checkpoint).
    """

    def __init__(self, tensorflow_version: str = "") -> None:
        self.metadata = StatusMetadata(tensorflow_version=tensorflow_version)
        self.behaviors: Dict[str, BehaviorStatus] = {}
        # Curricula (``environment_parameters``): a top-level ``environment_parameters`` key,
        # absent without them (ML-Agents keeps ``lesson_num`` per parameter too).
        self.curriculum: Optional[CurriculumStatus] = None

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

    def set_behavior_spec(self, behavior: str, spec: BehaviorSpec) -> None:
        self.behavior(behavior).behavior_spec = spec

    def get_behavior_spec(self, behavior: str) -> Optional[BehaviorSpec]:
        """The behavior's recorded spec; None if unknown (an older run, or no such behavior)."""
        return self.behaviors[behavior].behavior_spec if behavior in self.behaviors else None

    def set_best_checkpoint(self, behavior: str, entry: CheckpointEntry) -> None:
        """Records the best evaluation's checkpoint (``entry.reward``: its mean return)."""
        self.behavior(behavior).best_checkpoint = entry

    def get_best_checkpoint(self, behavior: str) -> Optional[CheckpointEntry]:
        """The best evaluation's checkpoint; None before the first evaluation."""
        return self.behaviors[behavior].best_checkpoint if behavior in self.behaviors else None

    def set_elo(self, behavior: str, elo: float) -> None:
        """Records the self-play ELO rating (written with the next save)."""
        self.behavior(behavior).elo = float(elo)

    def get_elo(self, behavior: str) -> Optional[float]:
        """The recorded self-play ELO rating; None if none."""
        return self.behaviors[behavior].elo if behavior in self.behaviors else None

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
                    # A key ML-Agents' readers ignore; absent when unknown, as in older files.
                    **(
                        {"behavior_spec": spec_to_json(status.behavior_spec)}
                        if status.behavior_spec is not None
                        else {}
                    ),
                    **(
                        {"best_checkpoint": status.best_checkpoint.to_json()}
                        if status.best_checkpoint is not None
                        else {}
                    ),
                    **({"elo": status.elo} if status.elo is not None and math.isfinite(status.elo) else {}),
                }
                for name, status in self.behaviors.items()
            },
            **({"environment_parameters": self.curriculum.to_json()} if self.curriculum is not None else {}),
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
                spec = entry.get("behavior_spec")
                best = entry.get("best_checkpoint")
                elo = entry.get("elo")
                status.behaviors[name] = BehaviorStatus(
                    step=int(entry.get("step", 0)),
                    elapsed_seconds=float(entry.get("elapsed_seconds", 0.0)),
                    episodes=int(entry.get("episodes", 0)),
                    checkpoints=[
                        CheckpointEntry.from_json(c) for c in entry.get("checkpoints", [])
                    ],
                    final_checkpoint=CheckpointEntry.from_json(final) if final else None,
                    behavior_spec=spec_from_json(spec) if spec is not None else None,
                    best_checkpoint=CheckpointEntry.from_json(best) if best else None,
                    elo=float(elo) if elo is not None else None,
                )
            if data.get("environment_parameters") is not None:
                status.curriculum = CurriculumStatus.from_json(data["environment_parameters"])
        except (AttributeError, KeyError, TypeError, ValueError) as error:
            raise CheckpointError(
                f"{path}: not a valid training status ({type(error).__name__}: {error}); "
                "delete it or the run to start over"
            ) from None
        return status
