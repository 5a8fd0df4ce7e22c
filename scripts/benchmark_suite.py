"""Learning benchmark: ours beside Stable-Baselines3 on classic Gymnasium tasks, in one run.

Every task trains from its ``config/ppo/zoo_<task>.yaml`` or ``config/sac/zoo_<task>.yaml``:
rl-baselines3-zoo's hyperparameters for it (``hyperparams/ppo.yml``, ``sac.yml``) with
Stable-Baselines3's defaults for the rest (each file's header says what we cannot honour,
e.g. ``ortho_init``). With ``--sb3-python`` the same settings train Stable-Baselines3 too:
``sb3_spec`` turns our *resolved* settings into SB3's arguments (the YAML is the one table),
``scripts/sb3_runner.py`` runs them with that interpreter in a subprocess (torch 1 thread),
and the runs alternate: ours seed 1, SB3 seed 1, ours seed 2, ...

    python scripts/benchmark_suite.py [--sb3-python=/tmp/sb3venv/bin/python]
        [--tasks=CartPole,Acrobot,...] [--seeds=3] [--max-steps=N | Task=N,...]
        [--eval-episodes=10] [--out=runs.json | runs.csv]

Metrics, the same definitions for both trainers (``final_return``, ``area_under_curve``),
over the training episodes that ended within the budget (SB3's PPO finishes its last
rollout past it: ``within_budget``):
- final return: the mean return of the last 10 % of the run's training episodes (at least
  one), in the order they ended (stochastic policy, the env's own reward);
- evaluation: the mean return of ``--eval-episodes`` deterministic episodes on a fresh env
  after training (ours: ``evaluation:`` at the last step; SB3: ``model.predict(...,
  deterministic=True)``), observation statistics frozen;
- area under the curve: the mean return of every training episode of the run;
- wall time: ours from the resolved config to the end of the run, less the evaluation and
  the saving (checkpoints, the .pb/.onnx exports: ``save`` in the run's timers.json); SB3
  from building the env to the end of ``learn()``; env steps/s = the agent steps trained /
  wall time. Saving is timed apart on both sides (ours: every checkpoint and export of the
  run; SB3: one ``model.save()`` after ``learn()``) and printed beside each run.
Per task: mean +- std over seeds (sample std), the speed ratio ours/SB3 (env steps/s) and
a verdict per metric, "yes" when ours is within one SB3 standard deviation or better
(``within_one_std``). ``--max-steps`` caps budgets (the output says so). LunarLander needs
``pip install "gymnasium[box2d]"`` (the project's ``box2d`` extra) in both interpreters;
without it the task is skipped with one line.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

RUNNER = os.path.join(ROOT, "scripts", "sb3_runner.py")
FINAL_FRACTION = 0.1  # final return: the last 10 % of the training episodes
SPEED_GOAL = 3.0  # issue 32: ours at >= 3x SB3's env steps/s


@dataclass(frozen=True)
class Task:
    name: str
    config: str  # under config/
    zoo_env: str  # the env id the zoo's figure is for
    zoo_mean: Optional[float] = None  # rl-baselines3-zoo benchmark.md (deterministic evaluation)
    zoo_std: Optional[float] = None
    zoo_steps: Optional[int] = None
    needs: Optional[str] = None  # a module the env needs beyond gymnasium


# rl-baselines3-zoo benchmark.md, rows "ppo" (commit 0088472b8cb622732bdbc4aa3d0d0abde86c67ed).
# The zoo's LunarLander figure is for LunarLander-v2 (Gymnasium 1.x has only v3: same task,
# bug fixes in the physics/reward).
TASKS: List[Task] = [
    Task("CartPole", "ppo/zoo_CartPole.yaml", "CartPole-v1", 500.000, 0.000, 100_000),
    Task("Acrobot", "ppo/zoo_Acrobot.yaml", "Acrobot-v1", -73.506, 18.201, 1_000_000),
    Task("Pendulum", "ppo/zoo_Pendulum.yaml", "Pendulum-v1", -172.225, 104.159, 100_000),
    # hyperparams/sac.yml's n_timesteps for Pendulum-v1 (no SAC figure is recorded here).
    Task("PendulumSAC", "sac/zoo_Pendulum.yaml", "Pendulum-v1", zoo_steps=20_000),
    Task("MountainCarContinuous", "ppo/zoo_MountainCarContinuous.yaml", "MountainCarContinuous-v0",
         88.343, 2.572, 20_000),
    Task("LunarLander", "ppo/zoo_LunarLander.yaml", "LunarLander-v2", 242.119, 31.823, 1_000_000, needs="Box2D"),
]

ACTIVATIONS = {"tanh": "Tanh", "relu": "ReLU", "swish": "SiLU"}  # ours -> torch.nn


# ----------------------------------------------------------------- metrics (pure)


def final_return(returns: Sequence[float], fraction: float = FINAL_FRACTION) -> float:
    """Mean of the last ``ceil(fraction * n)`` (at least 1) of ``n`` episode returns, in
    the order the episodes ended; NaN without episodes."""
    if not returns:
        return math.nan
    k = max(1, math.ceil(fraction * len(returns) - 1e-9))
    tail = returns[-k:]
    return float(sum(tail) / len(tail))


def area_under_curve(returns: Sequence[float]) -> float:
    """The mean return of every training episode of the run (NaN without episodes): the
    area under the per-episode return curve divided by the number of episodes."""
    if not returns:
        return math.nan
    return float(sum(returns) / len(returns))


def mean_std(values: Sequence[float]) -> Tuple[float, float]:
    """Mean and sample standard deviation (n - 1; 0 for one value) of finite values."""
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return math.nan, math.nan
    mean = sum(finite) / len(finite)
    if len(finite) < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in finite) / (len(finite) - 1)
    return mean, math.sqrt(var)


def within_one_std(ours: Sequence[float], theirs: Sequence[float], higher_is_better: bool = True) -> Optional[bool]:
    """True when our mean is within one of SB3's (sample) standard deviations of SB3's mean
    or better; None when either side has no finite value."""
    ours_mean, _ = mean_std(ours)
    theirs_mean, theirs_std = mean_std(theirs)
    if math.isnan(ours_mean) or math.isnan(theirs_mean):
        return None
    if higher_is_better:
        return ours_mean >= theirs_mean - theirs_std
    return ours_mean <= theirs_mean + theirs_std


def parse_caps(text: Optional[str], names: Sequence[str]) -> Tuple[Optional[int], Dict[str, int]]:
    """``--max-steps``: ``N`` (every task), or ``Task=N,...`` with an optional bare ``N``
    for the others. Returns (the default cap or None, task name -> cap).

    Raises:
      ValueError: one line naming the part that is not ``N`` or ``Task=N`` with N > 0.
    """
    default: Optional[int] = None
    per_task: Dict[str, int] = {}
    if text is None:
        return default, per_task
    by_lower = {n.lower(): n for n in names}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, _, value = part.rpartition("=")
        try:
            steps = int(value)
        except ValueError:
            steps = 0
        if steps <= 0 or (name and name.lower() not in by_lower):
            raise ValueError(
                f"--max-steps: {part!r} is not N or Task=N with N a positive integer and Task one of {list(names)}"
            )
        if name:
            per_task[by_lower[name.lower()]] = steps
        else:
            default = steps
    return default, per_task


# ------------------------------------------------------------ runs of one side


class SuiteStopped(Exception):
    """A run did not finish (interrupted, or SB3's side failed): the suite stops with
    this one line."""


@dataclass
class Run:
    task: str
    side: str  # "ours" or "sb3"
    seed: int
    steps: int
    wall: float
    returns: List[float]
    eval_mean: float
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def final(self) -> float:
        return final_return(self.returns)

    @property
    def auc(self) -> float:
        return area_under_curve(self.returns)

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.wall if self.wall > 0 else math.nan

    def row(self) -> Dict[str, Any]:
        """The run as one flat record (--out)."""
        return {
            "task": self.task, "side": self.side, "seed": self.seed, "steps": self.steps,
            "wall_s": round(self.wall, 3), "steps_per_s": round(self.steps_per_s, 2),
            "episodes": len(self.returns), "final_return": self.final, "eval_return": self.eval_mean,
            "auc": self.auc, "save_s": round(self.extra.get("save_s", math.nan), 3),
        }


def load_task(task: Task, cap: Optional[int], seed: int, results: str, eval_episodes: int) -> Any:
    """Our resolved settings for one run: the task's YAML, the seed and cap, and an
    ``evaluation:`` of ``eval_episodes`` episodes at the last step."""
    from trainers.config import load_settings
    from trainers.config.schema import EvaluationSettings

    overrides: Dict[str, Any] = {"run_id": "suite", "results_dir": results, "seed": seed}
    if cap is not None:
        overrides["max_steps"] = cap
    options = load_settings(os.path.join(ROOT, "config", task.config), overrides)
    behaviors = {
        name: dataclasses.replace(s, evaluation=EvaluationSettings(interval=s.max_steps, episodes=eval_episodes))
        for name, s in options.behaviors.items()
    }
    return dataclasses.replace(options, behaviors=behaviors)


def run_ours(task: Task, cap: Optional[int], seed: int, eval_episodes: int) -> Run:
    """Trains one task in this process; every episode's return is taken where the trainer
    records it (`Trainer.record_episodes`, what ``Environment/Cumulative Reward`` averages)."""
    from trainers.cli.learn import run_training
    from trainers.layout import RunLayout
    from trainers.trainer import Trainer

    returns: List[float] = []
    record = Trainer.record_episodes

    def recording(self: Trainer, episodes: Sequence[Any]) -> None:
        returns.extend(float(ep.reward) for ep in episodes)
        record(self, episodes)

    with tempfile.TemporaryDirectory(prefix="suite_") as results:
        options = load_task(task, cap, seed, results, eval_episodes)
        behavior = next(iter(options.behaviors))
        steps = options.behaviors[behavior].max_steps
        Trainer.record_episodes = recording  # type: ignore[method-assign]
        try:
            start = time.perf_counter()
            run_training(options)
            wall = time.perf_counter() - start
        finally:
            Trainer.record_episodes = record  # type: ignore[method-assign]
        layout = RunLayout(os.path.join(results, "suite"))
        with open(layout.stats_csv(behavior)) as f:
            evals = [float(r["mean"]) for r in csv.DictReader(f) if r["tag"] == "Environment/Evaluation Reward"]
        with open(layout.timers) as f:
            timers = json.load(f)
    if not evals:
        # The evaluation runs at the last step only: without it the trainer stopped early,
        # on Ctrl-C or SIGTERM, which it takes as "save and stop"; so does the suite.
        raise SuiteStopped(f"{task.name} seed {seed}: training stopped before its last step; suite stopped")
    save = float(timers["save"])
    return Run(task.name, "ours", seed, steps, wall - float(timers["evaluation"]) - save, returns,
               evals[-1] if evals else math.nan, {"save_s": save})


def action_half_range(env_id: str, env_kwargs: Dict[str, Any]) -> Optional[float]:
    """Half the width of a Gymnasium env's Box action space as our gym wrapper maps onto it
    (`envs.gym._Actions`: [-1, 1] to the bounds), when every dimension has the same finite
    one (Pendulum-v1: 2.0); None otherwise (discrete, unbounded or uneven bounds)."""
    import gymnasium as gym

    from envs.gym import _Actions

    env = gym.make(env_id, **env_kwargs)
    try:
        mapping = _Actions(env_id, env.action_space)
    finally:
        env.close()
    if mapping.kind != "box" or mapping.any_identity or not (mapping.half == mapping.half[0]).all():
        return None
    return float(mapping.half[0])


def sb3_log_std_init(ours: float, half_range: Optional[float], action_clip: float) -> float:
    """SB3's ``log_std_init`` for ours: the same initial standard deviation in the env's units.

    Our continuous actions reach a gym env as ``clip(a, -c, c) / c`` rescaled to its bounds
    (``action_clip`` c, ML-Agents' 3: `trainers.tf.distributions`), so a std s of ours is
    s x half / c there; SB3 hands its raw actions to the env (clipped to the bounds), so its
    std is in the env's units already (with c = half, ours is too). Without one half range
    (discrete, uneven bounds): unchanged."""
    return ours if half_range is None else ours + math.log(half_range / action_clip)


def sb3_spec(options: Any, seed: int, eval_episodes: int, threads: int = 1) -> Tuple[Dict[str, Any], List[str]]:
    """SB3's arguments for our resolved settings (one behavior, a ``gym:`` env), and the
    differences SB3 cannot express, one line each.

    Raises:
      ValueError: the settings are not a single-behavior PPO/SAC run on a ``gym:`` env.
    """
    env = options.env_settings
    if not (env.env_path or "").startswith("gym:") or len(options.behaviors) != 1:
        raise ValueError("the SB3 side needs one behavior on a gym: env")
    s = next(iter(options.behaviors.values()))
    h, net = s.hyperparameters, s.network_settings
    gamma = s.reward_signals["extrinsic"].gamma
    n_envs = env.num_envs * env.agents_per_env
    notes: List[str] = []
    policy_kwargs: Dict[str, Any] = {"activation": ACTIVATIONS[net.activation]}
    spec: Dict[str, Any] = {
        "algo": s.trainer_type, "env_id": env.env_path[len("gym:"):], "env_kwargs": dict(env.env_args),
        "n_envs": n_envs, "seed": seed, "total_timesteps": s.max_steps, "threads": threads,
        "eval_episodes": eval_episodes, "eval_seed": seed + 10_000, "normalize": None,
    }

    def sched(value: float, kind: str, end: float) -> Any:
        return value if kind == "constant" else {"schedule": "linear", "start": value, "end": end}

    if s.trainer_type == "ppo":
        n_steps = h.buffer_size // n_envs
        if n_steps * n_envs != h.buffer_size or s.time_horizon != n_steps:
            notes.append(f"buffer_size {h.buffer_size} / time_horizon {s.time_horizon} is not {n_envs} envs x n_steps")
        if h.resolved_beta_schedule != "constant" and h.beta > 0:
            notes.append("beta decays linearly here; SB3's ent_coef is constant")
        if not h.update_when_full:
            notes.append(f"updates once the buffer holds more than {h.buffer_size} rows here (ML-Agents), "
                         "at n_steps x n_envs in SB3: set update_when_full")
        if not s.rollout_cuts:
            notes.append(f"trajectories are cut {s.time_horizon} steps after their start here (ML-Agents), "
                         "at every env's rollout end in SB3: set rollout_cuts")
        if h.advantage_normalization == "buffer":
            notes.append("advantages normalised over the buffer here, per minibatch in SB3")
        if h.adam_epsilon_placement != "torch":
            notes.append("Adam's epsilon joins the raw second moment's root here, the bias-corrected one in "
                         "SB3 (torch): set adam_epsilon_placement: torch")
        half = action_half_range(spec["env_id"], spec["env_kwargs"])
        log_std_init = sb3_log_std_init(h.log_std_init, half, h.action_clip)
        policy_kwargs.update(net_arch={"pi": [net.hidden_units] * net.num_layers,
                                       "vf": [net.hidden_units] * net.num_layers},
                             log_std_init=log_std_init, optimizer_kwargs={"eps": h.adam_epsilon})
        if half is not None and log_std_init != h.log_std_init:  # the two mappings differ in scale
            c = f"{h.action_clip:g}"
            notes.append(f"continuous actions reach the env as clip(a, -{c}, {c}) / {c} x {half:g} here, "
                         f"as clip(a, -{half:g}, {half:g}) in SB3: log_std_init converted (the same initial "
                         f"std in the env's units), the policy's mean is not: set action_clip: {half:g}")
        epsilon = sched(h.epsilon, h.resolved_epsilon_schedule, h.epsilon_final)
        spec["kwargs"] = {
            "n_steps": n_steps, "batch_size": h.batch_size, "n_epochs": h.num_epoch,
            "learning_rate": sched(h.learning_rate, h.learning_rate_schedule, 1e-10),
            "clip_range": epsilon, "clip_range_vf": epsilon if h.clip_value_loss else None,
            "ent_coef": h.beta, "vf_coef": 0.5, "gamma": gamma, "gae_lambda": h.lambd,
            "max_grad_norm": h.max_grad_norm if h.max_grad_norm is not None else 1e10,
            "normalize_advantage": h.advantage_normalization == "minibatch",
            "use_sde": h.use_sde, "sde_sample_freq": h.sde_sample_freq,
            "policy_kwargs": policy_kwargs,
        }
        if net.normalize or h.normalize_reward:
            spec["normalize"] = {"obs": net.normalize, "reward": h.normalize_reward, "gamma": gamma}
    elif s.trainer_type == "sac":
        if h.steps_per_update != 1:
            notes.append(f"steps_per_update {h.steps_per_update}: SB3 gets train_freq 1, gradient_steps 1")
        policy_kwargs["net_arch"] = [net.hidden_units] * net.num_layers
        spec["kwargs"] = {
            "buffer_size": h.buffer_size, "learning_starts": h.buffer_init_steps, "batch_size": h.batch_size,
            "tau": h.tau, "gamma": gamma, "train_freq": 1, "gradient_steps": 1,
            "learning_rate": sched(h.learning_rate, h.learning_rate_schedule, 1e-10),
            "ent_coef": f"auto_{h.init_entcoef}", "policy_kwargs": policy_kwargs,
        }
        if net.normalize:
            spec["normalize"] = {"obs": True, "reward": False, "gamma": gamma}
    else:
        raise ValueError(f"trainer_type {s.trainer_type}: the SB3 side runs ppo or sac")
    return spec, notes


def within_budget(episodes: Sequence[Sequence[float]], budget: int) -> List[float]:
    """The returns of SB3's training episodes (``[return, length, steps when it ended]``)
    that ended within ``budget`` env steps. SB3's PPO ``learn(total_timesteps)`` completes
    its last ``n_steps x n_envs`` rollout, past the budget (Pendulum: 102,400 steps for
    100,000, 12 more episodes, from its best policy); ours stops at ``max_steps``, so the
    episodes both sides are measured on end within the same budget."""
    return [float(e[0]) for e in episodes if len(e) < 3 or e[2] <= budget]


def run_sb3(python: str, task: Task, spec: Dict[str, Any]) -> Run:
    """One SB3 run: ``sb3_runner.py`` with the SB3 interpreter, the spec on stdin."""
    done = subprocess.run([python, RUNNER], input=json.dumps(spec), capture_output=True, text=True)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
        raise SuiteStopped(f"{task.name}: sb3_runner.py exited {done.returncode}: {tail[0]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    evals = result["eval"]
    return Run(task.name, "sb3", spec["seed"], result["timesteps"], result["wall"],
               within_budget(result["episodes"], spec["total_timesteps"]),
               sum(evals) / len(evals) if evals else math.nan,
               {"versions": result["versions"], "save_s": result["save"]})


# ------------------------------------------------------------------- the table

METRICS = [  # (label, Run attribute, higher is better)
    ("final return (last 10%)", "final", True),
    ("eval (deterministic)", "eval_mean", True),
    ("AUC (mean ep. return)", "auc", True),
    ("wall s", "wall", False),
    ("env steps/s", "steps_per_s", True),
]


def summarise(task: str, ours: Sequence[Run], theirs: Sequence[Run]) -> Dict[str, Any]:
    """Per metric: each side's mean and std over seeds and the verdict; the speed ratio."""
    out: Dict[str, Any] = {"task": task}
    for label, attr, higher in METRICS:
        a = [float(getattr(r, attr)) for r in ours]
        b = [float(getattr(r, attr)) for r in theirs]
        out[label] = {"ours": mean_std(a), "sb3": mean_std(b), "ok": within_one_std(a, b, higher) if b else None}
    ours_speed, sb3_speed = out["env steps/s"]["ours"][0], out["env steps/s"]["sb3"][0]
    out["speed_ratio"] = ours_speed / sb3_speed if theirs and sb3_speed > 0 else math.nan
    return out


def format_summary(summary: Dict[str, Any]) -> List[str]:
    def cell(pair: Tuple[float, float]) -> str:
        return "-" if math.isnan(pair[0]) else f"{pair[0]:.1f} +- {pair[1]:.1f}"

    lines = [f"  {'metric':<24} {'ours':>20} {'SB3':>20}  within 1 std or better"]
    for label, _, _ in METRICS:
        m = summary[label]
        verdict = {True: "yes", False: "NO", None: "-"}[m["ok"]]
        lines.append(f"  {label:<24} {cell(m['ours']):>20} {cell(m['sb3']):>20}  {verdict}")
    ratio = summary["speed_ratio"]
    if not math.isnan(ratio):
        goal = "yes" if ratio >= SPEED_GOAL else "NO"
        lines.append(f"  speed ratio ours/SB3 (env steps/s): {ratio:.2f}x  (>= {SPEED_GOAL:.0f}x: {goal})")
    return lines


def write_out(path: str, runs: Sequence[Run], summaries: Sequence[Dict[str, Any]], meta: Dict[str, Any]) -> None:
    """``.csv``: one row per run; anything else: JSON with the runs (every episode's
    return included), the per-task summaries and the settings."""
    if path.endswith(".csv"):
        rows = [r.row() for r in runs]
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["task"])
            writer.writeheader()
            writer.writerows(rows)
        return
    with open(path, "w") as f:
        json.dump({"meta": meta, "summaries": summaries,
                   "runs": [dict(r.row(), returns=r.returns, **r.extra) for r in runs]}, f, indent=1)


def check_sb3_python(python: str) -> Optional[str]:
    """None when ``python`` runs and imports stable_baselines3; else why not, one line."""
    try:
        done = subprocess.run([python, "-c", "import stable_baselines3"], capture_output=True, text=True)
    except OSError as e:
        return f"--sb3-python={python}: cannot run it ({e.strerror})"
    if done.returncode != 0:
        return f"--sb3-python={python}: cannot import stable_baselines3 (see scripts/README_sb3.md)"
    return None


def has_module(python: Optional[str], module: str) -> bool:
    """Whether ``module`` imports here (python None) or in the interpreter ``python``."""
    if python is None:
        return importlib.util.find_spec(module) is not None
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", default=",".join(t.name for t in TASKS), help="comma-separated task names")
    parser.add_argument("--max-steps", default=None, help="N (every task) or Task=N,... : caps budgets")
    parser.add_argument("--seeds", type=int, default=3, help="seeds first-seed .. first-seed + N - 1")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--sb3-python", default=None, help="an interpreter with stable-baselines3")
    parser.add_argument("--sb3-threads", type=int, default=1, help="torch.set_num_threads on the SB3 side")
    parser.add_argument("--out", default=None, help="write every run: .csv (a row per run) or JSON")
    args = parser.parse_args(argv)
    names = [t.name for t in TASKS]
    wanted = [n.strip() for n in args.tasks.split(",") if n.strip()]
    by_name = {t.name.lower(): t for t in TASKS}
    unknown = [n for n in wanted if n.lower() not in by_name]
    if unknown:
        parser.error(f"--tasks: unknown task(s) {unknown}; choose from {names}")
    if args.seeds < 1 or args.eval_episodes < 1:
        parser.error("--seeds and --eval-episodes: expected a positive integer")
    try:
        default_cap, caps = parse_caps(args.max_steps, names)
    except ValueError as e:
        parser.error(str(e))
    if args.sb3_python is not None:
        problem = check_sb3_python(args.sb3_python)
        if problem:
            parser.error(problem)
    # TensorFlow is imported before any clock starts.
    import trainers.loop.controller  # noqa: F401

    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    try:
        run_suite(args, wanted, by_name, default_cap, caps, seeds, sys.argv if argv is None else argv)
    except (SuiteStopped, KeyboardInterrupt) as e:
        print(f"benchmark_suite.py: {e or 'interrupted'}", file=sys.stderr)
        return 1
    return 0


def run_suite(args: argparse.Namespace, wanted: Sequence[str], by_name: Dict[str, Task], default_cap: Optional[int],
              caps: Dict[str, int], seeds: List[int], argv: Sequence[str]) -> None:
    """Every wanted task, seeds alternating between the sides; prints and writes as it goes."""
    runs: List[Run] = []
    summaries: List[Dict[str, Any]] = []
    for name in wanted:
        task = by_name[name.lower()]
        if task.needs:
            missing = [side for side, py in (("ours", None), ("SB3", args.sb3_python))
                       if (side == "ours" or py is not None) and not has_module(py, task.needs)]
            if missing:
                print(f"{task.name}: skipped: {task.needs} missing in {' and '.join(missing)} "
                      f"(pip install \"gymnasium[box2d]\")", flush=True)
                continue
        cap = caps.get(task.name, default_cap)
        ours: List[Run] = []
        theirs: List[Run] = []
        for seed in seeds:  # alternating, so that load changes hit both sides alike
            run = run_ours(task, cap, seed, args.eval_episodes)
            ours.append(run)
            print(f"  {task.name} ours seed {seed}: final {run.final:.1f}, eval {run.eval_mean:.1f}, "
                  f"AUC {run.auc:.1f}, {run.wall:.1f} s (+ {run.extra['save_s']:.1f} s saving), "
                  f"{run.steps_per_s:.0f} steps/s, {len(run.returns)} episodes", flush=True)
            if args.sb3_python is not None:
                with tempfile.TemporaryDirectory(prefix="suite_spec_") as results:
                    spec, notes = sb3_spec(load_task(task, cap, seed, results, args.eval_episodes),
                                           seed, args.eval_episodes, args.sb3_threads)
                if seed == seeds[0]:
                    for note in notes:
                        print(f"  {task.name}: differs from SB3: {note}", flush=True)
                run = run_sb3(args.sb3_python, task, spec)
                theirs.append(run)
                print(f"  {task.name} SB3  seed {seed}: final {run.final:.1f}, eval {run.eval_mean:.1f}, "
                      f"AUC {run.auc:.1f}, {run.wall:.1f} s (+ {run.extra['save_s']:.1f} s saving), "
                      f"{run.steps_per_s:.0f} steps/s, {len(run.returns)} episodes", flush=True)
        runs.extend(ours + theirs)
        budget = ours[0].steps
        zoo = "" if task.zoo_mean is None else f"; zoo PPO {task.zoo_mean:.1f} +- {task.zoo_std:.1f} @ {task.zoo_steps}"
        capped = "" if task.zoo_steps in (None, budget) else f" (capped: the zoo's budget is {task.zoo_steps})"
        if cap is not None and task.zoo_steps is None:
            capped = " (capped by --max-steps)"
        print(f"{task.name} ({task.zoo_env}), {budget} steps{capped}, seeds {seeds}{zoo}", flush=True)
        summary = summarise(task.name, ours, theirs)
        summary["steps"] = budget
        summaries.append(summary)
        for line in format_summary(summary):
            print(line, flush=True)
        if args.out:  # after every task, so that a suite cut short keeps what it measured
            write_out(args.out, runs, summaries, {"argv": list(argv), "seeds": seeds,
                                                  "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})


if __name__ == "__main__":
    sys.exit(main())
