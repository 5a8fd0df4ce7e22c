"""Config name -> reward signal class."""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Mapping, Type

from trainers.exceptions import ConfigError
from trainers.reward_signals.base import RewardSignal
from trainers.reward_signals.curiosity import CuriosityRewardSignal
from trainers.reward_signals.extrinsic import ExtrinsicRewardSignal
from trainers.reward_signals.gail import GAILRewardSignal
from trainers.reward_signals.rnd import RNDRewardSignal
from trainers.config import RewardSignalSettings

if TYPE_CHECKING:
    from trainers.policy import Policy

REGISTRY: Dict[str, Type[RewardSignal]] = {
    "extrinsic": ExtrinsicRewardSignal,
    "curiosity": CuriosityRewardSignal,
    "gail": GAILRewardSignal,
    "rnd": RNDRewardSignal,
}


def create_reward_signals(
    configs: Mapping[str, RewardSignalSettings], policy: "Policy", seed: int = 0
) -> Dict[str, RewardSignal]:
    """Instantiates every configured signal, in config order, inside ``policy.graph``.

    Args:
        seed: seeds the signals' host-side draws (signal ``k`` in config order gets
            ``seed + k``).
    """
    signals: Dict[str, RewardSignal] = {}
    for k, (name, settings) in enumerate(configs.items()):
        if name not in REGISTRY:
            raise ConfigError(
                f"reward_signals.{name}: not available in this version (available: {', '.join(REGISTRY)})"
            )
        signals[name] = REGISTRY[name](name, settings, policy, seed + k)
    return signals
