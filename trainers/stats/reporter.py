"""One StatsReporter per behavior: what a trainer adds during a summary period, aggregated.

A trainer adds values during a summary period (`StatsReporter.add_stat`, `set_stat`); every
``summary_freq`` steps `StatsReporter.write_stats(step)` aggregates them into
`StatsSummary` values and hands them to every `StatsWriter` (`trainers.stats.writers`),
then clears them.
"""

from __future__ import annotations

import abc
import enum
import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Sequence

import numpy as np



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

    def write_extra(self, category: str, values: Mapping[str, StatsSummary], step: int) -> None:
        """Writes summaries made outside the summary periods (an evaluation's, at its step).
        Default: as `write_stats`."""
        self.write_stats(category, values, step)

    def add_property(self, category: str, key: str, value: Any) -> None:
        """Records a property of a behavior ("hyperparameters" -> dict). Default: ignored."""

    def close(self) -> None:
        """Flushes and releases files. Idempotent; a later write reopens what it needs."""


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

    def write_now(self, values: Mapping[str, Sequence[float]], step: int) -> None:
        """Writes stats of their own at ``step`` at once (an evaluation's results: tag ->
        the values, e.g. each episode's return, summarised as MEAN stats), outside the
        summary period, whose values are left as they are."""
        summaries = {}
        for key, given in values.items():
            array = np.asarray(given, dtype=np.float64)
            if array.size:
                summaries[key] = StatsSummary(
                    mean=float(array.mean()), std=float(array.std()), num=int(array.size),
                    sum=float(array.sum()), aggregation=StatsAggregation.MEAN,
                )
        if not summaries:
            return
        for writer in self._writers:
            writer.write_extra(self.category, summaries, step)

    def add_property(self, key: str, value: Any) -> None:
        """Passes a property (e.g. "hyperparameters" -> dict) to every writer."""
        for writer in self._writers:
            writer.add_property(self.category, key, value)

    def close(self) -> None:
        """Closes the writers (shared writers: every behavior's files). Safe to repeat."""
        for writer in self._writers:
            writer.close()
