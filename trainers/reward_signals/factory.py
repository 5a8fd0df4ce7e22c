"""Config name -> reward signal class."""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Mapping, Type

from trainers.exceptions import ConfigError
from trainers.reward_signals.base import RewardSignal
from trainers.reward_signals.extrinsic import ExtrinsicRewardSignal
from trainers.settings import RewardSignalSettings

if TYPE_CHECKING:
    from trainers.policy import Policy

REGISTRY: Dict[str, Type[RewardSignal]] = {"extrinsic": ExtrinsicRewardSignal}


def create_reward_signals(configs: Mapping[str, RewardSignalSettings], policy: "Policy") -> Dict[str, RewardSignal]:
    """Instantiates every configured signal, in config order."""
    signals: Dict[str, RewardSignal] = {}
    for name, settings in configs.items():
        if name not in REGISTRY:
            raise ConfigError(
                f"reward_signals.{name}: not available in this version (available: {', '.join(REGISTRY)})"
            )
        signals[name] = REGISTRY[name](name, settings, policy)
    return signals
