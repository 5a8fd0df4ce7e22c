"""`allowed_mask`: ML-Agents' action masks (True = unavailable, per branch or side by side)
become the trainer's ``[n, sum(branches)]`` float32 with 1 = allowed, checked against
hand-written cases."""
from __future__ import annotations

import numpy as np
import pytest

from envs.base_env import allowed_mask

BRANCHES = (2, 3)

#: Two agents, branches of 2 and 3 actions, as ML-Agents sends them (True = unavailable).
PER_BRANCH = [
    np.array([[False, True], [False, False]]),
    np.array([[True, False, True], [False, False, True]]),
]
#: The same masks side by side, as a demonstration stores them.
FLAT = np.array([[False, True, True, False, True], [False, False, False, False, True]])
#: What the trainer feeds its policy: 1 = allowed.
EXPECTED = np.array([[1, 0, 0, 1, 0], [1, 1, 1, 1, 0]], np.float32)


def test_per_branch_masks_are_joined_and_flipped() -> None:
    got = allowed_mask(PER_BRANCH, 2, BRANCHES)
    assert got is not None and got.dtype == np.float32 and got.shape == (2, 5)
    np.testing.assert_array_equal(got, EXPECTED)


def test_flat_masks_are_flipped() -> None:
    got = allowed_mask(FLAT, 2, BRANCHES)
    assert got is not None and got.dtype == np.float32
    np.testing.assert_array_equal(got, EXPECTED)


def test_a_tuple_of_branches_reads_like_a_list() -> None:
    np.testing.assert_array_equal(allowed_mask(tuple(PER_BRANCH), 2, BRANCHES), EXPECTED)


def test_no_masks_allow_everything() -> None:
    got = allowed_mask(None, 3, BRANCHES)
    assert got is not None and got.dtype == np.float32
    np.testing.assert_array_equal(got, np.ones((3, 5), np.float32))
    got[0, 0] = 0.0  # a fresh array by default: the caller may write into it
    assert allowed_mask(None, 3, BRANCHES)[0, 0] == 1.0


def test_shared_all_allowed_mask_is_cached_and_read_only() -> None:
    first = allowed_mask(None, 4, BRANCHES, shared=True)
    assert first is allowed_mask(None, 4, BRANCHES, shared=True)
    assert first is not None and not first.flags.writeable
    np.testing.assert_array_equal(first, np.ones((4, 5), np.float32))
    assert allowed_mask(None, 5, BRANCHES, shared=True).shape == (5, 5)  # one per row count
    # Given masks are never shared: they change every step.
    assert allowed_mask(PER_BRANCH, 2, BRANCHES, shared=True).flags.writeable


def test_no_discrete_branches_give_none() -> None:
    assert allowed_mask(None, 2, ()) is None
    assert allowed_mask(None, 2, (), shared=True) is None
    assert allowed_mask(np.zeros((2, 0), bool), 2, ()) is None


def test_zero_rows() -> None:
    empty = [np.zeros((0, 2), bool), np.zeros((0, 3), bool)]
    assert allowed_mask(empty, 0, BRANCHES).shape == (0, 5)
    assert allowed_mask(None, 0, BRANCHES).shape == (0, 5)


def test_single_branch() -> None:
    got = allowed_mask([np.array([[True, False, False]])], 1, (3,))
    np.testing.assert_array_equal(got, [[0.0, 1.0, 1.0]])


def test_flat_masks_of_the_wrong_shape_are_refused() -> None:
    with pytest.raises(ValueError, match=r"\(2, 5\)"):
        allowed_mask(FLAT[:, :4], 2, BRANCHES)
    with pytest.raises(ValueError):
        allowed_mask(FLAT.reshape(-1), 2, BRANCHES)


def test_same_numbers_as_the_three_conversions_it_replaced() -> None:
    """The controller's and the demo player's ``1 - concatenate(masks)`` and the expert
    loader's ``1 - asarray(masks, float32).reshape(n, width)``, on random masks."""
    rng = np.random.default_rng(0)
    branches = (3, 1, 4)
    per_branch = [rng.random((7, b)) < 0.5 for b in branches]
    flat = np.concatenate(per_branch, axis=1)
    before_loop = 1.0 - np.concatenate(per_branch, axis=1).astype(np.float32)
    before_expert = 1.0 - np.asarray(flat, np.float32).reshape(7, sum(branches))
    for got, want in ((allowed_mask(per_branch, 7, branches), before_loop), (allowed_mask(flat, 7, branches), before_expert)):
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_array_equal(got, want)
