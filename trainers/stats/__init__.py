"""Training statistics: one StatsReporter per behavior, written to console, TensorBoard, CSV.

A trainer adds values during a summary period (`StatsReporter.add_stat`, `set_stat`); every
``summary_freq`` steps `StatsReporter.write_stats(step)` aggregates them into
`StatsSummary` values and hands them to every `StatsWriter`, then clears them.

TensorBoard event files are written with the ``tensorboard`` package's protobufs and our
own TFRecord framing (`trainers.stats._tfrecord`), so that this package stays importable
without TensorFlow.

Modules: `reporter` (StatsReporter, StatsAggregation, StatsSummary, the StatsWriter
interface), `writers` (ConsoleWriter, TensorboardWriter, CSVWriter),
`_tfrecord` (the TFRecord/event-file framing). The run's ``training_status.json`` is
`trainers.loop.status`'s; the run folder's paths are `trainers.layout`'s.
"""

from trainers.stats._tfrecord import masked_crc32c
from trainers.stats.reporter import StatsAggregation, StatsReporter, StatsSummary, StatsWriter
from trainers.stats.writers import (  # noqa: F401  (_flatten: tests)
    IS_TRAINING_TAG,
    REWARD_TAG,
    ConsoleWriter,
    CSVWriter,
    TensorboardWriter,
    _flatten,
)

__all__ = [
    "REWARD_TAG",
    "IS_TRAINING_TAG",
    "StatsAggregation",
    "StatsSummary",
    "StatsWriter",
    "ConsoleWriter",
    "TensorboardWriter",
    "CSVWriter",
    "StatsReporter",
    "masked_crc32c",
]
