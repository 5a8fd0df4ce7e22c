"""The reward-signal contract.

A signal is a plugin with typed settings and no hidden side effects. Per training tower it
may build a network (``build_tower``) whose loss joins the one update ``sess.run`` as its
own optimizer group; it declares the minibatch fields it needs (``update_fields``), feeds
its own extra placeholders (``prepare_update``, pure), maps TensorBoard tags to update
names (``stats``), and turns a trajectory into rewards (``evaluate``, its own run, before
any update). State such as "has updated" changes in the trainer after the run returns.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Sequence

import numpy as np

from typing import TYPE_CHECKING

from trainers.config import RewardSignalSettings
from trainers.tf import tf
from trainers.tf.towers import OptimizerGroup

if TYPE_CHECKING:
    from trainers.policy import Policy

FeedDict = Dict[tf.Tensor, np.ndarray]


@dataclass(frozen=True)
class SignalTower:
    """A signal's contribution to one tower: its loss (its group) and its statistics."""

    loss: Optional[tf.Tensor]
    stats: Mapping[str, tf.Tensor]


class RewardSignal(ABC):
    """Base class; ``name`` is the config key (``extrinsic``, ``curiosity``, ``gail``)."""

    def __init__(self, name: str, settings: RewardSignalSettings, policy: "Policy", seed: int = 0) -> None:
        self.name = name
        self.settings = settings
        self.policy = policy
        #: Seeds whatever the signal draws on the host (GAIL's expert minibatches).
        self.seed = seed

    @property
    def gamma(self) -> float:
        return self.settings.gamma

    @property
    def strength(self) -> float:
        return self.settings.strength

    @property
    def value_tag(self) -> str:
        """Capitalised name used in TensorBoard tags (``Extrinsic``, ``GAIL``)."""
        return self.name.capitalize() if self.name != "gail" else "GAIL"

    #: Whether value targets stop at a true terminal state (curiosity: no,
    #: docs/ML-AGENTS-FACTS.md#2-algorithm-facts-tf-era).
    use_terminal_states: bool = True

    #: Whether the signal reads the next observations (``next_obs_<i>``, `trainers.fields`)
    #: in `evaluate` and in its tower (curiosity's forward and inverse models). The PPO
    #: trainer stores them only when a signal says so; a signal listing them in
    #: `update_fields` without it is refused when the optimizer is built.
    uses_next_obs: bool = False

    # Training graph (signals without a network keep the defaults). The optimizer calls
    # these inside the policy's graph, in this order: update_fields, batch_placeholders
    # (once), optimizer_group (once), build_tower (once per tower), build_post_apply (once).

    def update_fields(self) -> Sequence[str]:
        """Buffer fields this signal's tower reads beyond the policy's (e.g. ``next_obs_0``,
        ``done``); the optimizer makes one shared placeholder per field."""
        return ()

    def batch_placeholders(self) -> Mapping[str, tf.Tensor]:
        """The signal's own row placeholders (e.g. GAIL's expert minibatch), keyed by a
        name unique to the signal; they are split across towers like buffer fields and fed
        by ``prepare_update``."""
        return {}

    def optimizer_group(self) -> Optional[OptimizerGroup]:
        """The optimizer and variable scopes of the signal's network (None: no network)."""
        return None

    def build_tower(self, shard: Mapping[str, tf.Tensor]) -> Optional[SignalTower]:
        """Loss and stats on one tower's shard (buffer fields + batch placeholders)."""
        return None

    def build_post_apply(self, apply_op: tf.Operation, stats: Mapping[str, tf.Tensor]) -> Optional[tf.Operation]:
        """An op run after the group's averaged gradients are applied, in the same run
        (VAIL's beta update). ``stats`` are the tower-averaged stats of this signal, without
        the ``<name>/`` prefix."""
        return None

    def prepare_update(self, minibatch: Mapping[str, np.ndarray], num_sequences: int) -> FeedDict:
        """Feeds for the signal's own placeholders (pure: nothing run, nothing mutated)."""
        return {}

    @property
    def stats(self) -> Mapping[str, str]:
        """TensorBoard tag -> name in the update's stats dict (``<name>/<stat>``)."""
        return {}

    @abstractmethod
    def evaluate(self, fields: Mapping[str, np.ndarray], has_updated: bool) -> np.ndarray:
        """``[T]`` float32 rewards (already scaled by ``strength``) for a trajectory.

        Args:
            fields: the trajectory's buffer fields (``obs_<i>``, ``next_obs_<i>`` when
                requested, actions, ``done``, ``environment_rewards``), ``[T, ...]``.
            has_updated: whether an update has run (the trainer's state, not the signal's).
        """
