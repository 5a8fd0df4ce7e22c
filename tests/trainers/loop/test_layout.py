"""Tests for trainers/layout.py: every path of a run folder, spelled as ML-Agents spells it.

ML-Agents writes ``results/<run-id>/configuration.yaml``, ``run_logs/training_status.json``,
``run_logs/timers.json`` and one folder per behavior (keyed by the behavior name without
its ``?team=N``) holding its checkpoints and ``<Behavior>-<step>.onnx``; users' scripts and
TensorBoard set-ups rely on these names, so they are pinned here literally.
"""

import dataclasses
import os
import subprocess
import sys

import pytest

from trainers.layout import (
    CHECKPOINT_PATTERN,
    CONFIGURATION_FILE,
    REPLAY_BUFFER_FILE,
    RUN_LOGS_DIR,
    STATS_FILE,
    TIMERS_FILE,
    TRAINING_STATUS_FILE,
    RunLayout,
    behavior_dir_name,
    best_checkpoint_name,
    best_model_stem,
    checkpoint_name,
    checkpoint_step,
    model_file_name,
)

RUN = os.path.join("results", "run1")


def test_file_names_are_ml_agents_names():
    assert RUN_LOGS_DIR == "run_logs"
    assert TRAINING_STATUS_FILE == "training_status.json"
    assert TIMERS_FILE == "timers.json"
    assert CONFIGURATION_FILE == "configuration.yaml"
    assert STATS_FILE == "stats.csv"
    assert REPLAY_BUFFER_FILE == "replay_buffer.npz"
    assert CHECKPOINT_PATTERN == r"checkpoint-(\d+)"


def test_run_level_paths():
    layout = RunLayout(RUN)
    assert layout.run_dir == RUN
    assert layout.run_logs == "results/run1/run_logs"
    assert layout.training_status == "results/run1/run_logs/training_status.json"
    assert layout.timers == "results/run1/run_logs/timers.json"
    assert layout.configuration == "results/run1/configuration.yaml"
    assert layout.evaluation_logs == "results/run1/run_logs/evaluation"


@pytest.mark.parametrize(
    "behavior, folder",
    [("3DBall", "3DBall"), ("CartPole-v1", "CartPole-v1"), ("ALE/Pong-v5", "ALE_Pong-v5"), ("a/b/c", "a_b_c")],
)
def test_behavior_paths(behavior, folder):
    layout = RunLayout(RUN)
    assert behavior_dir_name(behavior) == folder
    assert layout.behavior_dir(behavior) == f"results/run1/{folder}"
    assert layout.checkpoint_prefix(behavior, 2000) == f"results/run1/{folder}/checkpoint-2000"
    assert layout.exported(behavior, 2000, "onnx") == f"results/run1/{folder}/{folder}-2000.onnx"
    assert layout.exported(behavior, 2000, "pb") == f"results/run1/{folder}/{folder}-2000.pb"
    assert layout.final_model(behavior, "onnx") == f"results/run1/{folder}/{folder}.onnx"
    assert layout.final_model(behavior, "pb") == f"results/run1/{folder}/{folder}.pb"
    assert layout.stats_csv(behavior) == f"results/run1/{folder}/stats.csv"
    assert layout.replay_buffer(behavior) == f"results/run1/{folder}/replay_buffer.npz"
    # The best evaluation's files (``evaluation:``), beside the numbered ones.
    assert layout.best_checkpoint(behavior) == f"results/run1/{folder}/checkpoint-best"
    assert layout.best_model(behavior, "onnx") == f"results/run1/{folder}/{folder}-best.onnx"
    assert layout.best_model(behavior, "pb") == f"results/run1/{folder}/{folder}-best.pb"
    assert best_model_stem(behavior) == f"{folder}-best"
    assert RunLayout.run_relative(behavior, "/elsewhere/x/checkpoint-7") == f"{folder}/checkpoint-7"
    # A status entry names its checkpoint wherever training ran; it resolves inside this run.
    assert layout.in_run(behavior, "/old/place/run1/X/checkpoint-7") == f"results/run1/{folder}/checkpoint-7"


def test_checkpoint_names_parse_back():
    assert checkpoint_name(0) == "checkpoint-0"
    assert checkpoint_name(500000) == "checkpoint-500000"
    assert checkpoint_step("checkpoint-500000") == 500000
    # TensorFlow's temporary folders, the files of a checkpoint and other names are no prefix.
    # Nor is the best evaluation's checkpoint: resuming and pruning never take it for one.
    assert best_checkpoint_name() == "checkpoint-best"
    for name in ("checkpoint-5_temp", "checkpoint-5.index", "checkpoint-", "checkpoint", "x-checkpoint-5", "Simple.pb",
                 "checkpoint-best"):
        assert checkpoint_step(name) is None, name


def test_model_file_names():
    assert model_file_name("Simple", "onnx") == "Simple.onnx"
    assert model_file_name("Simple", "pb", 200) == "Simple-200.pb"
    assert model_file_name("Simple", "onnx", 0) == "Simple-0.onnx"


def test_checkpoint_index_glob_escapes_the_folder(tmp_path):
    run = tmp_path / "run[1]"
    folder = run / "B"
    folder.mkdir(parents=True)
    for name in ("checkpoint-10.index", "checkpoint-20.index", "checkpoint-20.data-00000-of-00001", "other.index"):
        (folder / name).write_text("")
    (tmp_path / "run1" / "B").mkdir(parents=True)
    (tmp_path / "run1" / "B" / "checkpoint-30.index").write_text("")  # matched by "run[1]" unescaped
    import glob

    found = sorted(os.path.basename(p) for p in glob.glob(RunLayout(str(run)).checkpoint_index_glob("B")))
    assert found == ["checkpoint-10.index", "checkpoint-20.index"]


def test_of_checkpoint_is_the_folder_above_the_behavior_folder(tmp_path):
    prefix = os.path.join(str(tmp_path), "results", "r", "Simple", "checkpoint-200")
    assert RunLayout.of_checkpoint(prefix) == RunLayout(os.path.join(str(tmp_path), "results", "r"))
    # Relative prefixes are made absolute (what trainer-export prints and checks).
    assert os.path.isabs(RunLayout.of_checkpoint(os.path.join("r", "B", "checkpoint-1")).run_dir)


def test_layout_is_frozen_and_a_value():
    layout = RunLayout(RUN)
    with pytest.raises(dataclasses.FrozenInstanceError):
        layout.run_dir = "other"  # type: ignore[misc]
    assert layout == RunLayout(RUN) and hash(layout) == hash(RunLayout(RUN))


def test_old_import_paths_still_work():
    from trainers.sac.trainer import REPLAY_FILE
    from trainers.layout import behavior_dir_name as from_stats
    from trainers.layout import behavior_dir_name as from_reporter

    assert from_stats is behavior_dir_name and from_reporter is behavior_dir_name
    assert REPLAY_FILE == REPLAY_BUFFER_FILE


def test_layout_imports_nothing_heavy():
    """Every layer (the CLI before TensorFlow is needed, env workers, scripts) imports it."""
    code = (
        "import sys, trainers.layout\n"
        "heavy = {'tensorflow', 'numpy', 'envs'} & {m.split('.')[0] for m in sys.modules}\n"
        "assert not heavy, heavy\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
