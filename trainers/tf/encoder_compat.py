"""Which ResNet a checkpoint holds, so that runs written before ``resnet`` became Release
22's keep resuming.

``vis_encode_type: resnet`` built the TF-era ML-Agents ResNet until it became R22's; that
one is now ``resnet_tf``. The two have different variables (``res_<j>`` / ``block_<j>``
blocks, and a different first dense layer after the CNN), so restoring an old checkpoint
into the new graph fails. A run that restores weights (``--resume``, ``--inference``,
``--initialize-from``, ``init_path``) therefore reads the checkpoint's variable names
first (`tf.train.list_variables`: the index only, no tensor data) and builds ``resnet_tf``
where they are the old ResNet's.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from trainers.config import NetworkSettings, TrainerSettings
from trainers.tf import tf
from trainers.tf.encoders import RESNET_TF_VARIABLE


def checkpoint_variable_names(prefixes: Sequence[str]) -> Tuple[str, List[str]]:
    """``(prefix, variable names)`` of the first checkpoint in ``prefixes`` whose index
    reads (the one a restore will try first, or the next when it is half-written);
    ``("", [])`` when none reads (the restore then reports it)."""
    for prefix in prefixes:
        try:
            return prefix, [name for name, _ in tf.train.list_variables(prefix)]
        except (tf.errors.OpError, ValueError):
            continue
    return "", []


def resnet_tf_settings(settings: TrainerSettings, names: Iterable[str]) -> Tuple[TrainerSettings, List[str]]:
    """``settings`` with ``vis_encode_type: resnet`` -> ``resnet_tf`` in each network whose
    variables in ``names`` (a checkpoint's) are the TF-era ResNet's; and the keys changed.

    A variable's network is its top scope: a reward signal's own ``network_settings`` for
    the signal's scope (its config key), the behavior's ``network_settings`` for every
    other scope (policy, critics, and signals without their own settings, which use the
    policy's encoder). A network already ``resnet_tf``, or not a ResNet, is left alone.
    """
    legacy = {name.split("/", 1)[0] for name in names if RESNET_TF_VARIABLE.search(name)}
    if not legacy:
        return settings, []
    changed: List[str] = []
    signals: Dict[str, Any] = dict(settings.reward_signals)  # the signals with network_settings
    own = {n for n, s in signals.items() if getattr(s, "network_settings", None) is not None}
    for name in sorted(own & legacy):
        network: NetworkSettings = getattr(signals[name], "network_settings")
        if network.vis_encode_type == "resnet":
            signals[name] = replace(signals[name], network_settings=replace(network, vis_encode_type="resnet_tf"))
            changed.append(f"reward_signals.{name}.network_settings.vis_encode_type")
    policy_network = settings.network_settings
    if legacy - own and policy_network.vis_encode_type == "resnet":
        policy_network = replace(policy_network, vis_encode_type="resnet_tf")
        changed.insert(0, "network_settings.vis_encode_type")
    if not changed:
        return settings, []
    return replace(settings, network_settings=policy_network, reward_signals=signals), changed


def settings_for_checkpoint(
    behavior: str, settings: TrainerSettings, prefixes: Sequence[str]
) -> Tuple[TrainerSettings, Optional[str]]:
    """The settings to build ``behavior`` with so that the checkpoint it will restore (the
    first of ``prefixes`` that reads) fits, and the one line to print when they differ from
    ``settings`` (None when they do not: ``settings`` itself is returned)."""
    if not prefixes:
        return settings, None
    prefix, names = checkpoint_variable_names(prefixes)
    built, changed = resnet_tf_settings(settings, names)
    if not changed:
        return settings, None
    keys = ", ".join(f"behaviors.{behavior}.{key}" for key in changed)
    return built, (
        f"{prefix}: written with the TF-era ResNet (trainer-learn's resnet before Release 22's); "
        f"building {keys}: resnet_tf"
    )
