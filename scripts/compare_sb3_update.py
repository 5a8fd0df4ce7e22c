"""Weight-matched check of PPO's update against Stable-Baselines3's, on a zoo task.

    python scripts/compare_sb3_update.py --sb3-python=/tmp/sb3venv/bin/python
        [--task=CartPole|LunarLander|Pendulum] [--seed=1] [--iterations=3]
        [--adam-epsilon-placement=tf|torch]

The SB3 side (this file, run by ``--sb3-python``; it imports no project code) builds SB3's
PPO from the same spec as ``scripts/benchmark_suite.py`` and runs ``--iterations`` rounds
of ``collect_rollouts`` + ``train()``, saving its weights before and after each round, each
round's rollout buffer (after GAE) and the order ``train()`` drew each epoch's minibatches
in (``RolloutBuffer.get``'s permutation, recorded). Our side builds the PPO trainer from
the task's resolved ``config/ppo/zoo_<task>.yaml``, loads SB3's initial weights, feeds each
SB3 rollout to ``PPOTrainer.update`` (SB3's observations, actions, log-probabilities,
advantages, returns and values, shuffled in SB3's orders) and prints, per round and
variable, the largest difference between our weights and SB3's after the round against
the largest move SB3's update made. With SB3's initial weights, the mapping is checked
first: our log-probabilities of SB3's actions must equal SB3's.

``--adam-epsilon-placement`` overrides the config's (``torch`` in the zoo configs, with which
the updates agree to ~1e-5 of a move; with ``tf``, TF1's placement and our default, the
first update moves the policy ~10x less than SB3's: README, Benchmarks, "Adam's epsilon").

Tasks: PPO with discrete actions or one continuous action (gSDE included: SB3's matrix of
log stds is ours), a 2-layer MLP and no observation or reward normalisation: CartPole,
LunarLander, Pendulum. Others are refused with one line.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Tuple

import numpy as np

# SB3 parameter name -> ours, for SB3's MlpPolicy with separate 2-layer pi and vf nets
# (``action_net``: the discrete logits' layer, or the continuous mean's).
NAMES = {
    "mlp_extractor.policy_net.0": "policy/encoder/body/dense_0",
    "mlp_extractor.policy_net.2": "policy/encoder/body/dense_1",
    "mlp_extractor.value_net.0": "critic/encoder/body/dense_0",
    "mlp_extractor.value_net.2": "critic/encoder/body/dense_1",
    "value_net": "critic/value_extrinsic",
}
ACTION_NET = {"discrete": "policy/discrete/branch_0", "continuous": "policy/continuous/mu"}
# SB3's ``log_std``: gSDE's matrix, [latent, actions] on both sides, or the plain
# Gaussian's vector, [actions].
LOG_STD = {"policy/continuous/sde_log_std": "log_std", "policy/continuous/log_std": "log_std"}
# The suite's PPO tasks with discrete actions or one continuous action (SB3 stores the
# log-probability summed over action dimensions; ours are per dimension).
COMPARED = ("CartPole", "Acrobot", "LunarLander", "Pendulum", "MountainCarContinuous")
BUFFER = ("observations", "actions", "log_probs", "advantages", "returns", "values")


# ------------------------------------------------------------------ SB3's side


def sb3_side(spec_path: str, iterations: int, out: str) -> None:
    """Runs in the SB3 interpreter: the rounds, saved to ``out`` (.npz)."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from sb3_runner import resolve

    spec = json.load(open(spec_path))
    torch.set_num_threads(1)
    env = make_vec_env(spec["env_id"], n_envs=spec["n_envs"], seed=spec["seed"], env_kwargs=spec.get("env_kwargs") or {})
    kwargs = {k: resolve(v) for k, v in spec["kwargs"].items()}
    policy_kwargs = dict(kwargs.pop("policy_kwargs"))
    policy_kwargs["activation_fn"] = getattr(torch.nn, policy_kwargs.pop("activation"))
    model = PPO("MlpPolicy", env, policy_kwargs=policy_kwargs, device="cpu", seed=spec["seed"], **kwargs)
    total = spec["total_timesteps"]
    _, callback = model._setup_learn(total, None)
    callback.on_training_start(locals(), globals())
    space = env.action_space  # Discrete: n actions; Box: -1 times its size
    saved: Dict[str, np.ndarray] = {"n_actions": np.array(getattr(space, "n", -int(np.prod(space.shape))))}

    def weights(prefix: str) -> None:
        for key, value in model.policy.state_dict().items():
            saved[prefix + key] = value.detach().numpy().copy()

    permutation = np.random.permutation
    for it in range(iterations):  # SB3's learn() loop, one round at a time
        weights(f"{it}/before/")
        model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=model.n_steps)
        for name in BUFFER:
            # [n_steps, n_envs, ...] -> [n_envs * n_steps, ...], env-major, the rows that
            # RolloutBuffer.get's shuffled indices point into (its swap_and_flatten)
            value = np.array(getattr(model.rollout_buffer, name))
            saved[f"{it}/{name}"] = value.swapaxes(0, 1).reshape(-1, *value.shape[2:])
        saved[f"{it}/steps"] = np.array(model.num_timesteps)
        model._update_current_progress_remaining(model.num_timesteps, total)
        orders: List[np.ndarray] = []

        def recorded(n: int) -> np.ndarray:  # RolloutBuffer.get's one shuffle per epoch
            order = permutation(n)
            orders.append(order)
            return order

        np.random.permutation = recorded  # type: ignore[assignment]
        try:
            model.train()
        finally:
            np.random.permutation = permutation
        saved[f"{it}/orders"] = np.stack(orders)
        weights(f"{it}/after/")
    np.savez(out, **saved)  # type: ignore[arg-type]


# ------------------------------------------------------------------ our side


class _Replay:
    """Stands in for the trainer's random generator: its minibatch shuffles are SB3's."""

    def __init__(self) -> None:
        self.orders: List[np.ndarray] = []

    def permutation(self, n: int) -> np.ndarray:
        order = self.orders.pop(0)
        assert len(order) == n, f"SB3 shuffled {len(order)} rows, our buffer holds {n}"
        return order


def our_side(settings: Any, saved: Dict[str, np.ndarray], iterations: int) -> List[Tuple[str, float, float]]:
    """Replays SB3's rounds through our trainer; prints and returns (round/variable,
    max |ours - SB3|, max |SB3's move|)."""
    from envs.base_env import ActionSpec, BehaviorSpec, ObservationSpec
    from trainers.fields import (ACTION_MASK, ADVANTAGES, CONTINUOUS_ACTION, DISCRETE_ACTION, LOG_PROBS,
                                 MASKS, RETURNS, VALUE_ESTIMATES, obs_key, signal_key)
    from trainers.ppo.trainer import PPOTrainer
    from trainers.stats import StatsReporter
    from trainers.tf import tf

    obs_size = saved["0/observations"].shape[-1]
    n_actions = int(saved["n_actions"])
    discrete = n_actions > 0
    action_spec = ActionSpec(0, (n_actions,)) if discrete else ActionSpec(-n_actions, ())
    spec = BehaviorSpec((ObservationSpec((obs_size,)),), action_spec)
    trainer = PPOTrainer("B", spec, settings, StatsReporter("B", []), 0)
    policy = trainer.policy
    with policy.graph.as_default():
        variables = {v.op.name: v for v in tf.trainable_variables()}

    names = {v: k for k, v in NAMES.items()}
    names[ACTION_NET["discrete" if discrete else "continuous"]] = "action_net"

    def sb3(prefix: str, ours: str) -> np.ndarray:
        if ours in LOG_STD:
            return saved[prefix + LOG_STD[ours]]
        layer, kind = ours.rsplit("/", 1)
        value = saved[prefix + names[layer] + (".weight" if kind == "kernel" else ".bias")]
        return value.T if value.ndim == 2 else value

    for name, var in variables.items():
        var.load(sb3("0/before/", name), policy.session)
    trainer.rng = _Replay()  # type: ignore[assignment]
    results = []
    for it in range(iterations):
        obs = saved[f"{it}/observations"].reshape(-1, obs_size).astype(np.float32)
        rows = len(obs)
        log_probs = saved[f"{it}/log_probs"].reshape(-1, 1).astype(np.float32)
        if discrete:
            actions = saved[f"{it}/actions"].reshape(-1, 1).astype(np.int32)
            masks = np.ones((rows, n_actions), np.float32)
            action_fields = {DISCRETE_ACTION: actions, ACTION_MASK: masks}
            feed = {policy.discrete: actions, policy.action_masks: masks}
        else:  # SB3's unclipped samples, which its buffer keeps (ours keeps the raw ones too)
            actions = saved[f"{it}/actions"].reshape(-1, -n_actions).astype(np.float32)
            action_fields = {CONTINUOUS_ACTION: actions}
            feed = {policy.raw_continuous: actions}
        if it == 0:
            ours = policy.session.run(policy.log_probs, {policy.obs[0]: obs, **feed})
            print(f"mapping: our log-probabilities of SB3's actions differ by {np.abs(ours - log_probs).max():.1e}")
        fields = {
            obs_key(0): obs, **action_fields, LOG_PROBS: log_probs,
            ADVANTAGES: saved[f"{it}/advantages"].reshape(-1), MASKS: np.ones(rows, np.float32),
            signal_key("extrinsic", RETURNS): saved[f"{it}/returns"].reshape(-1),
            signal_key("extrinsic", VALUE_ESTIMATES): saved[f"{it}/values"].reshape(-1),
        }
        for key, value in fields.items():
            trainer.buffer[key] = np.asarray(value, np.int32 if key == DISCRETE_ACTION else np.float32)
        trainer.step = int(saved[f"{it}/steps"])  # the schedules' progress, as SB3's
        trainer.rng.orders = list(saved[f"{it}/orders"])  # type: ignore[attr-defined]
        trainer.update()
        worst_diff = worst_move = 0.0
        for name, var in variables.items():
            after, before = sb3(f"{it}/after/", name), sb3(f"{it}/before/", name)
            diff = float(np.abs(policy.session.run(var) - after).max())
            move = float(np.abs(after - before).max())
            results.append((f"{it}/{name}", diff, move))
            worst_diff, worst_move = max(worst_diff, diff), max(worst_move, move)
            print(f"round {it} {name:40s} |ours - SB3| {diff:.1e}  SB3 moved {move:.1e}")
        print(f"round {it}: largest difference {worst_diff:.1e}, largest move {worst_move:.1e}")
        if it + 1 < iterations:  # the next round starts from SB3's weights (they may differ slightly)
            for name, var in variables.items():
                var.load(sb3(f"{it + 1}/before/", name), policy.session)
    trainer.close()
    return results


def main(argv: List[str]) -> int:
    if argv[:1] == ["--sb3-side"]:
        sb3_side(argv[1], int(argv[2]), argv[3])
        return 0
    options: Dict[str, str] = {}
    for arg in argv:
        if arg.startswith("--"):
            key, _, value = arg[2:].partition("=")
            options[key] = value or "1"
    python = options.get("sb3-python")
    if python is None:
        print("compare_sb3_update.py: --sb3-python=<interpreter with stable-baselines3> is required", file=sys.stderr)
        return 2
    import benchmark_suite as suite

    task = next((t for t in suite.TASKS if t.name == options.get("task", "CartPole")), None)
    if task is None:
        print(f"compare_sb3_update.py: unknown --task {options.get('task')!r}", file=sys.stderr)
        return 2
    seed, iterations = int(options.get("seed", "1")), int(options.get("iterations", "3"))
    placement = options.get("adam-epsilon-placement")
    if placement not in (None, "tf", "torch"):
        print(f"compare_sb3_update.py: --adam-epsilon-placement: expected tf or torch, got {placement!r}",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="compare_sb3_") as folder:
        run_options = suite.load_task(task, None, seed, folder, 1)
        (settings,) = run_options.behaviors.values()
        if placement is not None:
            settings = dataclasses.replace(settings, hyperparameters=dataclasses.replace(
                settings.hyperparameters, adam_epsilon_placement=placement))
        h, net = settings.hyperparameters, settings.network_settings
        if (settings.trainer_type != "ppo" or net.normalize or h.normalize_reward
                or net.num_layers != 2 or task.name not in COMPARED):
            print(f"compare_sb3_update.py: {task.name}: only PPO with discrete actions or one continuous action, "
                  "a 2-layer MLP and no normalisation is compared (CartPole, LunarLander, Pendulum)", file=sys.stderr)
            return 2
        spec, _ = suite.sb3_spec(run_options, seed, 1)
        spec_path, out = os.path.join(folder, "spec.json"), os.path.join(folder, "sb3.npz")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        done = subprocess.run([python, os.path.abspath(__file__), "--sb3-side", spec_path, str(iterations), out])
        if done.returncode != 0:
            print(f"compare_sb3_update.py: the SB3 side exited {done.returncode}", file=sys.stderr)
            return 1
        saved = dict(np.load(out))
    our_side(settings, saved, iterations)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main(sys.argv[1:]))
