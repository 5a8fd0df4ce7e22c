"""Graph helpers shared by the learned reward signals (curiosity, GAIL) and BC.

Actions reach a signal in two spaces: the update buffer and trajectories hold the policy's
*raw* continuous sample (unbounded; the environment received ``clip(raw, -3, 3) / 3``),
while `.demo` files hold what the environment received, in [-1, 1]. Signals compare and
encode continuous actions in that environment space, so policy rows and expert rows mean
the same thing; discrete actions become one-hot rows, one block per branch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from envs.base_env import ActionSpec, BehaviorSpec
from trainers.fields import CONTINUOUS_ACTION, DISCRETE_ACTION
from trainers.config import NetworkSettings
from trainers.tf import tf
from trainers.tf.normalizer import Normalizer

if TYPE_CHECKING:
    from trainers.policy import Policy


def signal_network(
    settings: Any, policy: "Policy", tf_era_layers: int, tf_era_normalized: bool = True
) -> Tuple[NetworkSettings, Sequence[Optional[Normalizer]]]:
    """The network of a learned signal (curiosity, GAIL) and the normalisers it reads through.

    Without ``settings.network_settings`` (the TF era): ``encoding_size`` units,
    ``tf_era_layers`` layers, the policy's visual encoder, and the policy's normalisers
    when ``tf_era_normalized`` (else raw observations).
    With it (ML-Agents 2.0): its ``hidden_units``, ``num_layers``, ``vis_encode_type`` and
    activation; ``normalize: true`` reads observations through the policy's running
    normalisation (the one this trainer keeps; the loader warns when the policy has none),
    ``normalize: false`` reads them raw.
    """
    own: Optional[NetworkSettings] = settings.network_settings
    if own is None:
        network = NetworkSettings(
            hidden_units=settings.encoding_size,
            num_layers=tf_era_layers,
            vis_encode_type=policy.settings.network_settings.vis_encode_type,
            activation="swish",
        )
        raw = [None] * len(policy.normalizers)
        return network, policy.normalizers if tf_era_normalized else raw
    network = NetworkSettings(
        hidden_units=own.hidden_units,
        num_layers=own.num_layers,
        vis_encode_type=own.vis_encode_type,
        activation=own.activation,
    )
    normalizers = policy.normalizers if own.normalize else [None] * len(policy.normalizers)
    return network, normalizers


def obs_placeholders(spec: BehaviorSpec, prefix: str) -> List[tf.Tensor]:
    """One float32 placeholder ``[None, *shape_i]`` per observation, named ``<prefix>_<i>``."""
    return [
        tf.placeholder(tf.float32, (None,) + tuple(o.shape), name=f"{prefix}_{i}")
        for i, o in enumerate(spec.observation_specs)
    ]


def action_placeholders(action_spec: ActionSpec, prefix: str) -> Dict[str, tf.Tensor]:
    """``continuous_action`` ``[None, c]`` float32 and/or ``discrete_action`` ``[None, b]`` int32."""
    out: Dict[str, tf.Tensor] = {}
    if action_spec.is_continuous:
        out[CONTINUOUS_ACTION] = tf.placeholder(
            tf.float32, [None, action_spec.continuous_size], name=f"{prefix}_{CONTINUOUS_ACTION}"
        )
    if action_spec.is_discrete:
        out[DISCRETE_ACTION] = tf.placeholder(
            tf.int32, [None, action_spec.discrete_size], name=f"{prefix}_{DISCRETE_ACTION}"
        )
    return out


def one_hot_branches(discrete: tf.Tensor, branches: Sequence[int]) -> tf.Tensor:
    """``[B, b]`` int actions -> ``[B, sum(branches)]`` float32, one one-hot block per branch."""
    return tf.concat([tf.one_hot(discrete[:, i], n, dtype=tf.float32) for i, n in enumerate(branches)], axis=1)


def action_features(
    action_spec: ActionSpec,
    continuous: Optional[tf.Tensor],
    discrete: Optional[tf.Tensor],
    to_env: Optional[Callable[[tf.Tensor], tf.Tensor]],
) -> tf.Tensor:
    """``[B, c + sum(branches)]`` float32: env-space continuous actions, then one-hot branches.

    Args:
        continuous: ``[B, c]``; the policy's raw sample, mapped by ``to_env`` (`Policy.to_env`:
            ``clip(a, -c, c) / c`` with PPO's ``action_clip``, or SAC's tanh), or with
            ``to_env`` None already in environment space (demo actions).
        discrete: ``[B, b]`` int32.
    """
    parts = []
    if action_spec.is_continuous:
        assert continuous is not None
        if to_env is not None:
            continuous = to_env(continuous)
        parts.append(continuous)
    if action_spec.is_discrete:
        assert discrete is not None
        parts.append(one_hot_branches(discrete, action_spec.discrete_branches))
    return parts[0] if len(parts) == 1 else tf.concat(parts, axis=1)
