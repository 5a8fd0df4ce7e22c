"""scripts/compare_sb3_update.py without Stable-Baselines3: its one-line refusals (the
torch placement of Adam's epsilon it compares with is tested in tests/trainers/test_adam.py)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from script_loader import ROOT

SCRIPT = os.path.join(ROOT, "scripts", "compare_sb3_update.py")


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "--sb3-python=<interpreter with stable-baselines3> is required"),
        (["--sb3-python=python", "--task=Nope"], "unknown --task 'Nope'"),
        (["--sb3-python=python", "--task=Acrobot"], "Acrobot: only PPO with discrete actions"),  # normalize
        (["--sb3-python=python", "--task=MountainCarContinuous"], "MountainCarContinuous: only PPO with"),
        (["--sb3-python=python", "--adam-epsilon-placement=jax"],
         "--adam-epsilon-placement: expected tf or torch, got 'jax'"),
    ],
)
def test_refusals_are_one_line(args, message):
    done = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_replay_hands_out_sb3s_shuffles_in_order():
    import numpy as np
    from script_loader import load_script

    module = load_script("compare_sb3_update")
    replay = module._Replay()
    replay.orders = [np.array([2, 0, 1]), np.array([1, 2, 0])]
    assert replay.permutation(3).tolist() == [2, 0, 1]
    assert replay.permutation(3).tolist() == [1, 2, 0]
    replay.orders = [np.array([0, 1])]
    with pytest.raises(AssertionError, match="SB3 shuffled 2 rows, our buffer holds 3"):
        replay.permutation(3)
