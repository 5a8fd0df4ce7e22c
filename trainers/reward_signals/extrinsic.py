"""The environment's own reward, scaled by ``strength``."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from trainers.fields import ENVIRONMENT_REWARDS
from trainers.reward_signals.base import RewardSignal


class ExtrinsicRewardSignal(RewardSignal):
    def evaluate(self, fields: Mapping[str, np.ndarray], has_updated: bool) -> np.ndarray:
        return (fields[ENVIRONMENT_REWARDS] * self.strength).astype(np.float32)
