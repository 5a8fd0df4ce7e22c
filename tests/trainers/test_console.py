"""A quiet console: TensorFlow's own start-up lines stay off it, unless ``--debug``.

TensorFlow's libraries log through absl while they load (``Could not find cuda drivers
on your machine``, once per library carrying absl, each after absl's ``WARNING: All log
messages before absl::InitializeLog() ...``), then ``failed call to cuInit`` when the
devices are first listed, whatever ``TF_CPP_MIN_LOG_LEVEL`` says: `trainers.tf` filters
its descriptor 2 while that happens. The end-to-end tests run ``trainer-learn`` in fresh
processes (the test process has long imported TensorFlow).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from trainer_test_utils import config_path

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIMPLE = config_path("Simple_discrete.yaml")

# A line of TensorFlow's C++ logging (absl's format or TensorFlow's older own), absl's
# preamble, and what TensorFlow's start-up says on a machine without a GPU.
NATIVE = re.compile(r"^(?:[IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\]|\d{4}-\d\d-\d\d [\d:.]+: [IWEF] \S+:\d+\])")
NOISE = ("absl::InitializeLog", "cudart_stub", "Could not find cuda drivers", "cuInit", "oneDNN", "cpu_feature_guard",
         "TF_ENABLE_ONEDNN_OPTS")


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "TRAINER_LEARN_TF_LOGS")}
    env["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _tensorflow_lines(text: str) -> list:
    return [line for line in text.splitlines() if NATIVE.match(line) or any(n in line for n in NOISE)]


def test_trainer_learn_prints_our_lines_only(tmp_path) -> None:
    """A run with env workers in other processes (--num-envs=2), as a user starts it: no
    line of TensorFlow's on stderr or stdout; what is printed is ours."""
    done = subprocess.run(
        [sys.executable, "-m", "trainers.learn", SIMPLE, "--run-id=quiet", f"--results-dir={tmp_path}",
         "--max-steps=200", "--num-envs=2"],
        capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert _tensorflow_lines(done.stderr) == [], done.stderr
    assert _tensorflow_lines(done.stdout) == [], done.stdout
    assert done.stderr.strip() == "", done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines and all(line.startswith(("[INFO]", "[WARNING]")) for line in lines), done.stdout


# Runs the CLI's main with --debug in a fresh process, then reports what TensorFlow was
# left to decide (our filter and our default level were not applied).
DEBUG_PROBE = """
import json, os, sys
import trainers.cli.learn
seen = {}
run_training = trainers.cli.learn.run_training

def probe(*args, **kwargs):
    # Before anything imports TensorFlow (tf2onnx's import sets its own level later).
    seen.update(tf_imported="tensorflow" in sys.modules, level=os.environ.get("TF_CPP_MIN_LOG_LEVEL"),
                shown=os.environ.get("TRAINER_LEARN_TF_LOGS"))
    return run_training(*args, **kwargs)

trainers.cli.learn.run_training = probe
seen["code"] = trainers.cli.learn.main(sys.argv[1:])
print(json.dumps(seen))
"""


def test_debug_leaves_tensorflow_its_own_lines(tmp_path) -> None:
    """``--debug``: TensorFlow's log level is its own (ours is not set; the worker
    processes inherit the choice) and its lines reach stderr unfiltered."""
    done = subprocess.run(
        [sys.executable, "-c", DEBUG_PROBE, SIMPLE, "--run-id=loud", f"--results-dir={tmp_path}", "--max-steps=100",
         "--debug"],
        capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    state = json.loads(done.stdout.strip().splitlines()[-1])
    assert state == {"code": 0, "tf_imported": False, "level": None, "shown": "1"}
    # At TensorFlow's own level (INFO) it always has something to say at start-up.
    assert _tensorflow_lines(done.stderr), done.stderr


LEVEL_PROBE = """
import json, os, sys
import trainers
before = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
if sys.argv[1] == "import-tf-first":
    sys.modules.setdefault("tensorflow", type(sys)("tensorflow"))  # as if imported
if sys.argv[1] != "no-call":
    trainers.show_tensorflow_logs()
print(json.dumps([before, os.environ.get("TF_CPP_MIN_LOG_LEVEL"), os.environ.get("TRAINER_LEARN_TF_LOGS")]))
"""


def _levels(mode: str, **env: str) -> list:
    done = subprocess.run(
        [sys.executable, "-c", LEVEL_PROBE, mode], capture_output=True, text=True, env=_env(**env), cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_log_level_defaults_and_who_overrides_them() -> None:
    """Importing the package sets TensorFlow's C++ level to 2 (errors) unless the user
    set one or asked for TensorFlow's lines; ``show_tensorflow_logs`` (``--debug``)
    lifts our default, not the user's, and does nothing once TensorFlow is imported."""
    assert _levels("no-call") == ["2", "2", None]
    assert _levels("no-call", TF_CPP_MIN_LOG_LEVEL="0") == ["0", "0", None]
    assert _levels("no-call", TRAINER_LEARN_TF_LOGS="1") == [None, None, "1"]
    assert _levels("no-call", TRAINER_LEARN_TF_LOGS="0") == ["2", "2", "0"]
    assert _levels("call") == ["2", None, "1"]
    assert _levels("call", TF_CPP_MIN_LOG_LEVEL="1") == ["1", "1", "1"]
    assert _levels("import-tf-first") == ["2", "2", None]


def test_filter_drops_tensorflow_start_up_lines_and_keeps_the_rest(capfd) -> None:
    """What reaches descriptor 2 inside the filter comes out after it, in order, less
    TensorFlow's lines below the level and its no-GPU errors; other errors and text that
    is not TensorFlow's (a traceback, a Python warning) stay."""
    from trainers.tf import _native_line_kept, _native_log_filter

    written = [
        b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
        b"I0000 00:00:1796578296.189096    6300 cudart_stub.cc:31] Could not find cuda drivers on your machine.\n",
        b"2025-09-17 14:44:05.157831: I external/local_xla/xla/tsl/cuda/cudart_stub.cc:32] Could not find cuda\n",
        b"W0000 00:00:1796578296.189096    6300 some.cc:1] a warning\n",
        b"E0000 00:00:1796578299.830311    6300 cuda_platform.cc:52] failed call to cuInit: UNKNOWN ERROR (303)\n",
        b"2025-09-17 14:44:05.176998: E external/cuda_fft.cc:467] Unable to register cuFFT factory: twice\n",
        b"E0000 00:00:1796578299.830311    6300 op_kernel.cc:1] a genuine error\n",
        b"Traceback (most recent call last): not ours to hide\n",
        b"/x/gym.py:3: DeprecationWarning: a Python warning\n",
    ]
    capfd.readouterr()
    with _native_log_filter(lambda line: _native_line_kept(line, 2)):
        for chunk in written:
            os.write(2, chunk)
    err = capfd.readouterr().err
    assert err.splitlines() == [
        "E0000 00:00:1796578299.830311    6300 op_kernel.cc:1] a genuine error",
        "Traceback (most recent call last): not ours to hide",
        "/x/gym.py:3: DeprecationWarning: a Python warning",
    ]
    # The user's level 0: everything is theirs to see.
    with _native_log_filter(lambda line: _native_line_kept(line, 0)):
        for chunk in written:
            os.write(2, chunk)
    assert capfd.readouterr().err.encode() == b"".join(written)
