"""`BehaviorGraph`: the one TensorFlow graph of a behavior and the sessions that run it.

The trainer creates it and hands it to the policy, which builds the actor into it; the
optimizer, the reward signals and BC build into the same graph (so one ``sess.run`` per
minibatch updates them all), and `finalize` adds the saver and the initializer, links a
cluster chief and runs the initialization. Inference, value estimates and checkpoints run
in `session`; updates in `update_session`: the same session, or on a cluster the session on
the chief's server (`trainers.tf.cluster`), between `begin_update` and `end_update`.
"""
from __future__ import annotations

import glob
from typing import Optional, Sequence

from envs.base_env import BehaviorSpec, ObservationKind
from trainers.config import TrainerSettings
from trainers.exceptions import CheckpointError, op_error_reason
from trainers.tf import tf
from trainers.tf.cluster import Chief, ClusterLink
from trainers.tf.session import make_session


def runs_inline(settings: TrainerSettings, spec: BehaviorSpec) -> bool:
    """Whether every run of the behavior's session belongs in the caller's thread, where
    `FastCallable`'s AUTO_POOL puts the update of a feed-forward PPO actor and critic on
    vector observations with the environment's reward only; SAC's updates, LSTM's,
    convolutions' and those with reward-signal or BC networks beside run faster on the
    inter-op pool, and a threaded trainer runs inference beside its update."""
    return (
        settings.trainer_type == "ppo"
        and settings.network_settings.memory is None
        and set(settings.reward_signals) <= {"extrinsic"}
        and settings.behavioral_cloning is None
        and not settings.updates_in_thread
        and all(o.kind == ObservationKind.VECTOR for o in spec.observation_specs)
    )


class BehaviorGraph:
    """A behavior's graph (seeded), its step counter, its sessions, saver and cluster link.

    Args:
        settings, spec: the behavior's; they choose the session's executor (`runs_inline`)
            and, for recurrent policies, no Grappler (its pass over the unrolled update
            graph costs seconds).
        seed: the graph-level seed (TF1 derives every random op's seed from it and from
            the number of ops created before that op: graph construction order decides
            the initial weights).
        devices: tower devices the session must be able to place ops on.
        cpu_only: hide GPUs from the session.
    """

    def __init__(
        self,
        settings: TrainerSettings,
        spec: BehaviorSpec,
        seed: int,
        devices: Sequence[str] = ("/cpu:0",),
        cpu_only: bool = False,
    ) -> None:
        self.seed = seed
        self.graph = tf.Graph()
        with self.graph.as_default():
            tf.set_random_seed(seed)
            # The trainer's step, saved with every checkpoint. Its ops draw no random
            # numbers, so where they sit does not move any op-level seed.
            self.global_step = tf.get_variable("global_step", [], tf.int64, tf.zeros_initializer(), trainable=False)
            self._step_ph = tf.placeholder(tf.int64, [], name="set_step")
            self._step_assign = tf.assign(self.global_step, self._step_ph)
        self.session: tf.Session = make_session(
            self.graph,
            devices,
            cpu_only,
            graph_rewrites=settings.network_settings.memory is None,
            inline=runs_inline(settings, spec),
        )
        self.update_session: tf.Session = self.session
        self.cluster: Optional[ClusterLink] = None
        self._saver: Optional[tf.train.Saver] = None

    def finalize(self, chief: Optional[Chief] = None) -> None:
        """Saver and initializer of every variable, the cluster link (``chief``: update runs
        go to its server), then finalises the graph and initialises the variables. Call
        once every module has built its part."""
        with self.graph.as_default():
            self._saver = tf.train.Saver(max_to_keep=None, save_relative_paths=True)
            init_op = tf.global_variables_initializer()
            if chief is not None:
                # Every variable exists, and no session has run the graph yet.
                self.cluster = ClusterLink(self.graph, self.session, chief.target, chief.settings.workers)
                self.update_session = self.cluster.session
        self.graph.finalize()
        self.session.run(init_op)

    # ------------------------------------------------------------------ updates

    def begin_update(self) -> None:
        """Before an update's runs: on a cluster, the local weights go to the update session."""
        if self.cluster is not None:
            self.cluster.push()

    def end_update(self) -> None:
        """After an update's runs: on a cluster, the updated weights come back (a failed
        update raises before this, and the local weights stay those of the last one)."""
        if self.cluster is not None:
            self.cluster.pull()

    # ------------------------------------------------------------------ step and checkpoints

    def set_step(self, step: int) -> None:
        """Writes the trainer's step into the graph (saved with checkpoints)."""
        self.session.run(self._step_assign, {self._step_ph: step})

    def get_step(self) -> int:
        return int(self.session.run(self.global_step))

    def save(self, prefix: str, write_state: bool = True) -> None:
        """Writes every variable to the checkpoint ``prefix``; one line for a disk error.

        ``write_state``: also list it in TensorFlow's ``checkpoint`` file (its latest
        checkpoint); False for a checkpoint kept beside the numbered ones (the best model's)."""
        assert self._saver is not None, "finalize() first"
        try:
            self._saver.save(self.session, prefix, write_meta_graph=False, write_state=write_state)
        except tf.errors.OpError as exc:  # a full disk, a folder made read-only mid-run
            raise CheckpointError(f"{prefix}: cannot write the checkpoint ({op_error_reason(exc)})") from None

    def restore(self, prefix: str) -> None:
        """Reads every variable from the checkpoint ``prefix``; one line if it is missing or
        does not fit this graph."""
        assert self._saver is not None, "finalize() first"
        if not glob.glob(prefix + ".index"):
            raise CheckpointError(f"{prefix}: checkpoint not found")
        try:
            self._saver.restore(self.session, prefix)
        except (tf.errors.OpError, ValueError) as exc:
            raise CheckpointError(f"{prefix}: cannot restore checkpoint ({op_error_reason(exc)})") from None

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.close()
        self.session.close()
