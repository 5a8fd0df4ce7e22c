"""The self-play ghost: a copy of a behavior's actor that plays past snapshots of it.

Under self-play (``self_play:``, `trainers.loop.self_play`) one team learns, acting through
the trainer's actor, while the other teams play a snapshot: the actor's weights at an
earlier step. The ghost is a second copy of the actor in the behavior's graph (``ghost/...``,
built once, beside the policy, through `trainers.policy.build_actor` on the policy's own
input placeholders), and swapping the opponent is **a weight assignment** (one ``sess.run``
of a group of assigns fed from numpy arrays), never a graph rebuild.

A snapshot (`GhostActor.get_weights`) is the actor's weights as numpy arrays: every
variable of ``policy/...`` and the observation normalizers' running statistics
(``normalizer_<i>/count``, ``mean``, ``m2``: float64), in the order of
`GhostActor.variable_names`. With ``threaded: true`` it is read from the acting copy
(``acting/policy/...``), which only changes at the swap after an update, so a snapshot is
never taken from an update half applied. The ghost has normalizers of its own: a snapshot
normalises observations with the statistics it was taken with.

Its variables are local (not saved in checkpoints, not trainable, not exported); the
snapshots themselves are saved beside each checkpoint by `trainers.loop.self_play`.
"""
from __future__ import annotations

from typing import Hashable, List, Optional, Sequence

import numpy as np

from trainers.policy import ACTING_SCOPE, ActionInfo, ActorTensors, Policy, _ActingCopy, build_actor
from trainers.tf import tf
from trainers.tf.normalizer import Normalizer, build_normalizer

GHOST_SCOPE = "ghost"


class GhostActor:
    """An `trainers.policy.Actor` that acts with snapshot weights (see the module docstring).

    Built into ``policy``'s graph before it is finalised (`trainers.trainer.Trainer`
    builds it last, so that no other op's random seed, hence no initial weight, moves).
    Its weights are uninitialised until the first `load_weights`.
    """

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        spec = policy.spec
        network = policy.settings.network_settings

        def build() -> ActorTensors:
            # Normalizers of its own, named as the policy's inside the ghost scope.
            normalizers: List[Optional[Normalizer]] = [
                build_normalizer(o.shape[0], f"normalizer_{i}") if own is not None else None
                for i, (o, own) in enumerate(zip(spec.observation_specs, policy.normalizers))
            ]
            return build_actor(
                policy.obs, policy.action_masks, spec, network, normalizers,
                squashed=policy.squashed, memory_in=policy.memory_in, prev_action=policy.prev_action,
                state_dependent=policy.state_dependent, sde_noise=policy.sde_noise, action_clip=policy.action_clip,
            )

        with policy.graph.as_default():
            self._copy = _ActingCopy(build, GHOST_SCOPE, sync=False)
            prefix = GHOST_SCOPE + "/"
            #: Each snapshot array's variable, as named in the policy (``policy/...``,
            #: ``normalizer_<i>/...``).
            self.variable_names: List[str] = [v.op.name[len(prefix):] for v in self._copy.variables]
            trained = {v.op.name: v for v in tf.global_variables()}
            acting = {v.op.name: v for v in tf.local_variables() if v.op.name.startswith(ACTING_SCOPE + "/")}
            # Threaded: the acting copy's weights (see the module docstring); normalizers are shared.
            self._sources = [acting.get(f"{ACTING_SCOPE}/{n}", trained.get(n)) for n in self.variable_names]
            missing = [n for n, s in zip(self.variable_names, self._sources) if s is None]
            if missing:
                raise ValueError(f"{policy.behavior_name}: the ghost's variables {missing} have no twin in the policy")
            with tf.name_scope(GHOST_SCOPE + "_load"):
                self._inputs = [
                    tf.placeholder(v.dtype.base_dtype, v.shape, name=f"w{i}")
                    for i, v in enumerate(self._copy.variables)
                ]
                self._load_op = tf.group(*[v.assign(x) for v, x in zip(self._copy.variables, self._inputs)])
        self.shapes = [tuple(int(d) for d in v.shape) for v in self._copy.variables]
        self._view = policy.acting_view(self._copy)
        self.loaded = False

    # ----------------------------------------------------------------- weights

    def get_weights(self) -> List[np.ndarray]:
        """A snapshot of the policy's current actor: one array per `variable_names`, in one run."""
        return list(self.policy.session.run(self._sources))

    def load_weights(self, weights: Sequence[np.ndarray]) -> None:
        """Makes ``weights`` (a `get_weights` snapshot) the ghost's, in one run."""
        if len(weights) != len(self._inputs):
            raise ValueError(f"a snapshot of {len(self._inputs)} arrays was expected, got {len(weights)}")
        for name, shape, w in zip(self.variable_names, self.shapes, weights):
            if tuple(np.shape(w)) != shape:
                raise ValueError(f"snapshot array {name}: expected shape {shape}, got {tuple(np.shape(w))}")
        self.policy.session.run(self._load_op, feed_dict=dict(zip(self._inputs, weights)))
        self.loaded = True

    def current_weights(self) -> List[np.ndarray]:
        """The weights the ghost plays now (saved with checkpoints, so a resumed run goes on
        against the same opponent)."""
        return list(self.policy.session.run(self._copy.variables))

    # ----------------------------------------------------------------- Actor

    @property
    def use_recurrent(self) -> bool:
        return self.policy.use_recurrent

    def act(
        self,
        obs: Sequence[np.ndarray],
        action_masks: Optional[np.ndarray] = None,
        deterministic: bool = False,
        agent_keys: Optional[Sequence[Hashable]] = None,
    ) -> ActionInfo:
        """As `trainers.policy.Policy.act` (one ``sess.run`` for N agents), with the snapshot's
        weights and the ghost's own per-agent memories."""
        return self._view.act(obs, action_masks, deterministic, agent_keys)

    def forget_agents(self, keys: Sequence[Hashable]) -> None:
        self._view.forget_agents(keys)

    def sync_acting_weights(self) -> None:
        """No-op: the ghost's weights change only by `load_weights`."""

    def close(self) -> None:
        """No-op: the graph and session are the policy's."""
