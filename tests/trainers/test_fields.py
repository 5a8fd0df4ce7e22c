"""The buffer-field vocabulary (`trainers.fields`): the spellings (they are also placeholder
op names, so golden runs pin them), and who asks for next observations: the PPO trainer
stores ``next_obs_<i>`` exactly when a reward signal says it reads them."""
from __future__ import annotations

from dataclasses import replace
from typing import Dict, Mapping, Sequence

import numpy as np
import pytest
from trainer_test_utils import make_spec, random_obs, small_settings

from envs.demo import DemoWriter
from trainers import fields
from trainers.optimizer import add_signal_field_placeholders
from trainers.ppo.trainer import PPOTrainer
from trainers.reward_signals.base import RewardSignal
from trainers.config import CuriositySettings, ExtrinsicSettings, GAILSettings
from trainers.stats import StatsReporter
from trainers.tf import tf
from trainers.loop.trajectory import Trajectory

SPEC = make_spec(1, (3,))

#: What a PPO trainer stores per trajectory (feed-forward, extrinsic only), in order.
PPO_FIELDS = [
    "continuous_action", "discrete_action", "action_mask", "environment_rewards", "done", "obs_0",
    "log_probs", "masks", "extrinsic_rewards", "extrinsic_value_estimates", "extrinsic_returns",
    "extrinsic_advantage", "advantages",
]


def test_spellings() -> None:
    assert [fields.obs_key(0), fields.obs_key(12)] == ["obs_0", "obs_12"]
    assert fields.next_obs_key(3) == "next_obs_3"
    kinds = (fields.REWARDS, fields.VALUE_ESTIMATES, fields.RETURNS, fields.ADVANTAGE)
    assert [fields.signal_key("gail", k) for k in kinds] == [
        "gail_rewards", "gail_value_estimates", "gail_returns", "gail_advantage"
    ]
    assert (fields.CONTINUOUS_ACTION, fields.DISCRETE_ACTION, fields.ACTION_MASK) == (
        "continuous_action", "discrete_action", "action_mask"
    )
    assert fields.ACTIONS == ("continuous_action", "discrete_action")
    assert (fields.LOG_PROBS, fields.ENVIRONMENT_REWARDS, fields.DONE, fields.TERMINAL) == (
        "log_probs", "environment_rewards", "done", "terminal"
    )
    assert (fields.ADVANTAGES, fields.MASKS, fields.SAC_NOISE) == ("advantages", "masks", "sac_noise")
    assert (fields.MEMORY, fields.CRITIC_MEMORY, fields.PREV_ACTION, fields.RESET) == (
        "memory", "critic_memory", "prev_action", "reset"
    )


def test_key_parsers() -> None:
    assert fields.is_obs_key("obs_0") and fields.is_obs_key("obs_11")
    assert not fields.is_obs_key("next_obs_0") and not fields.is_obs_key("observation")
    assert fields.next_obs_index("next_obs_0") == 0 and fields.next_obs_index("next_obs_17") == 17
    for key in ("obs_0", "next_obs_", "next_obs_x", "done", "gail_next_obs_0"):
        assert fields.next_obs_index(key) is None


def _trajectory(n: int, rng: np.random.Generator) -> Trajectory:
    return Trajectory(
        agent=(0, 0), obs=random_obs(SPEC, n, rng), next_obs=random_obs(SPEC, 1, rng),
        continuous_action=rng.normal(size=(n, 1)).astype(np.float32),
        discrete_action=rng.integers(0, 3, (n, 1)).astype(np.int32), action_mask=None,
        log_probs=np.full((n, 2), -0.5, np.float32), rewards=rng.normal(size=n).astype(np.float32),
        done=True, interrupted=False,
    )


def _trainer(signals: Mapping[str, object]) -> PPOTrainer:
    settings = replace(small_settings(), reward_signals=dict(signals))
    return PPOTrainer("B", SPEC, settings, StatsReporter("B", []), 0)


def test_ppo_without_a_next_obs_signal_stores_no_next_obs() -> None:
    trainer = _trainer({"extrinsic": ExtrinsicSettings()})
    assert not trainer.optimizer.needs_next_obs
    trainer.process_trajectory(_trajectory(5, np.random.default_rng(0)))
    assert trainer.buffer.keys() == PPO_FIELDS
    # The update graph's placeholders carry the fields' names (golden runs pin op names).
    assert {k: p.op.name for k, p in trainer.optimizer.placeholders.items()} == {
        k: f"update/{k}" for k in trainer.optimizer.placeholders
    }


def test_ppo_with_curiosity_stores_the_next_observations() -> None:
    trainer = _trainer({"extrinsic": ExtrinsicSettings(), "curiosity": CuriositySettings(encoding_size=8)})
    assert trainer.signals["curiosity"].uses_next_obs and not trainer.signals["extrinsic"].uses_next_obs
    assert trainer.optimizer.needs_next_obs
    traj = _trajectory(5, np.random.default_rng(0))
    trainer.process_trajectory(traj)
    keys = trainer.buffer.keys()
    assert keys[: keys.index("masks") + 1] == PPO_FIELDS[: PPO_FIELDS.index("masks") + 1]
    assert keys[keys.index("masks") + 1] == "next_obs_0"  # right after masks, as before
    assert {"curiosity_rewards", "curiosity_returns", "curiosity_advantage"} <= set(keys)
    # Row t's next observation is row t + 1's observation; the last row's is the bootstrap one.
    np.testing.assert_array_equal(
        trainer.buffer["next_obs_0"], np.concatenate([traj.obs[0][1:], traj.next_obs[0]])
    )
    assert trainer.optimizer.placeholders["next_obs_0"].op.name == "update/next_obs_0"


def test_gail_reads_done_but_not_next_obs(tmp_path) -> None:
    path = str(tmp_path / "expert.demo")
    with DemoWriter(path, "test", "B", SPEC) as w:
        for t in range(12):
            w.add_step([np.full(3, 0.5, np.float32)], np.zeros(1, np.float32), np.zeros(1, np.int32),
                       done=(t % 6 == 5), agent_id=0)
    trainer = _trainer({"gail": GAILSettings(demo_path=path, encoding_size=8, use_actions=True)})
    assert not trainer.optimizer.needs_next_obs
    assert "done" in trainer.optimizer.placeholders
    trainer.process_trajectory(_trajectory(5, np.random.default_rng(0)))
    assert not any(k.startswith("next_obs_") for k in trainer.buffer.keys())


class _ReadsNextObs(RewardSignal):
    """A signal whose tower reads ``next_obs_0``, with or without saying so."""

    def __init__(self, says_so: bool) -> None:
        super().__init__("probe", ExtrinsicSettings(), policy=None)  # type: ignore[arg-type]
        self.uses_next_obs = says_so

    def update_fields(self) -> Sequence[str]:
        return (fields.next_obs_key(0),)

    def evaluate(self, fields_: Mapping[str, np.ndarray], has_updated: bool) -> np.ndarray:
        return np.zeros(len(fields_[fields.obs_key(0)]), np.float32)


def test_a_signal_reading_next_obs_must_say_so() -> None:
    with tf.Graph().as_default():
        ph: Dict[str, tf.Tensor] = {}
        with pytest.raises(ValueError, match="uses_next_obs"):
            add_signal_field_placeholders(ph, {"probe": _ReadsNextObs(says_so=False)}, SPEC)
        add_signal_field_placeholders(ph, {"probe": _ReadsNextObs(says_so=True)}, SPEC)
        assert ph["next_obs_0"].op.name == "next_obs_0"
        assert ph["next_obs_0"].shape.as_list() == [None, 3]
