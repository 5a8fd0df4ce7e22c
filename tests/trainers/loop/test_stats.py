"""Tests for trainers/stats.py: aggregation, console line, TensorBoard, CSV, training status."""

import csv
import io
import json
import os
import subprocess
import sys

import pytest

from trainers.exceptions import CheckpointError
from trainers.loop.status import CheckpointEntry, TrainingStatus
from trainers.stats import (
    ConsoleWriter,
    CSVWriter,
    StatsAggregation,
    StatsReporter,
    StatsSummary,
    StatsWriter,
    TensorboardWriter,
    masked_crc32c,
)


def test_masked_crc32c_closed_forms():
    """TFRecord's checksum (our event files' framing; TensorBoard's reader checks it, see
    the EventAccumulator tests): CRC-32C's standard check value, masked."""

    def mask(crc):
        return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    assert masked_crc32c(b"123456789") == mask(0xE3069283)  # the CRC-32C check value
    assert masked_crc32c(b"") == mask(0)
    assert masked_crc32c(bytes(32)) == mask(0x8A9136AA)  # RFC 3720 B.4: 32 zero bytes
    assert masked_crc32c(b"\xff" * 32) == mask(0x62A8AB43)  # RFC 3720 B.4: 32 bytes of 0xff


class RecordingWriter(StatsWriter):
    def __init__(self):
        self.calls = []
        self.properties = []

    def write_stats(self, category, values, step):
        self.calls.append((category, dict(values), step))

    def add_property(self, category, key, value):
        self.properties.append((category, key, value))


def summary(mean, std=0.0, num=1, aggregation=StatsAggregation.MEAN):
    return StatsSummary(mean=mean, std=std, num=num, sum=mean * num, aggregation=aggregation)


# Reads a run directory with TensorBoard's EventAccumulator in a subprocess that uses
# TensorBoard's own no-TensorFlow mode (its pure-Python record reader): with TensorFlow
# installed, EventAccumulator would import it, which takes seconds.
_READ_EVENTS = """
import json, sys, types
sys.modules["tensorboard.compat.notf"] = types.ModuleType("tensorboard.compat.notf")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
events = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0, "tensors": 0})
events.Reload()
tags = events.Tags()
print(json.dumps({
    "scalar_tags": tags["scalars"],
    "scalars": {t: [[e.step, e.value] for e in events.Scalars(t)] for t in tags["scalars"]},
    "texts": {t: [e.tensor_proto.string_val[0].decode() for e in events.Tensors(t)]
              for t in tags["tensors"]},
    "tensorflow_imported": "tensorflow" in sys.modules,
}))
"""


def load_events(directory):
    result = subprocess.run(
        [sys.executable, "-c", _READ_EVENTS, directory], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    events = json.loads(result.stdout)
    assert not events["tensorflow_imported"]
    return events


# -------------------------------------------------------------------------- aggregation


def test_aggregation_maths():
    writer = RecordingWriter()
    reporter = StatsReporter("CartPole", [writer])
    for value in (1.0, 2.0, 3.0, 6.0):
        reporter.add_stat("Environment/Cumulative Reward", value)
    reporter.add_stat("Episodes", 2, StatsAggregation.SUM)
    reporter.add_stat("Episodes", 3, StatsAggregation.SUM)
    reporter.set_stat("Policy/Learning Rate", 0.1)
    reporter.set_stat("Policy/Learning Rate", 0.05)
    reporter.add_stats({"Losses/Value Loss": 4.0, "Losses/Policy Loss": 1.0})
    reporter.add_stats({"Losses/Value Loss": 2.0})

    reward = reporter.get_stats_summaries("Environment/Cumulative Reward")
    assert reward.mean == pytest.approx(3.0)
    assert reward.std == pytest.approx(1.8708286933869707)  # population std
    assert (reward.num, reward.sum) == (4, 12.0)
    assert reward.aggregated_value == 3.0
    episodes = reporter.get_stats_summaries("Episodes")
    assert episodes.aggregation is StatsAggregation.SUM
    assert episodes.sum == episodes.aggregated_value == 5.0 and episodes.mean == 2.5
    lr = reporter.get_stats_summaries("Policy/Learning Rate")
    assert (lr.mean, lr.num, lr.std, lr.aggregated_value) == (0.05, 1, 0.0, 0.05)
    assert lr.aggregation is StatsAggregation.MOST_RECENT
    assert reporter.get_stats_summaries("Losses/Value Loss").mean == 3.0
    assert reporter.get_stats_summaries("missing") == StatsSummary.empty()

    reporter.write_stats(1000)
    [(category, values, step)] = writer.calls
    assert (category, step) == ("CartPole", 1000)
    assert set(values) == {
        "Environment/Cumulative Reward",
        "Episodes",
        "Policy/Learning Rate",
        "Losses/Value Loss",
        "Losses/Policy Loss",
    }
    assert values["Environment/Cumulative Reward"] == reward
    # A new period starts empty.
    assert reporter.get_stats_summaries("Environment/Cumulative Reward").num == 0
    reporter.write_stats(2000)
    assert writer.calls[1] == ("CartPole", {}, 2000)


def test_conflicting_aggregation_is_an_error_and_properties_reach_writers():
    writer = RecordingWriter()
    reporter = StatsReporter("A", [writer])
    reporter.add_stat("x", 1.0)
    with pytest.raises(ValueError, match="aggregated as MEAN"):
        reporter.set_stat("x", 2.0)
    reporter.add_property("hyperparameters", {"lr": 1})
    assert writer.properties == [("A", "hyperparameters", {"lr": 1})]
    reporter.close()


def test_hyperparameter_table_flattens_mappings_and_settings():
    from trainers.config import TrainerSettings
    from trainers.stats import _flatten

    flat = _flatten(TrainerSettings())
    assert flat["trainer_type"] == "ppo"
    assert flat["hyperparameters.batch_size"] == 1024
    assert flat["reward_signals.extrinsic.gamma"] == 0.99
    assert flat["network_settings.memory"] is None
    assert _flatten({"a": {"b": 1}, "c": {}}) == {"a.b": 1, "c": {}}


def test_reporters_do_not_share_state():
    writer = RecordingWriter()
    a, b = StatsReporter("A", [writer]), StatsReporter("B", [writer])
    a.add_stat("x", 1.0)
    assert b.get_stats_summaries("x").num == 0


# ------------------------------------------------------------------------------ console


def test_console_line_with_reward():
    stream = io.StringIO()
    console = ConsoleWriter(stream=stream, start_time=100.0, clock=lambda: 141.2)
    values = {
        "Environment/Cumulative Reward": summary(187.3, std=21.0, num=7),
        "Is Training": summary(1.0, aggregation=StatsAggregation.MOST_RECENT),
    }
    console.write_stats("CartPole", values, 20000)
    assert stream.getvalue() == (
        "[INFO] CartPole. Step: 20000. Time Elapsed: 41.2 s. Mean Reward: 187.3. "
        "Std of Reward: 21.0. Training.\n"
    )


def test_console_line_without_episode_and_not_training():
    stream = io.StringIO()
    console = ConsoleWriter(stream=stream, start_time=0.0, clock=lambda: 41.24)
    console.write_stats("CartPole", {"Is Training": summary(1.0)}, 20000)
    console.write_stats("CartPole", {"Environment/Cumulative Reward": summary(0.95234, 0.01)}, 1)
    console.write_stats("CartPole", {"Environment/Cumulative Reward": StatsSummary.empty()}, 2)
    assert stream.getvalue().splitlines() == [
        "[INFO] CartPole. Step: 20000. Time Elapsed: 41.2 s. "
        "No episode was completed since last summary. Training.",
        "[INFO] CartPole. Step: 1. Time Elapsed: 41.2 s. Mean Reward: 0.952. "
        "Std of Reward: 0.01. Not Training.",
        "[INFO] CartPole. Step: 2. Time Elapsed: 41.2 s. "
        "No episode was completed since last summary. Not Training.",
    ]
    stream = io.StringIO()
    ConsoleWriter(stream=stream, start_time=0.0, clock=lambda: 1.0).write_stats(
        "B", {"Is Training": summary(0.0, aggregation=StatsAggregation.MOST_RECENT)}, 5
    )
    assert stream.getvalue().endswith(" Not Training.\n")


def test_write_now_writes_at_its_step_and_leaves_the_period_alone():
    """An evaluation's results: written at once, at their step, as MEAN summaries of the
    values given; the console gets its own line; the period's values stay for its summary."""

    class Recording(StatsWriter):
        def __init__(self) -> None:
            self.calls = []

        def write_stats(self, category, values, step):
            self.calls.append(("period", step, dict(values)))

    stream = io.StringIO()
    recording = Recording()
    reporter = StatsReporter("B", [recording, ConsoleWriter(stream=stream, start_time=0.0, clock=lambda: 3.0)])
    reporter.add_stat("Environment/Cumulative Reward", 0.5)
    reporter.write_now({"Environment/Evaluation Reward": [1.0, 0.0], "Environment/Evaluation Episode Length": [5]}, 600)
    reporter.write_now({"Environment/Evaluation Reward": []}, 700)  # nothing to write
    (call,) = recording.calls  # the default write_extra is write_stats
    kind, step, values = call
    assert step == 600 and set(values) == {"Environment/Evaluation Reward", "Environment/Evaluation Episode Length"}
    reward = values["Environment/Evaluation Reward"]
    assert (reward.mean, reward.std, reward.num, reward.aggregation) == (0.5, 0.5, 2, StatsAggregation.MEAN)
    assert stream.getvalue() == (
        "[INFO] B. Step: 600. Time Elapsed: 3.0 s. Evaluation Reward: 0.5 (std 0.5, 2 values). "
        "Evaluation Episode Length: 5.0 (std 0.0, 1 value).\n"
    )
    assert reporter.get_stats_summaries("Environment/Cumulative Reward").num == 1  # the period's, untouched


# -------------------------------------------------------------------------- TensorBoard


def test_tensorboard_events_read_back_and_resume_appends(tmp_path):
    base = str(tmp_path / "run")
    writer = TensorboardWriter(base)
    reporter = StatsReporter("CartPole", [writer])
    hyperparameters = {"trainer_type": "ppo", "hyperparameters": {"beta": 0.005}}
    reporter.add_property("hyperparameters", hyperparameters)
    tags = ["Environment/Cumulative Reward", "Policy/Entropy", "Losses/Value Loss", "Is Training"]
    for step in (100, 200, 300):
        for tag in tags[:-1]:
            reporter.add_stat(tag, step / 100)
            reporter.add_stat(tag, step / 100 + 2)
        reporter.set_stat("Is Training", 1.0)
        reporter.write_stats(step)
    StatsReporter("Other", [writer]).write_stats(100)  # empty period: nothing written
    reporter.close()
    writer.close()  # idempotent

    # The run is resumed from its checkpoint at step 200: a new file in the same directory.
    resumed = TensorboardWriter(base, resume_step=200)
    reporter = StatsReporter("CartPole", [resumed])
    for step in (300, 400):
        reporter.add_stat("Environment/Cumulative Reward", step)
        reporter.write_stats(step)
    reporter.close()

    directory = os.path.join(base, "CartPole")
    assert len([f for f in os.listdir(directory) if f.startswith("events.out.tfevents")]) == 2
    events = load_events(directory)
    assert set(tags) <= set(events["scalar_tags"])
    # Points after the checkpoint (300 of the first run) are superseded by the resumed run.
    assert events["scalars"]["Environment/Cumulative Reward"] == [
        [100, 2.0], [200, 3.0], [300, 300.0], [400, 400.0]
    ]
    assert events["scalars"]["Losses/Value Loss"] == [[100, 2.0], [200, 3.0]]
    assert events["scalars"]["Is Training"] == [[100, 1.0], [200, 1.0]]
    [text] = events["texts"]["Hyperparameters"]
    assert "| trainer_type | ppo |" in text and "| hyperparameters.beta | 0.005 |" in text
    assert not os.path.exists(os.path.join(base, "Other"))


# ---------------------------------------------------------------------------------- CSV


def test_csv_long_format_and_resume_appends(tmp_path):
    base = str(tmp_path / "run")
    writer = CSVWriter(base, clock=lambda: 12.5)
    reporter = StatsReporter("CartPole", [writer])
    reporter.add_stat("Environment/Cumulative Reward", 1.0)
    reporter.add_stat("Environment/Cumulative Reward", 3.0)
    reporter.add_stat("Episodes", 4.0, StatsAggregation.SUM)
    reporter.write_stats(10)
    resumed = StatsReporter("CartPole", [CSVWriter(base, clock=lambda: 20.0)])
    resumed.add_stat("Environment/Cumulative Reward", 5.0)
    resumed.write_stats(20)

    with open(os.path.join(base, "CartPole", "stats.csv"), newline="") as stream:
        rows = list(csv.reader(stream))
    assert rows == [
        ["step", "wall_time", "tag", "mean", "std", "count"],
        ["10", "12.500", "Environment/Cumulative Reward", "2.0", "1.0", "2"],
        ["10", "12.500", "Episodes", "4.0", "0.0", "1"],
        ["20", "20.000", "Environment/Cumulative Reward", "5.0", "0.0", "1"],
    ]


# ---------------------------------------------------------------------- training status


def entry(steps, reward=None):
    return CheckpointEntry(steps, f"results/r/A/checkpoint-{steps}", 1000.0 + steps, reward)


def test_training_status_round_trip(tmp_path):
    path = str(tmp_path / "run_logs" / "training_status.json")
    status = TrainingStatus(tensorflow_version="2.16.1")
    status.set_step("A", 3000)
    status.set_elapsed_seconds("A", 41.5)
    status.set_episodes("A", 12)
    status.add_checkpoint("A", entry(1000, 0.5), keep=5)
    status.add_checkpoint("A", entry(2000, float("nan")), keep=5)
    status.set_final_checkpoint("A", entry(3000, 0.9))
    status.save(path)
    assert os.listdir(tmp_path / "run_logs") == ["training_status.json"]  # no temp file left

    loaded = TrainingStatus.load(path)
    assert loaded.get_step("A") == 3000 and loaded.get_step("B") == 0
    assert loaded.get_elapsed_seconds("A") == 41.5 and loaded.get_episodes("A") == 12
    assert loaded.get_checkpoints("A") == [entry(1000, 0.5), entry(2000, None)]
    assert loaded.get_final_checkpoint("A") == entry(3000, 0.9)
    assert loaded.metadata.stats_format_version == "0.3"
    assert loaded.metadata.trainer_learn_version == "0.1.0"
    assert loaded.metadata.tensorflow_version == "2.16.1"
    data = json.loads(open(path).read())
    assert data["behaviors"]["A"]["checkpoints"][1]["reward"] is None


def test_keep_checkpoints_pruning():
    status = TrainingStatus()
    dropped = [status.add_checkpoint("A", entry(s), keep=2) for s in (1, 2, 3, 4)]
    assert dropped == [[], [], [entry(1)], [entry(2)]]
    assert status.get_checkpoints("A") == [entry(3), entry(4)]
    # Saving the same file again replaces its entry rather than dropping (and deleting) it.
    assert status.add_checkpoint("A", entry(4, 1.0), keep=2) == []
    assert status.get_checkpoints("A") == [entry(3), entry(4, 1.0)]
    assert status.add_checkpoint("A", entry(5), keep=1) == [entry(3), entry(4, 1.0)]
    with pytest.raises(ValueError):
        status.add_checkpoint("A", entry(6), keep=0)


def test_missing_and_corrupt_status_files(tmp_path):
    assert TrainingStatus.load(str(tmp_path / "none.json")).behaviors == {}
    corrupt = tmp_path / "training_status.json"
    corrupt.write_text('{"behaviors": {"A": ')
    with pytest.raises(CheckpointError, match="training_status.json: corrupt training status"):
        TrainingStatus.load(str(corrupt))
    corrupt.write_text('{"behaviors": {"A": {"checkpoints": [{"steps": 1}]}}}')
    with pytest.raises(CheckpointError, match="training_status.json: not a valid training status"):
        TrainingStatus.load(str(corrupt))
    corrupt.write_text("[1, 2]")
    with pytest.raises(CheckpointError, match="not a valid training status"):
        TrainingStatus.load(str(corrupt))


def test_behavior_spec_round_trips_and_older_files_load_without_one(tmp_path):
    from envs.base_env import ActionSpec, BehaviorSpec, ObservationSpec

    spec = BehaviorSpec(
        (ObservationSpec((8,), "ray"), ObservationSpec((84, 64, 3), "camera", "visual")), ActionSpec(2, (3, 2))
    )
    path = str(tmp_path / "run_logs" / "training_status.json")
    status = TrainingStatus()
    status.set_step("A", 10)
    status.set_behavior_spec("A", spec)
    status.set_step("Old", 5)  # a behavior whose spec is unknown: no key, as in older files
    status.save(path)
    data = json.loads(open(path).read())
    assert data["metadata"]["stats_format_version"] == "0.3"  # an added key needs no new version
    assert data["behaviors"]["A"]["behavior_spec"] == {
        "observation_specs": [
            {"shape": [8], "name": "ray", "kind": "vector"},
            {"shape": [84, 64, 3], "name": "camera", "kind": "visual"},
        ],
        "action_spec": {"continuous_size": 2, "discrete_branches": [3, 2]},
    }
    assert "behavior_spec" not in data["behaviors"]["Old"]
    loaded = TrainingStatus.load(path)
    assert loaded.get_behavior_spec("A") == spec
    assert loaded.get_behavior_spec("Old") is None and loaded.get_behavior_spec("Missing") is None
    # A file written before specs were recorded (this format version, without the key).
    del data["behaviors"]["A"]["behavior_spec"]
    with open(path, "w") as f:
        json.dump(data, f)
    old = TrainingStatus.load(path)
    assert old.get_behavior_spec("A") is None and old.get_step("A") == 10


@pytest.mark.parametrize(
    "spec, message",
    [
        ([], "expected observation_specs and action_spec"),
        ({"observation_specs": [{"shape": [4], "name": "obs", "kind": "vector"}]}, "action_spec"),
        (
            {"observation_specs": [{"shape": ["4"], "name": "obs", "kind": "vector"}], "action_spec": {}},
            "observation_specs.shape: expected a list of integers >= 1",
        ),
        (
            {"observation_specs": [{"shape": [4], "name": "obs", "kind": "radar"}], "action_spec": {}},
            "'radar' is not a valid ObservationKind",
        ),
        (
            {"observation_specs": [{"shape": [4, 4], "name": "obs", "kind": "vector"}], "action_spec": {}},
            "needs shape (size,)",
        ),
        (
            {"observation_specs": [], "action_spec": {"continuous_size": True, "discrete_branches": []}},
            "continuous_size: expected an integer >= 0",
        ),
        (
            {"observation_specs": [], "action_spec": {"continuous_size": 0, "discrete_branches": [0]}},
            "discrete_branches: expected a list of integers >= 1",
        ),
    ],
)
def test_a_damaged_behavior_spec_is_one_clear_error(tmp_path, spec, message):
    path = tmp_path / "training_status.json"
    path.write_text(json.dumps({"behaviors": {"A": {"step": 1, "behavior_spec": spec}}}))
    with pytest.raises(CheckpointError, match="training_status.json: not a valid training status") as info:
        TrainingStatus.load(str(path))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_the_best_checkpoint_round_trips_and_older_files_load_without_one(tmp_path):
    path = str(tmp_path / "run_logs" / "training_status.json")
    status = TrainingStatus()
    status.set_step("A", 10)
    status.set_best_checkpoint("A", CheckpointEntry(800, "A/checkpoint-best", 12.5, 0.97))
    status.set_step("Old", 5)
    status.save(path)
    data = json.loads(open(path).read())
    assert data["behaviors"]["A"]["best_checkpoint"] == {
        "steps": 800, "file_path": "A/checkpoint-best", "creation_time": 12.5, "reward": 0.97,
    }
    assert "best_checkpoint" not in data["behaviors"]["Old"]
    loaded = TrainingStatus.load(path)
    assert loaded.get_best_checkpoint("A") == CheckpointEntry(800, "A/checkpoint-best", 12.5, 0.97)
    assert loaded.get_best_checkpoint("Old") is None and loaded.get_best_checkpoint("Missing") is None


def test_settings_and_stats_do_not_import_tensorflow():
    code = (
        "import sys, trainers.config, trainers.stats, trainers.loop.evaluation\n"
        "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
