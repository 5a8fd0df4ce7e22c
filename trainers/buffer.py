"""Experience storage: GAE and returns, the update buffer, sequence packing, minibatches.

Plain numpy: no TensorFlow here. Field names used across the trainer (spelled once, in
`trainers.fields`):

* ``obs_<i>``: ``[T, *shape]`` float32 observations;
* ``continuous_action`` ``[T, c]`` (raw, unclipped sample), ``discrete_action`` ``[T, b]``;
* ``action_mask`` ``[T, sum(branches)]`` float32, 1 = allowed;
* ``log_probs`` ``[T, c + b]``: log-probability of the taken action when it was sampled, per
  continuous dimension and discrete branch;
* ``environment_rewards`` ``[T]``, ``done`` ``[T]``;
* per reward signal ``<s>_rewards``, ``<s>_value_estimates``, ``<s>_returns``,
  ``<s>_advantage`` ``[T]``; ``advantages`` ``[T]``: the (normalised) sum;
* ``masks`` ``[T]`` float32: 1 for real steps, 0 for LSTM padding;
* recurrent policies: ``memory`` ``[T, m]`` the actor memory each step acted from,
  ``critic_memory`` ``[T, m]`` the critic's (seed 2), ``prev_action`` ``[T, b]`` (discrete),
  ``reset`` ``[T]`` float32: 1 on a trajectory's first step.

**Sequences** (recurrent policies), two layouts of the PPO buffer:

* padded (the default, ML-Agents' ``resequence_and_append``): `pad_trajectory_end` pads
  each trajectory at its end to whole sequences of ``sequence_length`` rows (``masks``
  0), so every sequence holds the steps of one trajectory and starts at its first step
  or at a multiple of ``sequence_length`` after it; the unroll starts each sequence from
  the stored memory of its first row. ``buffer_size`` and ``batch_size`` count the
  padding rows, as in ML-Agents: with 5-step episodes and sequences of 64, a minibatch
  of 64 rows is one episode.
* packed (``pack_sequences: true``): trajectories are appended back to back and cut into
  sequences only at update time, where `AgentBuffer.pad_to_sequences` pads the buffer's
  *last* sequence. A sequence may so hold the end of one trajectory and the start of
  others; the unroll starts each sequence, and each trajectory inside one (``reset`` 1),
  from the stored memory of that row. Fewer rows to compute, but fewer, larger
  minibatches per step collected (README, "Memory (LSTM)").

Either way each row's stored memory is the one its step acted from, so the update
recomputes what was sampled. `pad_trajectory` (left padding, per episode) is what BC's
demo sequences use.
"""
from __future__ import annotations

from typing import Dict, Iterator, List, Mapping, Optional

import numpy as np

from trainers.fields import ACTION_MASK, CRITIC_MEMORY, MEMORY, RESET


def discount_rewards(rewards: np.ndarray, gamma: float, value_next: float = 0.0) -> np.ndarray:
    """Discounted returns ``G_t = r_t + gamma G_{t+1}``, ``G_T = value_next``.

    Args:
        rewards: ``[T]`` rewards.
        gamma: discount.
        value_next: bootstrap value of the state after the last step (0 if terminal).
    Returns:
        ``[T]`` float32 returns.
    """
    # Python floats (float64) over lists: indexing numpy arrays element by element costs
    # several times more, and trajectories are often a few steps long.
    r = np.asarray(rewards, np.float64).tolist()
    returns = [0.0] * len(r)
    running = float(value_next)
    for t in range(len(r) - 1, -1, -1):
        running = r[t] + gamma * running
        returns[t] = running
    return np.array(returns, np.float32)


def normalized(values: np.ndarray, valid: np.ndarray, epsilon: float, ddof: int = 0) -> np.ndarray:
    """``(x - mean) / (std + epsilon)`` over the ``valid`` rows of ``values`` ``[T]``; 0 in
    the others (LSTM padding), float32. The advantages' normalisation. ``ddof`` 1: the
    unbiased std (torch's ``Tensor.std``, Stable-Baselines3's); with one valid row, std 0.

    Called per minibatch with ``advantage_normalization: minibatch``, so the usual case (every
    row valid) takes no boolean indexing and no second pass for the mean (README, "Figures
    behind choices in the code").
    """
    every = bool(valid.all())
    if not every and not valid.any():
        return np.zeros(values.shape, np.float32)
    rows = np.asarray(values if every else values[valid], np.float32)
    mean = rows.mean()
    deviations = rows - mean
    n = rows.size
    std = float(np.sqrt(np.dot(deviations, deviations) / (n - ddof))) if n > ddof else 0.0
    out = ((values - mean) / (std + epsilon)).astype(np.float32, copy=False)
    return out if every else np.where(valid, out, 0.0).astype(np.float32)


def get_gae(
    rewards: np.ndarray, values: np.ndarray, value_next: float, gamma: float, lambd: float
) -> np.ndarray:
    """Generalised advantage estimation (Schulman et al. 2016).

    ``delta_t = r_t + gamma V_{t+1} - V_t`` with ``V_T = value_next``;
    ``A_t = sum_k (gamma lambda)^k delta_{t+k}``.

    Args:
        rewards: ``[T]``; values: ``[T]`` critic estimates; value_next: bootstrap value
        (0 when the episode truly terminated; the critic's estimate of the final
        observation when it was cut by ``time_horizon`` or interrupted by a time limit).
    Returns:
        ``[T]`` float32 advantages.
    """
    # Same float64 arithmetic as the vectorised form, on Python floats (see discount_rewards).
    r = np.asarray(rewards, np.float64).tolist()
    v = np.asarray(values, np.float64).tolist()
    adv = [0.0] * len(r)
    running = 0.0
    v_next = float(value_next)
    decay = gamma * lambd
    for t in range(len(r) - 1, -1, -1):
        running = (r[t] + gamma * v_next - v[t]) + decay * running
        adv[t] = running
        v_next = v[t]
    return np.array(adv, np.float32)


def pad_front(array: np.ndarray, sequence_length: int, value: float = 0.0) -> np.ndarray:
    """Left-pads ``[T, ...]`` to a multiple of ``sequence_length`` rows.

    ML-Agents pads the *first* sequence of a trajectory so every later sequence is whole
    and the last step (where the bootstrap happens) ends a sequence.
    """
    pad = (-len(array)) % sequence_length
    if pad == 0:
        return array
    filler = np.full((pad,) + array.shape[1:], value, dtype=array.dtype)
    return np.concatenate([filler, array], axis=0)


#: Fields padded with their first row (the padding must not change the initial memory).
EDGE_PADDED = (MEMORY, CRITIC_MEMORY)
#: Fields padded with ones (a padded row of an all-zero action mask would be all-masked).
ONE_PADDED = (ACTION_MASK,)


def pad_trajectory(fields: Mapping[str, np.ndarray], sequence_length: int) -> Dict[str, np.ndarray]:
    """Left-pads every ``[T, ...]`` field of one trajectory to whole sequences (`pad_front`).

    Padding rows are zeros with ``masks`` 0, except ``action_mask`` (ones) and the memories
    (the first real row's, so a sequence's first row holds the memory its first real step
    started from).
    """
    out: Dict[str, np.ndarray] = {}
    for key, value in fields.items():
        value = np.asarray(value)
        pad = (-len(value)) % sequence_length
        if pad == 0:
            out[key] = value
        elif key in EDGE_PADDED:
            out[key] = np.concatenate([np.repeat(value[:1], pad, axis=0), value], axis=0)
        else:
            out[key] = pad_front(value, sequence_length, 1.0 if key in ONE_PADDED else 0.0)
    return out


def _tail_padding(key: str, value: np.ndarray, pad: int) -> np.ndarray:
    """``pad`` rows to append after ``value`` ``[T, ...]`` (`AgentBuffer.pad_to_sequences`)."""
    if key in EDGE_PADDED:
        return np.repeat(value[-1:], pad, axis=0)
    fill = 1.0 if key in ONE_PADDED or key == RESET else 0.0
    return np.full((pad,) + value.shape[1:], fill, dtype=value.dtype)


def pad_trajectory_end(fields: Mapping[str, np.ndarray], sequence_length: int) -> Dict[str, np.ndarray]:
    """Pads every ``[T, ...]`` field of one trajectory at its end to whole sequences
    (ML-Agents' update buffer layout: its ``AgentBufferField.get_batch`` pads the last
    sequence after the steps).

    The padding rows are those of `AgentBuffer.pad_to_sequences`: ``masks`` 0, ones in
    ``action_mask``, the last real row's memories, zeros elsewhere. The memories matter
    nowhere (a sequence's memory is its first row's, always real); the ones keep an
    all-masked branch out of the padding.
    """
    out: Dict[str, np.ndarray] = {}
    for key, value in fields.items():
        value = np.asarray(value)
        pad = (-len(value)) % sequence_length
        out[key] = np.concatenate([value, _tail_padding(key, value, pad)], axis=0) if pad else value
    return out


class AgentBuffer:
    """Columns of experience, appended trajectory by trajectory.

    Each field is a list of chunks concatenated lazily, so appending a trajectory costs
    O(fields), not O(buffer).
    """

    def __init__(self) -> None:
        self._chunks: Dict[str, List[np.ndarray]] = {}
        self._cache: Dict[str, np.ndarray] = {}
        self._rows: Dict[str, int] = {}  # rows per field (checked every env step: O(1))

    def add(self, key: str, array: np.ndarray) -> None:
        """Appends ``array`` ``[T, ...]`` to field ``key``."""
        array = np.asarray(array)
        self._chunks.setdefault(key, []).append(array)
        self._rows[key] = self._rows.get(key, 0) + len(array)
        self._cache.pop(key, None)

    def add_fields(self, fields: Mapping[str, np.ndarray]) -> None:
        """Appends a trajectory: every field ``[T, ...]`` with the same ``T``."""
        for key, value in fields.items():
            self.add(key, value)

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._cache:
            chunks = self._chunks[key]
            self._cache[key] = chunks[0] if len(chunks) == 1 else np.concatenate(chunks, axis=0)
            self._chunks[key] = [self._cache[key]]
        return self._cache[key]

    def __setitem__(self, key: str, array: np.ndarray) -> None:
        self._chunks[key] = [np.asarray(array)]
        self._cache[key] = self._chunks[key][0]
        self._rows[key] = len(self._cache[key])

    def __contains__(self, key: str) -> bool:
        return key in self._chunks

    def keys(self) -> List[str]:
        return list(self._chunks)

    @property
    def num_experiences(self) -> int:
        """Rows stored (0 when empty)."""
        return next(iter(self._rows.values()), 0)

    def pad_to_sequences(self, sequence_length: int) -> int:
        """Pads the last sequence of packed trajectories to ``sequence_length`` rows.

        The padding rows have ``masks`` 0 (they weigh nothing in any loss or statistic),
        ``reset`` 1, ones in ``action_mask``, the last row's memories, zeros elsewhere.
        Returns the number of rows added (``< sequence_length``).
        """
        n = self.num_experiences
        pad = (-n) % sequence_length
        if pad:
            for key in self.keys():
                value = self[key]
                self.add(key, _tail_padding(key, value, pad))
        return pad

    def clear(self) -> None:
        self._chunks.clear()
        self._cache.clear()
        self._rows.clear()

    def minibatches(
        self,
        batch_size: int,
        rng: np.random.Generator,
        sequence_length: int = 1,
        keys: Optional[List[str]] = None,
    ) -> Iterator[Dict[str, np.ndarray]]:
        """One shuffled pass: ``num_experiences // batch_size`` full minibatches.

        Whole sequences of ``sequence_length`` rows are shuffled as units, so a sequence
        stays contiguous inside its minibatch (``batch_size`` is rounded down to whole
        sequences, at least one).
        """
        keys = keys or self.keys()
        columns = {k: self[k] for k in keys}
        n = self.num_experiences
        num_seq = n // sequence_length
        seq_per_batch = max(1, batch_size // sequence_length)
        order = rng.permutation(num_seq)
        # The pass's rows in shuffled order, gathered once per column; each minibatch is
        # then a contiguous slice of them. (Gathering every column for each minibatch was
        # most of the Python a CartPole minibatch took.) The same rows in the same order
        # as gathering each minibatch on its own.
        usable = num_seq - num_seq % seq_per_batch
        rows = (order[:usable, None] * sequence_length + np.arange(sequence_length)[None, :]).reshape(-1)
        shuffled = {k: v[rows] for k, v in columns.items()}
        size = seq_per_batch * sequence_length
        for start in range(0, len(rows), size):
            end = start + size
            yield {k: v[start:end] for k, v in shuffled.items()}
