"""Training statistics: one StatsReporter per behavior, written to console, TensorBoard, CSV.

A trainer adds values during a summary period (`StatsReporter.add_stat`, `set_stat`); every
``summary_freq`` steps `StatsReporter.write_stats(step)` aggregates them into
`StatsSummary` values and hands them to every `StatsWriter`, then clears them.

TensorBoard event files are written with the ``tensorboard`` package's protobufs and our
own TFRecord framing (`_RecordWriter`). (Its ``EventFileWriter`` reaches the file system
through ``tensorboard.compat.tf``, which imports TensorFlow when TensorFlow is installed;
this module must stay importable without it. Its ``RecordWriter`` module sits under
``tensorboard.summary``, whose package import pulls in TensorBoard's TensorFlow stub:
0.22 s of every process's start-up.)

`TrainingStatus` is the run's ``run_logs/training_status.json``: per-behavior step, elapsed
time, episodes and checkpoints, saved atomically.
"""

from __future__ import annotations

import abc
import csv
import dataclasses
import enum
import itertools
import json
import math
import os
import socket
import struct
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, TextIO

import numpy as np
from tensorboard.compat.proto import event_pb2, summary_pb2, types_pb2
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto

from trainers import __version__
from trainers.exceptions import CheckpointError

REWARD_TAG = "Environment/Cumulative Reward"
"""The stat the console line reports."""
IS_TRAINING_TAG = "Is Training"
"""1.0 while the behavior trains, 0.0 when it has stopped (or runs inference)."""


def behavior_dir_name(behavior: str) -> str:
    """A behavior's folder and file stem under the run directory.

    Behavior names are used as they are, except that a ``/`` (Gymnasium namespaces such as
    ``ALE/Pong-v5``) becomes ``_``, so each behavior gets one folder and its files.
    """
    return behavior.replace("/", "_").replace(os.sep, "_")


class StatsAggregation(enum.Enum):
    """How the values added to a stat during one summary period become one value."""

    MEAN = "mean"
    """The mean of every value (std, count and sum are kept too)."""
    MOST_RECENT = "most_recent"
    """Only the last value."""
    SUM = "sum"
    """The sum of every value."""


@dataclass(frozen=True)
class StatsSummary:
    """One stat over one summary period."""

    mean: float
    """Mean of the values (for MOST_RECENT: the last value)."""
    std: float
    """Population standard deviation of the values."""
    num: int
    """Number of values."""
    sum: float
    """Sum of the values."""
    aggregation: StatsAggregation
    """How the stat is aggregated; decides `aggregated_value`."""

    @classmethod
    def empty(cls) -> "StatsSummary":
        """The summary of a stat with no values."""
        return cls(mean=0.0, std=0.0, num=0, sum=0.0, aggregation=StatsAggregation.MEAN)

    @property
    def aggregated_value(self) -> float:
        """The value to plot: the sum for SUM, else the mean."""
        return self.sum if self.aggregation is StatsAggregation.SUM else self.mean


class StatsWriter(abc.ABC):
    """Somewhere summaries go. Writers may be shared by every behavior's reporter."""

    @abc.abstractmethod
    def write_stats(self, category: str, values: Mapping[str, StatsSummary], step: int) -> None:
        """Writes the summaries of one period.

        Args:
          category: the behavior name.
          values: tag -> summary (tags such as "Environment/Cumulative Reward").
          step: the behavior's step at the end of the period.
        """

    def add_property(self, category: str, key: str, value: Any) -> None:
        """Records a property of a behavior ("hyperparameters" -> dict). Default: ignored."""

    def close(self) -> None:
        """Flushes and releases files. Idempotent; a later write reopens what it needs."""


def _format_number(value: float) -> str:
    """Three decimals without trailing zeros, keeping one: 187.3, 21.0, 0.952."""
    text = f"{value:.3f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


class ConsoleWriter(StatsWriter):
    """Prints one line per behavior and summary, as ML-Agents does.

    ``[INFO] CartPole. Step: 20000. Time Elapsed: 41.2 s. Mean Reward: 187.3. Std of Reward:
    21.0. Training.`` (one line), or ``No episode was completed since last summary.`` in
    place of the reward when no episode ended. ``Not Training.`` when the "Is Training"
    stat is 0 or absent.
    """

    def __init__(
        self,
        stream: Optional[TextIO] = None,
        start_time: Optional[float] = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """
        Args:
          stream: where lines go; None: sys.stdout (looked up at each write).
          start_time: the clock value at which the run started; None: now. On resume, pass
            ``clock() - previous elapsed seconds`` so the elapsed time continues.
          clock: seconds, e.g. time.time (tests pass a fake).
        """
        self._stream = stream
        self._clock = clock
        self._start_time = clock() if start_time is None else start_time

    def write_stats(self, category: str, values: Mapping[str, StatsSummary], step: int) -> None:
        elapsed = self._clock() - self._start_time
        parts = [f"[INFO] {category}.", f"Step: {step}.", f"Time Elapsed: {elapsed:.1f} s."]
        reward = values.get(REWARD_TAG)
        if reward is not None and reward.num > 0:
            parts.append(f"Mean Reward: {_format_number(reward.aggregated_value)}.")
            parts.append(f"Std of Reward: {_format_number(reward.std)}.")
        else:
            parts.append("No episode was completed since last summary.")
        training = values.get(IS_TRAINING_TAG)
        is_training = training is not None and training.num > 0 and training.aggregated_value > 0
        parts.append("Training." if is_training else "Not Training.")
        stream = self._stream if self._stream is not None else sys.stdout
        stream.write(" ".join(parts) + "\n")
        stream.flush()


def _crc32c_table() -> List[int]:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), one entry per byte value."""
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C_TABLE = _crc32c_table()


def masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: CRC-32C of ``data``, rotated right by 15 bits plus a constant.

    Pure Python (about 0.1 us a byte): event records are a few hundred bytes, written
    once per summary period.
    """
    crc = 0xFFFFFFFF
    table = _CRC32C_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class _RecordWriter:
    """TFRecord framing, what TensorBoard reads: ``uint64 length``, its masked CRC-32C,
    the bytes, their masked CRC-32C (little-endian)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, data: bytes) -> None:
        header = struct.pack("<Q", len(data))
        self._stream.write(
            header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data))
        )

    def flush(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        self._stream.close()


class _EventFile:
    """One TensorBoard event file, written synchronously (flushed after each batch)."""

    def __init__(self, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)
        # TensorBoard's naming; the zero-padded counter keeps files one process opens in the
        # same second apart and in creation order (readers load a directory sorted by name).
        self.path = os.path.join(
            directory,
            "events.out.tfevents.%010d.%s.%d.%06d"
            % (time.time(), socket.gethostname(), os.getpid(), next(_FILE_COUNTER)),
        )
        self._records = _RecordWriter(open(self.path, "wb"))
        self.write(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))
        self.flush()

    def write(self, event: event_pb2.Event) -> None:
        self._records.write(event.SerializeToString())

    def flush(self) -> None:
        self._records.flush()

    def close(self) -> None:
        self._records.close()


# next() of itertools.count is atomic under the GIL.
_FILE_COUNTER = itertools.count(1)


def _as_mapping(value: Any) -> Any:
    """A dataclass (e.g. TrainerSettings) as a field -> value dict; anything else unchanged."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return value


def _flatten(value: Any, prefix: str = "") -> Dict[str, Any]:
    """Nested mappings and dataclasses as dotted keys: {"a": {"b": 1}} -> {"a.b": 1}."""
    value = _as_mapping(value)
    if not isinstance(value, Mapping):
        return {prefix or "value": value}
    flat: Dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        item = _as_mapping(item)
        if isinstance(item, Mapping) and item:
            flat.update(_flatten(item, name))
        else:
            flat[name] = item
    return flat


def _text_summary(tag: str, text: str) -> summary_pb2.Summary:
    """A summary the TensorBoard text plugin shows (a scalar string tensor)."""
    metadata = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text")
    )
    tensor = TensorProto(
        dtype=types_pb2.DT_STRING,
        tensor_shape=TensorShapeProto(),
        string_val=[text.encode("utf-8")],
    )
    return summary_pb2.Summary(
        value=[summary_pb2.Summary.Value(tag=tag, metadata=metadata, tensor=tensor)]
    )


class TensorboardWriter(StatsWriter):
    """TensorBoard scalars per behavior in ``<base_dir>/<category>/``.

    Each stat becomes a scalar with its tag (e.g. "Environment/Cumulative Reward") and its
    aggregated value (the mean, or the sum for SUM stats). Each writer instance opens a new
    event file per category, so a resumed run appends a file beside the old ones and its
    curves continue at the steps it writes.
    """

    def __init__(self, base_dir: str, resume_step: Optional[int] = None) -> None:
        """
        Args:
          base_dir: the run directory (results/<run-id>).
          resume_step: the step a resumed run restarts from. Each new event file then
            starts with a SessionLog START at resume_step + 1, so TensorBoard discards
            the older run's points after the checkpoint instead of drawing two curves.
        """
        self._base_dir = base_dir
        self._resume_step = resume_step
        self._files: Dict[str, _EventFile] = {}
        self._lock = threading.Lock()

    def resume_from(self, step: int) -> None:
        """Sets ``resume_step`` after construction (the step of the checkpoint a resumed run
        restored); it applies to the event files opened from now on."""
        self._resume_step = int(step)

    def _file(self, category: str) -> _EventFile:
        if category not in self._files:
            events = _EventFile(os.path.join(self._base_dir, behavior_dir_name(category)))
            if self._resume_step is not None:
                events.write(
                    event_pb2.Event(
                        wall_time=time.time(),
                        step=self._resume_step + 1,
                        session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START),
                    )
                )
            self._files[category] = events
        return self._files[category]

    def write_stats(self, category: str, values: Mapping[str, StatsSummary], step: int) -> None:
        if not values:
            return
        summary = summary_pb2.Summary(
            value=[
                summary_pb2.Summary.Value(tag=tag, simple_value=float(stat.aggregated_value))
                for tag, stat in values.items()
            ]
        )
        with self._lock:
            events = self._file(category)
            events.write(event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary))
            events.flush()

    def add_property(self, category: str, key: str, value: Any) -> None:
        """"hyperparameters" -> a mapping or a settings dataclass: a text summary (a table)."""
        if key != "hyperparameters":
            return
        rows = ["| Parameter | Value |", "| --- | --- |"]
        rows += [f"| {name} | {item} |" for name, item in _flatten(value).items()]
        with self._lock:
            events = self._file(category)
            summary = _text_summary("Hyperparameters", "\n".join(rows))
            events.write(event_pb2.Event(wall_time=time.time(), step=0, summary=summary))
            events.flush()

    def close(self) -> None:
        with self._lock:
            for events in self._files.values():
                events.close()
            self._files.clear()


class CSVWriter(StatsWriter):
    """``<base_dir>/<category>/stats.csv`` in long format: step,wall_time,tag,mean,std,count.

    Appends (a resumed run continues the file); the header is written once, when the file
    is new or empty. ``mean`` is the aggregated value (the sum for SUM stats).
    """

    COLUMNS = ("step", "wall_time", "tag", "mean", "std", "count")

    def __init__(self, base_dir: str, clock: Callable[[], float] = time.time) -> None:
        self._base_dir = base_dir
        self._clock = clock
        self._lock = threading.Lock()

    def path(self, category: str) -> str:
        """The CSV file of a behavior."""
        return os.path.join(self._base_dir, behavior_dir_name(category), "stats.csv")

    def write_stats(self, category: str, values: Mapping[str, StatsSummary], step: int) -> None:
        if not values:
            return
        path = self.path(category)
        wall_time = self._clock()
        with self._lock:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            new = not os.path.exists(path) or os.path.getsize(path) == 0
            with open(path, "a", newline="", encoding="utf-8") as stream:
                writer = csv.writer(stream)
                if new:
                    writer.writerow(self.COLUMNS)
                for tag, stat in values.items():
                    value, std = float(stat.aggregated_value), float(stat.std)
                    row = [step, f"{wall_time:.3f}", tag, repr(value), repr(std), stat.num]
                    writer.writerow(row)


class StatsReporter:
    """Collects one behavior's stats during a summary period and writes them.

    Thread-safe: trainers and environment threads may add stats concurrently.
    """

    def __init__(self, category: str, writers: Sequence[StatsWriter]) -> None:
        """
        Args:
          category: the behavior name (a TensorBoard run, a console prefix).
          writers: where summaries go; may be shared with other reporters.
        """
        self.category = category
        self._writers = list(writers)
        self._values: Dict[str, List[float]] = defaultdict(list)
        self._aggregation: Dict[str, StatsAggregation] = {}
        self._lock = threading.Lock()

    def add_stat(
        self, key: str, value: float, aggregation: StatsAggregation = StatsAggregation.MEAN
    ) -> None:
        """Adds a value to a stat of this period.

        Raises:
          ValueError: the stat was already given another aggregation this period.
        """
        with self._lock:
            known = self._aggregation.setdefault(key, aggregation)
            if known is not aggregation:
                raise ValueError(
                    f"stat {key!r} is aggregated as {known.name}, not {aggregation.name}"
                )
            if aggregation is StatsAggregation.MOST_RECENT:
                self._values[key] = [float(value)]
            else:
                self._values[key].append(float(value))

    def set_stat(self, key: str, value: float) -> None:
        """Sets a stat to one value (MOST_RECENT), e.g. "Is Training" or the learning rate."""
        self.add_stat(key, value, StatsAggregation.MOST_RECENT)

    def add_stats(self, values: Mapping[str, float]) -> None:
        """Adds several MEAN values, e.g. the stats an update returned."""
        for key, value in values.items():
            self.add_stat(key, value)

    def get_stats_summaries(self, key: str) -> StatsSummary:
        """The summary of one stat so far this period (empty if it has no values)."""
        with self._lock:
            return self._summary(key)

    def _summary(self, key: str) -> StatsSummary:
        values = self._values.get(key)
        if not values:
            return StatsSummary.empty()
        array = np.asarray(values, dtype=np.float64)
        return StatsSummary(
            mean=float(array.mean()),
            std=float(array.std()),
            num=int(array.size),
            sum=float(array.sum()),
            aggregation=self._aggregation[key],
        )

    def write_stats(self, step: int) -> None:
        """Writes this period's summaries to every writer, then starts a new period."""
        with self._lock:
            summaries = {key: self._summary(key) for key in self._values if self._values[key]}
            self._values.clear()
            self._aggregation.clear()
        for writer in self._writers:
            writer.write_stats(self.category, summaries, step)

    def add_property(self, key: str, value: Any) -> None:
        """Passes a property (e.g. "hyperparameters" -> dict) to every writer."""
        for writer in self._writers:
            writer.add_property(self.category, key, value)

    def close(self) -> None:
        """Closes the writers (shared writers: every behavior's files). Safe to repeat."""
        for writer in self._writers:
            writer.close()


# --------------------------------------------------------------------------------------
# run_logs/training_status.json
# --------------------------------------------------------------------------------------

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
