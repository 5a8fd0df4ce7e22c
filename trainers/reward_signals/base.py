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

from trainers.settings import RewardSignalSettings
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

    def __init__(self, name: str, settings: RewardSignalSettings, policy: "Policy") -> None:
        self.name = name
        self.settings = settings
        self.policy = policy

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

    # Training graph (signals without a network keep the defaults).
    def optimizer_group(self) -> Optional[OptimizerGroup]:
        return None

    def build_tower(self, shard: Mapping[str, tf.Tensor]) -> Optional[SignalTower]:
        return None

    def update_fields(self) -> Sequence[str]:
        """Buffer fields this signal's tower reads (beyond the policy's)."""
        return ()

    def prepare_update(self, minibatch: Mapping[str, np.ndarray], num_sequences: int) -> FeedDict:
        """Feeds for the signal's own placeholders (pure: nothing run, nothing mutated)."""
        return {}

    @property
    def stats(self) -> Mapping[str, str]:
        """TensorBoard tag -> name in the update's stats dict."""
        return {}

    @abstractmethod
    def evaluate(self, fields: Mapping[str, np.ndarray]) -> np.ndarray:
        """``[T]`` float32 rewards (already scaled by ``strength``) for a trajectory."""
