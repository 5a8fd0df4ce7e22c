"""The buffer-field vocabulary: the one spelling of every key of a trajectory's fields, the
PPO update buffer (`trainers.buffer.AgentBuffer`), SAC's replay buffer and a minibatch.

Plain strings, no TensorFlow. Each is a ``[T, ...]`` column, ``T`` rows of one trajectory
(or of a buffer, or of a minibatch):

* ``obs_<i>`` (`obs_key`): ``[T, *shape_i]`` float32, the observation a step acted on;
  ``next_obs_<i>`` (`next_obs_key`): the one after it (SAC always; PPO only when a reward
  signal reads them, `RewardSignal.uses_next_obs`);
* `CONTINUOUS_ACTION` ``[T, c]`` (the raw, unclipped sample), `DISCRETE_ACTION`
  ``[T, b]`` int32, `ACTION_MASK` ``[T, sum(branches)]`` float32 with 1 = allowed (the
  trainer's convention; ML-Agents' True = unavailable is turned into it by
  `envs.base_env.allowed_mask`);
* `LOG_PROBS` ``[T, c + b]``: the log-probability of the taken action when it was sampled,
  per continuous dimension and discrete branch (PPO clips each column's ratio);
* `ENVIRONMENT_REWARDS` ``[T]``; `DONE` ``[T]``: 1 on the last step of an ended episode;
  `TERMINAL` ``[T]`` (SAC): 1 only where the state was truly terminal (not a time limit);
* per reward signal ``<s>_rewards``, ``<s>_value_estimates``, ``<s>_returns``,
  ``<s>_advantage`` ``[T]`` (`signal_key` with `REWARDS`, `VALUE_ESTIMATES`, `RETURNS`,
  `ADVANTAGE`); `ADVANTAGES` ``[T]``: their (normalised) sum;
* `MASKS` ``[T]`` float32: 1 for real steps, 0 for LSTM padding;
* recurrent policies: `MEMORY` ``[T, m]``, the actor memory each step acted from,
  `CRITIC_MEMORY` ``[T, m]`` the separate critic's, `PREV_ACTION` ``[T, b]`` (discrete),
  `RESET` ``[T]`` float32: 1 on a trajectory's first step (PPO's packed sequences only,
  ``pack_sequences: true``);
* MA-POCA's groups (trainers/poca/; ``G`` groupmate slots, the buffer's widest group):
  ``group_obs_<i>`` (`group_obs_key`) ``[T, G, *shape_i]`` each mate's observation,
  `GROUP_CONTINUOUS_ACTION` ``[T, G, c]``, `GROUP_DISCRETE_ACTION` ``[T, G, b]`` its
  action, `GROUP_PRESENT` ``[T, G]`` float32 (1 = a mate in that slot, 0 = padding),
  `GROUP_REWARD` ``[T]`` the group's reward, `MATE_REWARDS` ``[T]`` the mates' own rewards
  summed; per signal ``<s>_baseline_estimates`` (`signal_key` with `BASELINE_ESTIMATES`);
* `SAC_NOISE` ``[B, c]``: not stored, drawn per SAC minibatch (the reparameterised
  sample's noise, fed so that N towers match one).

Many of these strings are also the names of the update graphs' placeholders (``update/
masks``, ``sac_update/obs_0``, ...), so a spelling changed here renames those ops. The
names of the tensors that leave the graph (inference inputs and outputs, the exported
model's) are `trainers.tf.names`', even where the two coincide (``log_probs``,
``prev_action``): the exported contract must not move when a buffer key does.
"""
from __future__ import annotations

from typing import Optional

#: Prefix of the observation fields ``obs_<i>`` (also the evaluation placeholders' prefix).
OBS = "obs"
#: Prefix of the next-observation fields ``next_obs_<i>``.
NEXT_OBS = "next_obs"

CONTINUOUS_ACTION = "continuous_action"
DISCRETE_ACTION = "discrete_action"
#: Both action fields, continuous first (the order signals feed them in).
ACTIONS = (CONTINUOUS_ACTION, DISCRETE_ACTION)
ACTION_MASK = "action_mask"
LOG_PROBS = "log_probs"
ENVIRONMENT_REWARDS = "environment_rewards"
DONE = "done"
TERMINAL = "terminal"
ADVANTAGES = "advantages"
MASKS = "masks"
MEMORY = "memory"
CRITIC_MEMORY = "critic_memory"
#: MA-POCA's baseline memory ``[T, m]`` (recurrent), as `CRITIC_MEMORY` for its baseline.
BASELINE_MEMORY = "baseline_memory"
PREV_ACTION = "prev_action"
RESET = "reset"
SAC_NOISE = "sac_noise"
#: Prefix of MA-POCA's groupmate observation fields ``group_obs_<i>``.
GROUP_OBS = "group_obs"
GROUP_CONTINUOUS_ACTION = "group_continuous_action"
GROUP_DISCRETE_ACTION = "group_discrete_action"
GROUP_PRESENT = "group_present"
GROUP_REWARD = "group_reward"
MATE_REWARDS = "mate_rewards"

# The per-signal kinds of `signal_key`.
REWARDS = "rewards"
VALUE_ESTIMATES = "value_estimates"
RETURNS = "returns"
ADVANTAGE = "advantage"
#: MA-POCA's counterfactual baseline per signal.
BASELINE_ESTIMATES = "baseline_estimates"


def obs_key(index: int) -> str:
    """``obs_<index>``: the field of the ``index``-th observation, ``[T, *shape]``."""
    return f"{OBS}_{index}"


def next_obs_key(index: int) -> str:
    """``next_obs_<index>``: the ``index``-th observation after each step, ``[T, *shape]``."""
    return f"{NEXT_OBS}_{index}"


def group_obs_key(index: int) -> str:
    """``group_obs_<index>``: the groupmates' ``index``-th observations, ``[T, G, *shape]``."""
    return f"{GROUP_OBS}_{index}"


def is_obs_key(key: str) -> bool:
    """Whether ``key`` is an ``obs_<i>`` field (not ``next_obs_<i>``)."""
    return key.startswith(OBS + "_")


def next_obs_index(key: str) -> Optional[int]:
    """``i`` for a ``next_obs_<i>`` field, None for any other key."""
    prefix = NEXT_OBS + "_"
    if not key.startswith(prefix) or not key[len(prefix):].isdigit():
        return None
    return int(key[len(prefix):])


def signal_key(signal: str, kind: str) -> str:
    """``<signal>_<kind>``: a reward signal's ``[T]`` column, ``kind`` one of `REWARDS`,
    `VALUE_ESTIMATES`, `RETURNS`, `ADVANTAGE` (``extrinsic_returns``, ...)."""
    return f"{signal}_{kind}"
