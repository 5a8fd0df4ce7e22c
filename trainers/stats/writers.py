"""Where summaries go: the console line, TensorBoard event files, ``stats.csv``."""

from __future__ import annotations

import csv
import dataclasses
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, Mapping, Optional, TextIO

from tensorboard.compat.proto import event_pb2, summary_pb2, types_pb2
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto

from trainers.stats._tfrecord import _EventFile
from trainers.layout import RunLayout
from trainers.stats.reporter import StatsSummary, StatsWriter

REWARD_TAG = "Environment/Cumulative Reward"
"""The stat the console line reports."""
IS_TRAINING_TAG = "Is Training"
"""1.0 while the behavior trains, 0.0 when it has stopped (or runs inference)."""
ELO_TAG = "Self-play/ELO"
"""Self-play's rating (`trainers.loop.self_play`), printed after the reward as ML-Agents does."""


def _format_number(value: float) -> str:
    """Three decimals without trailing zeros, keeping one: 187.3, 21.0, 0.952."""
    text = f"{value:.3f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


class ConsoleWriter(StatsWriter):
    """Prints one line per behavior and summary, as ML-Agents does.

    ``[INFO] CartPole. Step: 20000. Time Elapsed: 41.2 s. Mean Reward: 187.3. Std of Reward:
    21.0. Training.`` (one line), or ``No episode was completed since last summary.`` in
    place of the reward when no episode ended. ``Not Training.`` when the "Is Training"
    stat is 0 or absent. Self-play adds `` ELO: 1311.553.`` after a reward.
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
        elo = values.get(ELO_TAG)
        if elo is not None and elo.num > 0 and reward is not None and reward.num > 0:
            parts.append(f"ELO: {_format_number(elo.mean)}.")
        stream = self._stream if self._stream is not None else sys.stdout
        stream.write(" ".join(parts) + "\n")
        stream.flush()

    def write_extra(self, category: str, values: Mapping[str, StatsSummary], step: int) -> None:
        """One line for summaries outside the periods (an evaluation's): each stat's name
        (the tag after its ``/``), mean, std and count. ``[INFO] CartPole. Step: 20000. Time
        Elapsed: 41.2 s. Evaluation Reward: 500.0 (std 0.0, 5 values). ...``"""
        elapsed = self._clock() - self._start_time
        parts = [f"[INFO] {category}.", f"Step: {step}.", f"Time Elapsed: {elapsed:.1f} s."]
        for tag, stat in values.items():
            parts.append(
                f"{tag.rpartition('/')[2]}: {_format_number(stat.aggregated_value)} "
                f"(std {_format_number(stat.std)}, {stat.num} value{'s' if stat.num != 1 else ''})."
            )
        stream = self._stream if self._stream is not None else sys.stdout
        stream.write(" ".join(parts) + "\n")
        stream.flush()


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
            events = _EventFile(RunLayout(self._base_dir).behavior_dir(category))
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
        return RunLayout(self._base_dir).stats_csv(category)

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
