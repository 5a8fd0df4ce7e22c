"""Graph wiring every optimizer (PPO, SAC) shares: schedules and the reward signals'
part of the one update run (their placeholders, optimizer groups, tower losses and stats,
post-apply ops, feeds).

Moved out of ``ppo/optimizer.py`` when SAC arrived, so both build signals the same way.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Mapping, MutableMapping, Sequence

import numpy as np

from envs.base_env import BehaviorSpec
from trainers.fields import DONE, ENVIRONMENT_REWARDS, next_obs_index
from trainers.reward_signals.base import FeedDict, RewardSignal
from trainers.config import TrainerSettings
from trainers.tf import tf
from trainers.tf.towers import OptimizerGroup, TowerGraph

if TYPE_CHECKING:
    from trainers.policy import Policy


def schedule(initial: float, kind: str, step: tf.Tensor, max_steps: int, final: float) -> tf.Tensor:
    """Constant, or linear decay from ``initial`` to ``final`` over ``max_steps`` steps."""
    if kind == "constant" or max_steps <= 0:
        return tf.constant(initial, tf.float32)
    frac = tf.minimum(tf.cast(step, tf.float32) / float(max_steps), 1.0)
    return (initial - final) * (1.0 - frac) + final


def add_signal_field_placeholders(
    ph: MutableMapping[str, tf.Tensor], signals: Mapping[str, RewardSignal], spec: BehaviorSpec
) -> None:
    """Adds one shared placeholder per field only reward signals read (``next_obs_<i>``,
    ``done``, ``environment_rewards``) that ``ph`` does not have yet."""
    for sig in signals.values():
        for field in sig.update_fields():
            index = next_obs_index(field)
            if index is not None and not sig.uses_next_obs:
                # The PPO trainer stores next observations only for signals that say so.
                raise ValueError(f"reward signal {sig.name}: reads {field!r} but does not set uses_next_obs")
            if field in ph:
                continue
            if index is not None:
                shape = spec.observation_specs[index].shape
                ph[field] = tf.placeholder(tf.float32, (None,) + shape, field)
            elif field in (DONE, ENVIRONMENT_REWARDS):
                ph[field] = tf.placeholder(tf.float32, [None], field)
            else:
                raise ValueError(f"reward signal {sig.name}: unknown update field {field!r}")


class OptimizerBase:
    """What every optimizer keeps: the policy whose graph it builds in, the settings, the
    reward signals, the tower devices and a count of update runs (tests count them)."""

    def __init__(
        self,
        policy: "Policy",
        settings: TrainerSettings,
        signals: Mapping[str, RewardSignal],
        devices: Sequence[str] = ("/cpu:0",),
    ) -> None:
        self.policy = policy
        self.settings = settings
        self.signals = dict(signals)
        self.devices = tuple(devices)
        self.update_runs = 0

    @property
    def needs_next_obs(self) -> bool:
        """Whether a reward signal reads ``next_obs_<i>`` (`RewardSignal.uses_next_obs`): the
        PPO trainer stores those fields only then (SAC's own loss always reads them)."""
        return any(sig.uses_next_obs for sig in self.signals.values())


class SignalWiring:
    """The reward signals' share of an optimizer's tower graph.

    Args:
        signals: name -> signal, in config order.
        groups: the optimizer's own groups; the signals' groups are appended to them.
        placeholders: the optimizer's row placeholders (for key collisions).
    """

    def __init__(
        self, signals: Mapping[str, RewardSignal], groups: List[OptimizerGroup], placeholders: Mapping[str, tf.Tensor]
    ) -> None:
        self.signals = dict(signals)
        # The signals' own row placeholders (GAIL's expert batch), fed by prepare_update.
        self.placeholders: Dict[str, tf.Tensor] = {}
        for sig in self.signals.values():
            for key, p in sig.batch_placeholders().items():
                if key in placeholders or key in self.placeholders:
                    raise ValueError(f"reward signal {sig.name}: placeholder key collision on {key!r}")
                self.placeholders[key] = p
        #: signal name -> the name of its optimizer group (signals with a network).
        self.groups: Dict[str, str] = {}
        for sig in self.signals.values():
            group = sig.optimizer_group()
            if group is not None:
                if any(g.name == group.name for g in groups):
                    raise ValueError(f"optimizer group name collision: {group.name!r}")
                groups.append(group)
                self.groups[sig.name] = group.name

    def build_tower(
        self, shard: Mapping[str, tf.Tensor], losses: Dict[str, tf.Tensor], stats: Dict[str, tf.Tensor]
    ) -> None:
        """Adds every signal's loss (under its group) and its stats (``<name>/<stat>``)."""
        for sig in self.signals.values():
            out = sig.build_tower(shard)
            if out is None:
                continue
            if out.loss is not None:
                losses[self.groups[sig.name]] = out.loss
            for k, t in out.stats.items():
                key = f"{sig.name}/{k}"
                if key in stats:
                    raise ValueError(f"stat name collision: {key}")
                stats[key] = t

    def post_apply_ops(self, towers: TowerGraph) -> Dict[str, List[tf.Operation]]:
        """Group name -> ops run after that group's apply, in the same run (VAIL's beta)."""
        ops: Dict[str, List[tf.Operation]] = {}
        for sig in self.signals.values():
            if sig.name not in self.groups:
                continue
            group = self.groups[sig.name]
            prefix = sig.name + "/"
            own = {k[len(prefix):]: v for k, v in towers.stats.items() if k.startswith(prefix)}
            op = sig.build_post_apply(towers.apply_ops[group], own)
            if op is not None:
                ops.setdefault(group, []).append(op)
        return ops

    def feeds(self, extra_feed: FeedDict) -> List[np.ndarray]:
        """The signals' placeholder values in ``placeholders`` order, from the merged feeds."""
        out = []
        for key, p in self.placeholders.items():
            if p not in extra_feed:
                raise KeyError(f"no feed for reward-signal placeholder {key!r}")
            out.append(extra_feed[p])
        return out


def prepare_signal_feeds(signals: Sequence[RewardSignal], minibatch: Mapping[str, np.ndarray], num_sequences: int) -> FeedDict:
    """Every signal's ``prepare_update`` merged; a placeholder fed twice is an error."""
    feed: FeedDict = {}
    for signal in signals:
        for p, value in signal.prepare_update(minibatch, num_sequences).items():
            if p in feed:
                raise ValueError(f"feed collision on {p.name} from signal {signal.name}")
            feed[p] = value
    return feed
