"""`trainers.expert`: a demonstration read as GAIL and BC read it, with the file's action
masks (True = unavailable) turned into the trainer's (1 = allowed)."""
from __future__ import annotations

from typing import List, Optional

import numpy as np
import pytest
from trainer_test_utils import make_spec

from envs.demo import DemoWriter
from envs.exceptions import DemoError
from trainers.expert import ExpertData, load_expert_data

SPEC = make_spec(1, (2, 3))

#: One mask per recorded step, branches side by side (True = unavailable).
MASKS = [
    [True, False, False, True, False],
    [False, False, True, True, False],
    [False, True, False, False, False],
    [False, False, False, False, True],
]


def _write(path: str, spec, masks: Optional[List[object]], steps: int = 4) -> str:
    """One agent, ``steps`` records, the last ending the episode: ``steps - 1`` rows (each
    record pairs with the next; a row's mask is the one recorded with its observation)."""
    with DemoWriter(path, "test", "B", spec) as w:
        for t in range(steps):
            w.add_step(
                [np.full(3, t, np.float32)],
                np.full(spec.action_spec.continuous_size, 0.5, np.float32) if spec.action_spec.continuous_size else None,
                np.array([1, 2], np.int32) if spec.action_spec.discrete_branches else None,
                done=(t == steps - 1), agent_id=0,
                action_mask=None if masks is None else masks[t],
            )
    return path


def test_flat_masks_are_flipped(tmp_path) -> None:
    expert = load_expert_data(_write(str(tmp_path / "e.demo"), SPEC, MASKS), "B", SPEC)
    assert isinstance(expert, ExpertData) and len(expert) == 3
    assert expert.action_mask.dtype == np.float32
    np.testing.assert_array_equal(
        expert.action_mask, [[0, 1, 1, 0, 1], [1, 1, 0, 0, 1], [1, 0, 1, 1, 1]]
    )
    np.testing.assert_array_equal(expert.obs[0][:, 0], [0, 1, 2])
    np.testing.assert_array_equal(expert.done, [0, 0, 1])
    assert expert.continuous_action.dtype == np.float32 and expert.discrete_action.dtype == np.int32


def test_per_branch_masks_read_the_same(tmp_path) -> None:
    per_branch = [[np.array(m[:2]), np.array(m[2:])] for m in MASKS]
    flat = load_expert_data(_write(str(tmp_path / "flat.demo"), SPEC, MASKS), "B", SPEC)
    split = load_expert_data(_write(str(tmp_path / "split.demo"), SPEC, per_branch), "B", SPEC)
    np.testing.assert_array_equal(flat.action_mask, split.action_mask)


def test_no_masks_allow_everything(tmp_path) -> None:
    expert = load_expert_data(_write(str(tmp_path / "e.demo"), SPEC, None), "B", SPEC)
    assert expert.action_mask.dtype == np.float32
    np.testing.assert_array_equal(expert.action_mask, np.ones((3, 5), np.float32))


def test_continuous_only_has_an_empty_mask(tmp_path) -> None:
    spec = make_spec(2)
    expert = load_expert_data(_write(str(tmp_path / "e.demo"), spec, None), "B", spec)
    assert expert.action_mask.shape == (3, 0) and expert.action_mask.dtype == np.float32
    assert expert.discrete_action.shape == (3, 0)


def test_a_demo_without_rows_is_refused(tmp_path) -> None:
    path = _write(str(tmp_path / "one.demo"), SPEC, None, steps=1)  # one record: nothing to pair
    with pytest.raises(DemoError, match="holds no steps"):
        load_expert_data(path, "B", SPEC)


def test_a_demo_of_another_spec_is_refused(tmp_path) -> None:
    path = _write(str(tmp_path / "e.demo"), SPEC, None)
    with pytest.raises(DemoError, match="does not match"):
        load_expert_data(path, "B", make_spec(1, (2, 4)))
