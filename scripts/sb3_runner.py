"""Stable-Baselines3's side of ``scripts/benchmark_suite.py``: one training run from a spec.

Not part of the project: run with an interpreter that has stable-baselines3, gymnasium and
torch (a separate virtualenv, see scripts/README_sb3.md); the project never imports it.

    <sb3-python> scripts/sb3_runner.py < spec.json      # prints one JSON line: the result

The spec (JSON on stdin) is written by ``benchmark_suite.sb3_spec`` from our own resolved
config (``config/ppo/zoo_*.yaml``, ``config/sac/zoo_*.yaml``), so the hyperparameters live
in one place, the YAML, and this file only turns the spec's fields into SB3's objects:

- ``algo``: "ppo" or "sac"; ``env_id``, ``env_kwargs``, ``n_envs``, ``seed``,
  ``total_timesteps``, ``threads`` (torch.set_num_threads), ``eval_episodes``, ``eval_seed``;
- ``normalize``: null or {"obs": bool, "reward": bool, "gamma": float} (VecNormalize);
- ``kwargs``: the algorithm's keyword arguments, where a schedule is
  {"schedule": "linear", "start": a, "end": b} (a at the start, b at the end of training)
  and ``policy_kwargs.activation`` names a torch.nn activation class.

The result: ``timesteps``, ``wall`` (seconds from building the env to the end of
``learn()``; imports and the evaluation are not in it), ``save`` (seconds of
``model.save()`` after it), ``episodes`` ([return, length, steps] of
every training episode, in the order they ended: Monitor's figures, the env's own reward, and
the run's env steps when it ended; PPO's ``learn`` finishes its last rollout, so these go
past ``total_timesteps``)
and ``eval`` (the return of each of ``eval_episodes`` deterministic episodes on a fresh env
seeded ``eval_seed``, the observation statistics frozen).
"""
import json
import os
import sys
import tempfile
import time

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO, SAC
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize


def resolve(value):
    """A spec value: a linear schedule becomes SB3's function of progress_remaining (1 at the
    start of training, 0 at the end); anything else is returned as is."""
    if isinstance(value, dict) and value.get("schedule") == "linear":
        start, end = float(value["start"]), float(value["end"])
        return lambda progress_remaining: end + (start - end) * progress_remaining
    return value


class EpisodeRecorder(BaseCallback):
    """Keeps [return, length, env steps so far] of every finished training episode
    (Monitor's info; the model's step count when it ended), unlike ``ep_info_buffer``,
    which keeps only the last 100."""

    def __init__(self) -> None:
        super().__init__()
        self.episodes: list = []

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            episode = info.get("episode")
            if episode is not None:
                self.episodes.append([float(episode["r"]), int(episode["l"]), int(self.num_timesteps)])
        return True


def evaluate(model, spec, train_env) -> list:
    """Returns of ``eval_episodes`` deterministic episodes on a fresh env (one copy)."""
    env = make_vec_env(spec["env_id"], n_envs=1, seed=spec["eval_seed"], env_kwargs=spec.get("env_kwargs") or {})
    if isinstance(train_env, VecNormalize):
        env = VecNormalize(env, training=False, norm_obs=train_env.norm_obs, norm_reward=False,
                           gamma=train_env.gamma)
        if train_env.norm_obs:  # (without it VecNormalize keeps no observation statistics)
            env.obs_rms = train_env.obs_rms  # the statistics training ended with, frozen
    returns: list = []
    obs = env.reset()
    while len(returns) < spec["eval_episodes"]:
        action, _ = model.predict(obs, deterministic=True)
        obs, _, dones, infos = env.step(action)
        if dones[0]:
            returns.append(float(infos[0]["episode"]["r"]))  # Monitor's return: unnormalised
    return returns


def run(spec: dict) -> dict:
    if spec.get("threads", 0) > 0:
        torch.set_num_threads(int(spec["threads"]))
    start = time.perf_counter()
    env = make_vec_env(spec["env_id"], n_envs=spec["n_envs"], seed=spec["seed"],
                       env_kwargs=spec.get("env_kwargs") or {})
    norm = spec.get("normalize")
    if norm:
        env = VecNormalize(env, norm_obs=norm["obs"], norm_reward=norm["reward"], gamma=norm["gamma"])
    kwargs = {key: resolve(value) for key, value in spec["kwargs"].items()}
    policy_kwargs = dict(kwargs.pop("policy_kwargs", {}))
    if "activation" in policy_kwargs:
        policy_kwargs["activation_fn"] = getattr(torch.nn, policy_kwargs.pop("activation"))
    algo = {"ppo": PPO, "sac": SAC}[spec["algo"]]
    model = algo("MlpPolicy", env, policy_kwargs=policy_kwargs, device="cpu", seed=spec["seed"], verbose=0, **kwargs)
    recorder = EpisodeRecorder()
    model.learn(total_timesteps=spec["total_timesteps"], callback=recorder)
    wall = time.perf_counter() - start
    with tempfile.TemporaryDirectory(prefix="sb3_save_") as folder:
        start = time.perf_counter()
        model.save(os.path.join(folder, "model"))  # what a user does after learn(): timed apart
        save = time.perf_counter() - start
    returns = evaluate(model, spec, env)
    return {
        "timesteps": int(model.num_timesteps),
        "wall": wall,
        "save": save,
        "episodes": recorder.episodes,
        "eval": returns,
        "versions": {"stable_baselines3": __import__("stable_baselines3").__version__,
                     "torch": torch.__version__, "gymnasium": gym.__version__, "numpy": np.__version__},
    }


def main() -> int:
    spec = json.load(sys.stdin)
    print(json.dumps(run(spec)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
