"""GAE / returns against closed forms, and the buffer's minibatching."""
import numpy as np
import pytest

from trainers.buffer import AgentBuffer, discount_rewards, get_gae, pad_front


def test_discounted_returns_closed_form():
    r = np.array([1.0, 2.0, 3.0], np.float32)
    g = 0.9
    expected = [1 + g * 2 + g * g * 3 + g**3 * 10, 2 + g * 3 + g * g * 10, 3 + g * 10]
    np.testing.assert_allclose(discount_rewards(r, g, value_next=10.0), expected, rtol=1e-6)
    # Terminal: no bootstrap.
    np.testing.assert_allclose(discount_rewards(r, g), [1 + g * 2 + g * g * 3, 2 + g * 3, 3], rtol=1e-6)


@pytest.mark.parametrize("lambd", [0.0, 0.95, 1.0])
def test_gae_closed_form(lambd):
    rng = np.random.default_rng(0)
    r = rng.normal(size=6).astype(np.float32)
    v = rng.normal(size=6).astype(np.float32)
    gamma, v_next = 0.97, 0.5
    vv = np.append(v, v_next).astype(np.float64)
    deltas = r + gamma * vv[1:] - vv[:-1]
    expected = [sum((gamma * lambd) ** k * deltas[t + k] for k in range(6 - t)) for t in range(6)]
    np.testing.assert_allclose(get_gae(r, v, v_next, gamma, lambd), expected, rtol=1e-5, atol=1e-6)


def test_gae_lambda_one_is_return_minus_value():
    r = np.array([0.0, 0.0, 1.0], np.float32)
    v = np.array([0.2, 0.4, 0.6], np.float32)
    # Interrupted episode: bootstrap from V(s_T) = 0.8; lambda = 1 gives Monte-Carlo advantage.
    adv = get_gae(r, v, 0.8, 0.9, 1.0)
    np.testing.assert_allclose(adv, discount_rewards(r, 0.9, 0.8) - v, rtol=1e-5)
    # Truly terminal: the same trajectory without bootstrap differs by gamma^k * 0.8.
    adv_term = get_gae(r, v, 0.0, 0.9, 1.0)
    np.testing.assert_allclose(adv - adv_term, 0.8 * 0.9 ** np.array([3, 2, 1]), rtol=1e-5)


def test_pad_front_to_sequence_multiple():
    a = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(pad_front(a, 4), [0, 0, 0, 0, 1, 2, 3, 4])
    assert pad_front(a, 5) is a


def test_minibatches_cover_buffer_and_keep_sequences_whole():
    buf = AgentBuffer()
    buf.add_fields({"x": np.arange(10, dtype=np.float32), "y": np.arange(10) * 2})
    buf.add_fields({"x": np.arange(10, 20, dtype=np.float32), "y": np.arange(10, 20) * 2})
    assert buf.num_experiences == 20
    rng = np.random.default_rng(1)
    batches = list(buf.minibatches(6, rng))
    assert len(batches) == 3 and all(len(b["x"]) == 6 for b in batches)
    seen = np.concatenate([b["x"] for b in batches])
    assert len(set(seen.tolist())) == 18
    for b in batches:
        np.testing.assert_array_equal(b["y"], b["x"] * 2)
    seq = list(buf.minibatches(8, rng, sequence_length=4))
    assert len(seq) == 2
    for b in seq:
        starts = b["x"][::4]
        assert np.all(starts % 4 == 0)
        np.testing.assert_array_equal(b["x"].reshape(-1, 4) - starts[:, None], np.tile(np.arange(4), (2, 1)))


def test_minibatches_are_the_seeded_permutation_and_never_alias_the_buffer():
    """Each pass gathers its rows once and slices minibatches from them: the minibatches are
    the seeded permutation's consecutive groups (whole sequences), and writing into one
    leaves the buffer as it was."""
    buf = AgentBuffer()
    x = np.arange(40, dtype=np.float32)
    buf.add_fields({"x": x.copy()})
    order = np.random.default_rng(3).permutation(10)  # 10 sequences of 4
    batches = list(buf.minibatches(12, np.random.default_rng(3), sequence_length=4))
    assert len(batches) == 3  # 3 sequences each; the 10th sequence is left out
    for i, b in enumerate(batches):
        expected = (order[3 * i : 3 * i + 3, None] * 4 + np.arange(4)).reshape(-1)
        np.testing.assert_array_equal(b["x"], x[expected])
        b["x"][:] = -1.0
    np.testing.assert_array_equal(buf["x"], x)
