"""trainer-demo: inspect and record Unity ML-Agents `.demo` files.

Usage:
  trainer-demo info <file> [--json]
  trainer-demo record <config> --out=<file> [--env=<id>] [--steps=<n>] [--seed=<n>]
                      [--behavior=<name>] [--agents=<n>] [--name=<name>] [--run-id=<id>]
                      [--results-dir=<dir>]
  trainer-demo (-h | --help)
  trainer-demo --version

Commands:
  info      Print a demonstration's name, steps, episodes, mean reward, behavior spec
            and record format (<file> may be a directory of .demo files).
  record    Record the scripted expert of a built-in environment, or a trained run's
            policy (--run-id), into a .demo file (ML-Agents 2.0 format, readable by
            Unity's tools and by trainer-learn).

Options:
  --json              Print `info` as one JSON object.
  --out=<file>        The .demo file to write.
  --env=<id>          Environment id, e.g. builtin:Simple (default: the config's
                      env_settings.env_path).
  --steps=<n>         Agent steps (records) to write [default: 1000].
  --seed=<n>          Environment seed (default: the config's env_settings.seed, or 0).
  --behavior=<name>   The behavior to record when the env has several: its config name
                      (3DBall) or, to pick one team, the id the env reports (3DBall?team=1).
  --agents=<n>        Agents per behavior [default: 1].
  --name=<name>       Demonstration name in the file (default: the output file's stem).
  --run-id=<id>       Record a trained run's policy (its latest checkpoint, deterministic
                      actions) instead of the scripted expert.
  --results-dir=<dir>  Where the run lives [default: results].
  -h --help           Show this help.
  --version           Show the version.

<config> is a trainer YAML; only env_settings (env_path, env_args, seed) is read.
Errors print one line and exit with status 1.

Behavior names: Unity games and their recordings name a behavior ``Name?team=N``
(``3DBall?team=0``); ``info`` shows the name a config section uses (``3DBall``) and the
team, and ``record`` writes the id the env reports (as Unity's DemonstrationRecorder
writes ``FullyQualifiedBehaviorName``) while a trained run is looked up by the name.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np
import yaml
from docopt import DocoptExit, docopt

from envs.base_env import ActionSpec, BehaviorId
from envs.demo import DemoWriter, format_action_spec, load_demonstration
from envs.exceptions import DemoError, EnvError

from trainers import __version__
from trainers.cli import usage_error
from trainers.exceptions import TrainerError

PROG = "trainer-demo"


class _UsageError(Exception):
    """A bad command-line value or config entry."""


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the ``trainer-demo`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = docopt(__doc__, argv=argv, version=f"{PROG} {__version__}")
    except DocoptExit as exc:
        print(usage_error(PROG, __doc__ or "", argv, exc), file=sys.stderr)
        return 2
    try:
        if args["info"]:
            return _info(args["<file>"], as_json=bool(args["--json"]))
        return _record(args)
    except (DemoError, EnvError, TrainerError, _UsageError, OSError, yaml.YAMLError) as e:
        message = " ".join(str(e).split()) or type(e).__name__
        if isinstance(e, OSError) and not isinstance(e, (DemoError, EnvError)):
            message = f"{e.filename}: {e.strerror}" if e.filename and e.strerror else message
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 1


# ----------------------------------------------------------------------------- info
def demo_summary(path: str) -> Dict[str, Any]:
    """What ``info`` prints, as a JSON-ready dict."""
    demo = load_demonstration(path)
    spec = demo.behavior_spec
    behavior = demo.info.behavior_id
    return {
        "path": demo.info.path,
        "name": demo.info.name,
        # The config section this recording belongs to; the file's own string and its team
        # beside it (a Unity recording says "3DBall?team=0", its section is "3DBall").
        "behavior_name": behavior.name,
        "behavior_id": behavior.full,
        "team": behavior.team,
        "record_format": demo.info.record_format,
        "api_version": demo.info.api_version,
        "steps": demo.info.number_steps,
        "episodes": demo.info.number_episodes,
        "mean_reward": float(demo.info.mean_reward),
        "transitions": len(demo),
        "observations": [
            {"name": o.name, "kind": o.kind.value, "shape": list(o.shape)} for o in spec.observation_specs
        ],
        "actions": {
            "continuous": spec.action_spec.continuous_size,
            "discrete_branches": list(spec.action_spec.discrete_branches),
        },
        "has_action_masks": demo.action_masks is not None,
    }


def _info(path: str, as_json: bool) -> int:
    summary = demo_summary(path)
    if as_json:
        print(json.dumps(summary))
        return 0
    actions = summary["actions"]
    lines = [
        f"File:          {summary['path']}",
        f"Name:          {summary['name']}",
        f"Behavior:      {_behavior_line(summary)}",
        f"Record format: {summary['record_format']}",
        f"Steps:         {summary['steps']}",
        f"Episodes:      {summary['episodes']}",
        f"Mean reward:   {summary['mean_reward']:.4f}",
        f"Transitions:   {summary['transitions']}",
        "Observations:",
    ]
    for i, o in enumerate(summary["observations"]):
        lines.append(f"  {i}: {o['kind']:<6} {tuple(o['shape'])}  {o['name']}")
    if not summary["observations"]:
        lines.append("  none: the records carry no observation data")
    lines.append(
        "Actions:       " + format_action_spec(ActionSpec(actions["continuous"], tuple(actions["discrete_branches"])))
    )
    print("\n".join(lines))
    return 0


def _behavior_line(summary: Mapping[str, Any]) -> str:
    """``3DBall (team 0; recorded as 3DBall?team=0)``, or the plain name when it has no suffix."""
    name, full = summary["behavior_name"], summary["behavior_id"]
    if full == name:
        return name
    return f"{name} (team {summary['team']}; recorded as {full})"


# --------------------------------------------------------------------------- record
def _int_option(args: Mapping[str, Any], key: str, minimum: int) -> Optional[int]:
    value = args.get(key)
    if value is None:
        return None
    try:
        number = int(str(value))
    except ValueError:
        raise _UsageError(f"{key} must be an integer, got {value!r}") from None
    if number < minimum:
        raise _UsageError(f"{key} must be >= {minimum}, got {number}")
    return number


def _env_settings(config_path: str) -> Dict[str, Any]:
    try:
        with open(config_path, "r", encoding="utf-8") as f:
            config = yaml.safe_load(f)
    except FileNotFoundError:
        raise _UsageError(f"{config_path}: config file not found") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise _UsageError(f"{config_path}: not valid YAML{where}") from None
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise _UsageError(f"{config_path}: expected a mapping at the top level")
    settings = config.get("env_settings") or {}
    if not isinstance(settings, dict):
        raise _UsageError(f"{config_path}: env_settings: expected a mapping")
    env_args = settings.get("env_args") or {}
    if not isinstance(env_args, dict):
        raise _UsageError(f"{config_path}: env_settings.env_args: expected a mapping of keyword arguments")
    return {"env_path": settings.get("env_path"), "env_args": env_args, "seed": settings.get("seed")}


def _run_policy_actor(run_dir: str, behavior: str, spec: Any, seed: int) -> Tuple[Callable, Callable]:
    """(action function, close) playing a trained run's latest checkpoint deterministically.

    ``behavior`` is the env's id (``3DBall?team=0``); the run keeps its checkpoints and
    settings under the config name (``3DBall``), as trainer-learn and ML-Agents key them.
    """
    import os

    from envs.base_env import ActionTuple, allowed_mask
    from trainers.cli.export import latest_checkpoints, restore_policy
    from trainers.config import load_settings
    from trainers.layout import CONFIGURATION_FILE, RunLayout

    config = RunLayout(run_dir).configuration
    if not os.path.isfile(config):
        raise _UsageError(f"--run-id: {run_dir} is not a run directory (no {CONFIGURATION_FILE})")
    options = load_settings(config)
    name = BehaviorId.parse(behavior).name
    target = latest_checkpoints(run_dir, name)[0]
    policy = restore_policy(name, spec, options.behavior_settings(name), target.prefix, seed)
    branches = spec.action_spec.discrete_branches

    def act(name: str, decision: Any) -> ActionTuple:
        masks = allowed_mask(decision.action_mask, len(decision), branches)
        info = policy.act(decision.obs, masks, deterministic=True)
        return ActionTuple(info.env_continuous, info.discrete)

    return act, policy.session.close


def _record(args: Mapping[str, Any]) -> int:
    settings = _env_settings(args["<config>"])
    env_id = args.get("--env") or settings["env_path"]
    if not env_id:
        raise _UsageError(f"no environment: pass --env=<id> or set env_settings.env_path in {args['<config>']}")
    steps = _int_option(args, "--steps", 1)
    agents = _int_option(args, "--agents", 1)
    assert agents is not None  # docopt gives its [default: 1]
    seed = _int_option(args, "--seed", 0)
    if seed is None:
        config_seed = settings["seed"]
        seed = int(config_seed) if isinstance(config_seed, int) and config_seed >= 0 else 0
    out = args["--out"]
    name = args.get("--name") or Path(out).stem

    from envs.registry import make_env  # builds nothing TensorFlow; imported late for `info`

    env = make_env(str(env_id), settings["env_args"], seed, agents)
    close_actor: Callable[[], None] = lambda: None
    try:
        behavior = _pick_behavior(list(env.behavior_specs), args.get("--behavior"), str(env_id))
        if args.get("--run-id"):
            import os

            run_dir = os.path.join(args.get("--results-dir") or "results", args["--run-id"])
            act, close_actor = _run_policy_actor(run_dir, behavior, env.behavior_specs[behavior], seed)
        elif hasattr(env, "expert_action"):
            act = env.expert_action
        else:
            raise EnvError(f"{env_id}: this environment has no scripted expert to record; record a trained run with --run-id")
        writer = DemoWriter(out, name, behavior, env.behavior_specs[behavior])
        try:
            _record_loop(env, behavior, writer, int(steps or 0), act)
        finally:
            writer.close()
    finally:
        close_actor()
        env.close()
    print(
        f"Recorded {writer.steps} steps, {writer.episodes} episodes (mean reward {writer.mean_reward:.4f}) "
        f"of behavior {behavior} from {env_id} to {out}"
    )
    return 0


def _pick_behavior(names: List[str], wanted: Optional[str], env_id: str) -> str:
    """The env's behavior id to record: ``wanted`` as reported (``3DBall?team=1``) or by its
    config name (``3DBall``, when one team has it); the only one when ``wanted`` is None."""
    if wanted:
        if wanted in names:
            return wanted
        matches = [n for n in names if BehaviorId.parse(n).name == wanted]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise _UsageError(
                f"--behavior: {wanted} is {len(matches)} teams in {env_id} ({', '.join(matches)}); give one of them"
            )
        raise _UsageError(f"--behavior: {env_id} has no behavior {wanted!r} (behaviors: {', '.join(names)})")
    if len(names) != 1:
        raise _UsageError(f"{env_id} has several behaviors ({', '.join(names)}); choose one with --behavior")
    return names[0]


def _record_loop(env: Any, behavior: str, writer: DemoWriter, steps: int, act: Callable) -> None:
    """Step ``env`` with ``act(behavior, decision_steps)`` until ``steps`` records are written.

    Terminal agents are written first (their final observation, ``done``), then the
    agents that decide this step with the expert's action.
    """
    spec = env.behavior_specs[behavior]
    no_action = spec.action_spec.empty_action(1)
    env.reset()
    while writer.steps < steps:
        decision, terminal = env.get_steps(behavior)
        for i in range(len(terminal)):
            if writer.steps >= steps:
                return
            writer.add_step(
                [o[i] for o in terminal.obs],
                no_action.continuous[0],
                no_action.discrete[0],
                reward=float(terminal.reward[i]),
                done=True,
                interrupted=bool(terminal.interrupted[i]),
                agent_id=int(terminal.agent_id[i]),
            )
        if len(decision) == 0:
            env.step()
            continue
        action = act(behavior, decision)
        for i in range(len(decision)):
            if writer.steps >= steps:
                return
            mask = None
            if decision.action_mask is not None:
                mask = [np.asarray(m[i], bool) for m in decision.action_mask]
            writer.add_step(
                [o[i] for o in decision.obs],
                action.continuous[i] if action.continuous.size else None,
                action.discrete[i] if action.discrete.size else None,
                reward=float(decision.reward[i]),
                done=False,
                agent_id=int(decision.agent_id[i]),
                action_mask=mask,
            )
        env.set_actions(behavior, action)
        env.step()


if __name__ == "__main__":
    sys.exit(main())
