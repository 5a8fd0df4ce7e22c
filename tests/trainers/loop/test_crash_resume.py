"""A run SIGKILLed at any file event stays resumable: ``--resume`` restores the newest
complete checkpoint on disk, whatever was not yet written beside it (status file, exports,
curves), and skips a half-written one for the previous one.

Each killed run is a real subprocess (``crash_wrapper.py`` kills itself just before its
N-th file event); the resume runs in-process. The default run kills at the three points
that matter most; the slow test kills at every event of a whole run.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Optional, Set

import pytest

WRAPPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crash_wrapper.py")
SUMMARY = 100  # summary_freq = checkpoint_interval
CONFIG = f"""\
behaviors:
  Simple:
    trainer_type: ppo
    hyperparameters: {{batch_size: 16, buffer_size: 64, learning_rate: 5.0e-3, num_epoch: 1}}
    network_settings: {{hidden_units: 8, num_layers: 1}}
    max_steps: 300
    time_horizon: 64
    summary_freq: {SUMMARY}
    checkpoint_interval: {SUMMARY}
    keep_checkpoints: 2
env_settings: {{env_path: builtin:Simple, env_args: {{continuous: 0, discrete: 1}}, seed: 1}}
"""


@pytest.fixture
def config(tmp_path) -> str:
    path = tmp_path / "crash.yaml"
    path.write_text(CONFIG)
    return str(path)


def crash_run(
    results: Path, config: str, run_id: str, log: Path, at: int = 0, match: str = "", nth: int = 1
) -> List[str]:
    """Runs training in a subprocess killed at event ``at`` (or the ``nth`` event matching
    ``match``; neither: runs to the end); returns the events it logged (the last one is
    where it was killed)."""
    env = dict(os.environ, CRASH_ROOT=str(results), CRASH_LOG=str(log), CRASH_AT=str(at), CRASH_MATCH=match,
               CRASH_MATCH_COUNT=str(nth))
    proc = subprocess.run(
        [sys.executable, WRAPPER, config, f"--run-id={run_id}", f"--results-dir={results}"],
        env=env, capture_output=True, text=True, timeout=600,
    )
    killed = at > 0 or bool(match)
    assert proc.returncode == (-9 if killed else 0), proc.stderr[-2000:]
    return [line.split("\t", 1)[1] for line in log.read_text().splitlines()]


def normalized(events: List[str], run_id: str) -> List[str]:
    """Events without what differs between two runs: the run id, temporary file names,
    the event file's time, host and pid."""
    out = []
    for e in events:
        e = re.sub(rf"(^| |-> ){re.escape(run_id)}(/|$| )", r"\1RUN\2", e)
        e = re.sub(r"\.(training_status|export)\.[A-Za-z0-9_]+", r".\1.TMP", e)
        out.append(re.sub(r"tfevents\.\S+", "tfevents", e))
    return out


def complete_checkpoints(events: List[str]) -> Set[int]:
    """Steps whose TensorFlow save returned before the kill."""
    return {int(m.group(1)) for e in events for m in [re.fullmatch(r"checkpoint (\d+) written", e)] if m}


def first_step(out: str) -> Optional[int]:
    match = re.search(r"Step: (\d+)\.", out)
    return int(match.group(1)) if match else None


def check_resume(run_cli, config: str, run_id: str, expected: Optional[int]) -> str:
    """``--resume`` restores checkpoint ``expected`` (None: none is complete, one clear
    error) and trains on to max_steps; returns the console output."""
    code, out, err = run_cli(config, f"--run-id={run_id}", "--resume")
    if expected is None:
        lines = [l for l in err.splitlines() if l.startswith("trainer-learn: error:")]
        assert code == 1 and len(lines) == 1, err
        assert "no checkpoint" in lines[0] or "no such run" in lines[0], lines[0]
        assert "Traceback" not in err
        return out
    assert code == 0, err
    if expected < 300:
        assert first_step(out) == expected + SUMMARY, out  # restarted from `expected`
    with open(os.path.join(run_cli.results, run_id, "run_logs", "training_status.json")) as f:
        status = json.load(f)["behaviors"]["Simple"]
    assert status["step"] == 300
    behavior_dir = os.path.join(run_cli.results, run_id, "Simple")
    assert {"Simple.pb", "Simple-300.pb"} <= set(os.listdir(behavior_dir))  # exports caught up
    for entry in status["checkpoints"]:
        assert os.path.exists(os.path.join(run_cli.results, run_id, "Simple", os.path.basename(entry["file_path"])) + ".index")
    return out


def test_killed_at_the_points_that_matter_resumes_from_the_newest_complete_checkpoint(run_cli, config, tmp_path):
    results = run_cli.results
    # 1. Issue 14's case: killed right after the first checkpoint's files, before the status
    #    file (and run_logs/) and the exports exist.
    events = crash_run(results, config, "after_save", tmp_path / "a.log", match="checkpoint 100 written")
    assert complete_checkpoints(events) == {100}
    assert not (results / "after_save" / "run_logs" / "training_status.json").exists()
    check_resume(run_cli, config, "after_save", 100)
    # 2. Killed while the status of checkpoint 200 is a temporary file: the status still
    #    lists 100 only, checkpoint 200 is complete on disk and wins.
    events = crash_run(results, config, "status", tmp_path / "b.log", match="training_status.json", nth=2)
    assert complete_checkpoints(events) == {100, 200}
    with open(results / "status" / "run_logs" / "training_status.json") as f:
        assert [c["steps"] for c in json.load(f)["behaviors"]["Simple"]["checkpoints"]] == [100]
    check_resume(run_cli, config, "status", 200)
    # 3. A half-written checkpoint (its data cut short by the kill) is skipped for the
    #    previous one, with a warning.
    events = crash_run(results, config, "half", tmp_path / "c.log", match="checkpoint 200 written")
    data = results / "half" / "Simple" / "checkpoint-200.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    out = check_resume(run_cli, config, "half", 100)
    assert "skipping checkpoint" in out and "checkpoint-200" in out


@pytest.mark.slow
def test_killed_at_every_file_event_resumes(run_cli, config, tmp_path):
    """Every file event of a whole run, one kill each (several minutes)."""
    results = run_cli.results
    reference = crash_run(results, config, "reference", tmp_path / "ref.log")
    assert complete_checkpoints(reference) == {100, 200, 300}
    for n in range(1, len(reference) + 1):
        events = crash_run(results, config, f"kill{n}", tmp_path / f"kill{n}.log", at=n)
        assert len(events) == n and normalized(events, f"kill{n}") == normalized(reference[:n], "reference")
        complete = complete_checkpoints(events)
        check_resume(run_cli, config, f"kill{n}", max(complete) if complete else None)
        print(f"killed before event {n}/{len(reference)} ({events[-1]}): resumed from "
              f"{max(complete) if complete else 'nothing (clear error)'}", flush=True)
