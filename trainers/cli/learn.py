"""trainer-learn: train PPO and SAC agents from an ML-Agents-style YAML config.

Usage:
  trainer-learn <config> [--cluster=<file>] [--debug] [options]
  trainer-learn --worker --cluster=<file> --task-index=<i> [--debug]
  trainer-learn --help
  trainer-learn --version

Options:
  --env=<id>                  Environment: builtin:<Name>, gym:<id> or a Unity build path (overrides
                              env_settings.env_path); none: the Unity Editor (press Play).
  --run-id=<id>               Name of the run; results go to <results-dir>/<run-id>.
  --results-dir=<dir>         Where runs are written (default: checkpoint_settings, else results).
  --num-envs=<n>              Environment workers (subprocesses when > 1).
  --agents-per-env=<n>        Copies of a Gymnasium env per worker, acting as agents.
  --seed=<n>                  Random seed (-1: draw one); same seed, same run on CPU.
  --resume                    Continue the run <run-id> from its last checkpoint.
  --force                     Overwrite an existing run <run-id>.
  --initialize-from=<run-id>  Start from the weights of another run's last checkpoint.
  --inference                 Run the policy without training (deterministic actions).
  --model=<file-or-dir>       With --inference: play an exported <Behavior>.onnx (or a directory of them)
                              with onnxruntime instead of a checkpoint.
  --max-steps=<n>             Override max_steps of every behavior (quick runs).
  --curriculum=<file-or-dir>  ML-Agents 0.11-0.15 curricula (a YAML file keyed by behavior, or a directory
                              of <Behavior>.json), read as environment_parameters curricula.
  --sampler=<file>            ML-Agents 0.11-0.15 sampler file, read as environment_parameters samplers.
  --base-port=<n>             First port for Unity games (worker i uses base port + i).
  --timeout-wait=<s>          Seconds an env has to answer each step (every env kind), and a Unity game
                              to connect (default 60).
  --no-graphics               Run Unity builds without rendering (-nographics -batchmode).
  --no-graphics-monitor       Run Unity worker 0 with graphics and the others without
                              (engine_settings.no_graphics_monitor).
  --time-scale=<x>            Unity time scale (engine_settings.time_scale).
  --width=<n>                 Unity window width (engine_settings.width).
  --height=<n>                Unity window height (engine_settings.height).
  --quality-level=<n>         Unity quality level (engine_settings.quality_level).
  --target-frame-rate=<n>     Unity target frame rate (engine_settings.target_frame_rate).
  --capture-frame-rate=<n>    Unity capture frame rate (engine_settings.capture_frame_rate).
  --num-gpus=<n>              Train on the first n GPUs as towers (0: CPU).
  --devices=<list>            Explicit tower devices, e.g. /cpu:0,/cpu:1 or /gpu:0,/gpu:1.
  --cpu                       Hide GPUs; train on the CPU.
  --cluster=<file>            Towers on a TensorFlow cluster's workers (a file with chief: and workers:,
                              or a config with cluster_settings:); this process is the chief.
  --worker                    Serve as worker <i> of --cluster until the chief ends it (or Ctrl-C).
  --ray=<address>             Step the envs and act on Ray rollout workers (env_settings.ray.address):
                              local (start Ray here), auto (the cluster of `ray start`), or host:port.
  --ray-workers=<n>           Ray rollout workers (env_settings.ray.num_workers); alone: a local Ray.
  --task-index=<i>            With --worker: this worker's index in the cluster file's workers list.
  --debug                     Print tracebacks for errors.
  -h --help                   Show this help.
  --version                   Show the version.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from docopt import DocoptExit, docopt

from envs.base_env import specs_by_name
from envs.exceptions import EnvError
from trainers import __version__, show_tensorflow_logs
from trainers.cli import usage_error
from trainers.exceptions import CheckpointError, ConfigError, TrainerError, os_error_line, shorten
from trainers.layout import RunLayout, behavior_dir_name, best_model_stem, model_file_name

if TYPE_CHECKING:  # annotations only: this module must not import TensorFlow when loaded
    from envs.base_env import BehaviorSpec
    from envs.managers.base import EnvManager
    from envs.unity.options import UnityOptions
    from trainers.config import CheckpointSettings, RunOptions, TrainerSettings
    from trainers.loop.curriculum import EnvironmentParameterManager
    from trainers.loop.status import TrainingStatus
    from trainers.trainer import Trainer

INT_OPTIONS = {
    "--num-envs": "num_envs",
    "--agents-per-env": "agents_per_env",
    "--seed": "seed",
    "--max-steps": "max_steps",
    "--num-gpus": "num_gpus",
    "--base-port": "base_port",
    "--timeout-wait": "timeout_wait",
    "--ray-workers": "ray_workers",
    # Unity engine settings (ML-Agents' flags), laid over the config's engine_settings.
    "--width": "width",
    "--height": "height",
    "--quality-level": "quality_level",
    "--target-frame-rate": "target_frame_rate",
    "--capture-frame-rate": "capture_frame_rate",
}
FLOAT_OPTIONS = {"--time-scale": "time_scale"}
SWITCHES = ("--resume", "--force", "--inference", "--debug", "--no-graphics", "--no-graphics-monitor")


def unity_options(options: RunOptions) -> UnityOptions:
    """`envs.unity.options.UnityOptions` from env_settings / engine_settings (Unity runs only)."""
    from envs.unity.options import UnityOptions, engine_config

    env_settings = options.env_settings
    editor = env_settings.env_path is None
    # As ML-Agents: the Editor listens on 5004 unless a port other than the default is given.
    port = None if editor and env_settings.base_port == 5005 else env_settings.base_port
    return UnityOptions(
        base_port=port,
        timeout_wait=float(env_settings.timeout_wait),
        engine=engine_config(options.engine_settings.given()),
        log_folder=RunLayout(options.run_dir).run_logs,
        num_areas=env_settings.num_areas,
    )


def parse_overrides(args: Dict[str, Any]) -> Dict[str, Any]:
    """docopt dict -> ``load_settings`` overrides (only the options that were given)."""
    out: Dict[str, Any] = {}
    for opt, key in INT_OPTIONS.items():
        value = args.get(opt)
        if value is None:
            continue
        try:
            out[key] = int(value)
        except ValueError:
            raise ConfigError(f"{opt}: expected an integer, got {shorten(repr(value))}") from None
    for opt, key in FLOAT_OPTIONS.items():
        value = args.get(opt)
        if value is None:
            continue
        try:
            out[key] = float(value)
        except ValueError:
            raise ConfigError(f"{opt}: expected a number, got {shorten(repr(value))}") from None
    for opt, key in (
        ("--env", "env_path"), ("--run-id", "run_id"), ("--initialize-from", "initialize_from"),
        ("--curriculum", "curriculum"), ("--sampler", "sampler"), ("--ray", "ray"),
    ):
        if args.get(opt) is not None:
            out[key] = args[opt]
    if args.get("--results-dir") is not None:
        out["results_dir"] = args["--results-dir"]
    if args.get("--devices"):
        out["devices"] = tuple(d.strip() for d in args["--devices"].split(",") if d.strip())
    for flag in SWITCHES:
        if args.get(flag):
            out[flag[2:].replace("-", "_")] = True
    return out


def resolve_devices(num_gpus: Optional[int], devices: Optional[Sequence[str]], cpu: bool) -> List[str]:
    """Tower devices from the options; one clear error for a device that does not exist."""
    import trainers.tf  # noqa: F401  (TensorFlow imported the project's way: faster, graph mode)
    import tensorflow as tf_mod

    gpus = [] if cpu else tf_mod.config.list_physical_devices("GPU")
    if devices:
        chosen = [d if d.startswith("/") else "/" + d for d in devices]
    elif num_gpus:
        chosen = [f"/gpu:{i}" for i in range(num_gpus)]
    else:
        return ["/cpu:0"]
    available = [f"/gpu:{i}" for i in range(len(gpus))]
    for d in chosen:
        kind, _, index = d.lower().lstrip("/").rpartition("device:")[2].partition(":")
        if kind == "cpu" and index.isdigit():
            continue  # virtual CPU devices are created on demand
        if kind == "gpu" and index.isdigit() and int(index) < len(gpus):
            continue
        raise ConfigError(
            f"device {d!r} does not exist; available: /cpu:<n> (virtual){', ' + ', '.join(available) if available else ''}"
        )
    return chosen


def _warn(message: str) -> None:
    print(f"[WARNING] {message}", flush=True)


def _export_formats() -> tuple:
    """pb always; onnx when tf2onnx is installed (the ``export`` extra)."""
    try:
        import tf2onnx  # noqa: F401
    except ImportError:
        print("[WARNING] tf2onnx is not installed (pip install trainer-learn[export]): writing .pb models only", flush=True)
        return ("pb",)
    return ("pb", "onnx")


def export_hook(formats: tuple, best: bool = False) -> Callable[["Trainer", str], None]:
    """Exports ``<Behavior>.pb/.onnx`` and ``<Behavior>-<step>.*`` beside each checkpoint;
    ``best``: ``<Behavior>-best.pb/.onnx`` beside ``checkpoint-best`` (the controller's
    ``on_best``; `RunLayout.best_model`).

    The export verifies itself against the live graph; a mismatch is an ExportError (the
    checkpoint is already saved when it is raised).
    """

    def hook(trainer: "Trainer", prefix: str) -> None:
        from trainers.export import export_policy

        name = trainer.behavior_name
        export_policy(
            trainer.policy,
            os.path.dirname(prefix),
            step=None if best else trainer.step,
            formats=formats,
            file_stem=best_model_stem(name) if best else behavior_dir_name(name),
        )

    return hook


_EDITOR_EVALUATION = (
    "{section}.evaluation: needs an environment of its own beside the training one, and the "
    "Unity Editor is only one; train a build (env_settings.env_path) or remove evaluation"
)


def _evaluation_env(
    options: "RunOptions", seed: int, is_unity: bool, section: str, env_parameters: Optional[Dict[str, Any]] = None
) -> "EnvManager":
    """The env behaviors with ``evaluation:`` are evaluated on: built like the training
    envs, with one worker and its own seed (`trainers.loop.evaluation.evaluation_seed`); a
    Unity build listens on the port after the training builds' and writes its player log to
    ``run_logs/evaluation/``. ``section``: the config section asking for it (for the error
    the Unity Editor, which is one instance only, gets)."""
    import dataclasses

    from envs.managers import make_env_manager
    from trainers.loop.evaluation import evaluation_seed

    env_settings = options.env_settings
    unity = None
    if is_unity:
        if env_settings.env_path is None:
            raise ConfigError(_EDITOR_EVALUATION.format(section=section))
        training = unity_options(options)
        unity = dataclasses.replace(
            training,
            base_port=env_settings.base_port + env_settings.num_envs,
            log_folder=RunLayout(options.run_dir).evaluation_logs,
        )
    return make_env_manager(
        env_settings.env_path, env_settings.env_args, 1, env_settings.agents_per_env, evaluation_seed(seed),
        unity=unity, step_timeout=float(env_settings.timeout_wait), env_parameters=env_parameters,
    )


def _ray_env_manager(
    options: RunOptions, seed: int, is_unity: bool, model: Optional[str],
    curriculum: Optional[EnvironmentParameterManager],
) -> EnvManager:
    """Ray rollout workers (``env_settings.ray``, `trainers.loop.ray_rollouts`), after the
    checks that need no cluster: what they cannot run is refused in one line first."""
    env_settings = options.env_settings
    assert env_settings.ray is not None
    if env_settings.env_path is None:
        raise ConfigError("env_settings.ray: the Unity Editor runs on this machine; give a build (env_settings.env_path)")
    if model is not None:
        raise ConfigError("--model: not with env_settings.ray (Ray rollout workers act with a trained policy's weights)")
    for name, settings in options.behaviors.items():
        if settings.self_play is not None:
            raise ConfigError(f"behaviors.{name}.self_play: not supported with Ray rollout workers (env_settings.ray)")
    from trainers.loop.ray_rollouts import RayRolloutManager, import_ray

    import_ray()  # one line if Ray is missing, before anything starts
    return RayRolloutManager(
        env_settings.env_path, env_settings.env_args, env_settings.agents_per_env, seed, env_settings.ray,
        unity=unity_options(options) if is_unity else None,
        step_timeout=float(env_settings.timeout_wait),
        env_parameters=curriculum.values() if curriculum is not None else None,
    )


def _load_onnx_policy(trainer: Trainer, model: str, name: str, spec: BehaviorSpec, num_behaviors: int) -> None:
    from trainers.export.onnx_policy import OnnxPolicy

    if model.endswith(".onnx") and num_behaviors > 1:
        raise ConfigError(
            f"--model={model}: one file for {num_behaviors} behaviors; give a directory of <Behavior>.onnx files"
        )
    path = model if model.endswith(".onnx") else os.path.join(model, model_file_name(behavior_dir_name(name), "onnx"))
    trainer.behavior_graph.session.close()  # the checkpoint's weights are not used
    trainer.use_actor(OnnxPolicy(path, spec))


def run_worker(cluster_file: str, task_index: Optional[str]) -> int:
    """``--worker``: serves until the chief ends it or the process is interrupted."""
    from trainers.config import load_cluster_file

    try:
        task = int(task_index) if task_index is not None else None
    except ValueError:
        task = None
    if task is None:
        raise ConfigError(f"--task-index: expected a worker index (0, 1, ...), got {shorten(repr(task_index))}")
    settings = load_cluster_file(cluster_file)
    from trainers.tf.cluster import exit_now, serve_worker

    exit_now(serve_worker(settings, task))  # a live server can hang interpreter shutdown
    return 0


def _restore_for_run(
    trainer: "Trainer", name: str, run_dir: str, status: "TrainingStatus", ckpt: "CheckpointSettings"
) -> Tuple[int, str]:
    """--resume / --inference: the newest complete checkpoint of ``name`` (even one the
    status file does not list yet: a run killed right after writing it; half-written ones
    are skipped). Refuses, rather than playing or continuing an untrained policy, when none
    restores."""
    from trainers.loop.checkpoints import checkpoint_candidates, restore_newest

    candidates = checkpoint_candidates(run_dir, name, status)
    found = restore_newest(trainer, candidates, _warn)
    what = "resume from" if ckpt.resume else "play"
    if found is None and candidates:
        raise CheckpointError(
            f"{run_dir}: no checkpoint of behavior {name} restores ({len(candidates)} found, "
            f"all incomplete or corrupt; newest {candidates[0][1]})"
        )
    if found is None:
        hint = "" if ckpt.resume else " (train it first, or play an exported model with --model)"
        raise CheckpointError(f"{run_dir}: no checkpoint of behavior {name} to {what}{hint}")
    return found


def _trainer_settings(options: "RunOptions", name: str) -> "TrainerSettings":
    """The behavior's settings, as ML-Agents picks them: its own section, else
    ``default_settings``; a behavior the config does not name, without default_settings,
    is an error (ML-Agents: "has not been specified in the trainer configuration")."""
    if name in options.behaviors or options.default_settings is not None:
        return options.behavior_settings(name)
    raise ConfigError(
        f"behaviors.{name}: the environment has this behavior but the config does not name it; "
        f"add a section behaviors.{name} or default_settings"
    )


def _check_curriculum_behaviors(
    curriculum: "EnvironmentParameterManager", specs: Mapping[str, Any], env_path: Optional[str]
) -> None:
    """Each completion criteria names a behavior of the environment (behaviors trained by
    default_settings are known only now; the loader checked the configured ones)."""
    for name, parameter in curriculum.settings.items():
        for i, lesson in enumerate(parameter.curriculum):
            criteria = lesson.completion_criteria
            if criteria is not None and criteria.behavior not in specs:
                raise ConfigError(
                    f"environment_parameters.{name}.curriculum[{i}].completion_criteria.behavior: "
                    f"{criteria.behavior!r}: the environment {env_path} has no such behavior (it has: {', '.join(specs)})"
                )


def run_training(options: "RunOptions", cpu: bool = False, model: Optional[str] = None) -> int:
    """Builds envs, trainers and the controller from resolved options; returns exit code.

    Everything that can be checked is checked before ``--force`` deletes the old run (the
    config, the run id, devices, the env and its behaviors, demos, the weights of
    ``--initialize-from``, which may be this very run): a mistake leaves the old run whole.
    """
    from envs.managers import make_env_manager
    from trainers.loop.checkpoints import adopt_checkpoint, checkpoint_candidates, restore_newest
    from trainers.loop.controller import TrainerController
    from trainers.poca.trainer import POCATrainer
    from trainers.ppo.trainer import PPOTrainer
    from trainers.loop.run_dir import RunLock, check_results_dir, check_run_id, clear_run
    from trainers.sac.trainer import SACTrainer
    from envs.managers.base import resolve_seed
    from trainers.config import cluster_refusal, write_resolved_config
    from trainers.trainer import Trainer
    from trainers.stats import ConsoleWriter, CSVWriter, StatsReporter, TensorboardWriter
    from trainers.loop.status import TrainingStatus
    from trainers.tf.encoder_compat import settings_for_checkpoint

    ckpt = options.checkpoint_settings
    env_settings = options.env_settings
    check_run_id(ckpt.run_id)
    if ckpt.initialize_from:
        check_run_id(ckpt.initialize_from, "--initialize-from")
    check_results_dir(ckpt.results_dir)
    run_dir = options.run_dir
    layout = RunLayout(run_dir)
    status_path = layout.training_status
    # An empty folder is no run (one being started by another process meets the lock below).
    existed = os.path.isdir(run_dir) and bool(os.listdir(run_dir))
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise TrainerError(f"{run_dir}: exists and is not a run folder")
    if existed and not (ckpt.resume or ckpt.force or ckpt.inference):
        raise TrainerError(
            f"{run_dir}: a run with this id exists; use --resume to continue it or --force to overwrite it"
        )
    if ckpt.resume and not existed:
        raise TrainerError(f"{run_dir}: no such run to resume")
    if ckpt.inference and model is None and not existed:
        raise TrainerError(f"{run_dir}: no such run to play (train it first, or give --model=<file.onnx>)")
    init_status = None
    init_dir = ""
    if ckpt.initialize_from:
        init_dir = os.path.join(ckpt.results_dir, ckpt.initialize_from)
        init_path = RunLayout(init_dir).training_status
        if not os.path.isfile(init_path):
            raise TrainerError(f"{init_dir}: no such run to initialize from")
        init_status = TrainingStatus.load(init_path)
    # One process per run from here on (a second one is refused before it touches anything).
    lock = RunLock(run_dir, exclusive=not ckpt.inference)
    wrote = False
    try:
        seed = resolve_seed(
            env_settings.seed, env_settings.ray.num_envs if env_settings.ray is not None else env_settings.num_envs
        )
        chief = None
        if options.cluster_settings.enabled and not ckpt.inference:
            if options.device_settings.num_gpus is not None or options.device_settings.devices is not None:
                raise ConfigError(
                    "device_settings (--num-gpus/--devices): cannot be combined with a cluster; "
                    "choose each worker's devices with worker_devices in the cluster file"
                )
            # Before any env starts: every worker must answer (one error naming the others).
            from trainers.tf.cluster import Chief

            chief = Chief(options.cluster_settings)
            devices = chief.tower_devices
            print(f"[INFO] cluster: {len(devices)} towers on {len(options.cluster_settings.workers)} workers: {', '.join(devices)}", flush=True)
        else:
            devices = resolve_devices(options.device_settings.num_gpus, options.device_settings.devices, cpu)
        status = TrainingStatus.load(status_path) if (ckpt.resume or ckpt.inference) else TrainingStatus()
        from envs.registry import parse_env_id

        is_unity = env_settings.env_path is None or parse_env_id(env_settings.env_path)[0] == "unity"
        if is_unity and env_settings.env_path is None and not ckpt.inference:
            # Before waiting for the Editor's Play button (default_settings: once the
            # behaviors are known, in _evaluation_env).
            for name, settings in options.behaviors.items():
                if settings.evaluation is not None:
                    raise ConfigError(_EDITOR_EVALUATION.format(section=f"behaviors.{name}"))
        curriculum = None
        if options.environment_parameters:
            from trainers.loop.curriculum import EnvironmentParameterManager

            # Lessons go on where the run left them (--resume; --inference plays in them).
            restore = status.curriculum if (ckpt.resume or ckpt.inference) else None
            curriculum = EnvironmentParameterManager(options.environment_parameters, seed, restore)
            if restore is not None:
                print(f"[INFO] {curriculum.resumed()}", flush=True)
        try:
            if env_settings.ray is not None:
                env = _ray_env_manager(options, seed, is_unity, model, curriculum)
            else:
                env = make_env_manager(
                    env_settings.env_path, env_settings.env_args, env_settings.num_envs, env_settings.agents_per_env,
                    seed,
                    unity=unity_options(options) if is_unity else None,
                    step_timeout=float(env_settings.timeout_wait),
                    env_parameters=curriculum.values() if curriculum is not None else None,
                )
        except BaseException:
            if chief is not None:
                chief.end_workers()
            raise
        evaluation_env: Optional[EnvManager] = None
        trainers: Dict[str, Trainer] = {}
        trainer_classes = {"ppo": PPOTrainer, "sac": SACTrainer, "poca": POCATrainer}
        reporters: Dict[str, StatsReporter] = {}
        restored: Dict[str, int] = {}  # behavior -> step of the checkpoint resumed from
        try:
            # Unity games name behaviors `Name?team=N`: sections, folders and models go by Name.
            specs = specs_by_name(env.behavior_specs)
            for name in options.behaviors:
                if name not in specs:
                    raise ConfigError(
                        f"behaviors.{name}: the environment {env_settings.env_path} has no such behavior "
                        f"(it has: {', '.join(specs)})"
                    )
            settings_of = {name: _trainer_settings(options, name) for name in specs}
            if curriculum is not None:
                _check_curriculum_behaviors(curriculum, specs, env_settings.env_path)
                for name in options.environment_parameters:
                    print(f"[INFO] {curriculum.describe(name)}", flush=True)
            evaluated = [n for n, s in settings_of.items() if s.evaluation is not None and not ckpt.inference]
            if evaluated:
                section = f"behaviors.{evaluated[0]}" if evaluated[0] in options.behaviors else "default_settings"
                evaluation_env = _evaluation_env(
                    options, seed, is_unity, section, curriculum.values() if curriculum is not None else None
                )
            resumed = ckpt.resume and bool(status.behaviors)
            # A resumed run continues its clock and its TensorBoard curves from the checkpoint
            # (its step is known once it is restored, below, before anything is written).
            elapsed = max((status.get_elapsed_seconds(n) for n in status.behaviors), default=0.0) if resumed else 0.0
            # The writers open their files at the first write, after --force has cleared the run.
            tensorboard = TensorboardWriter(run_dir)
            writers = [ConsoleWriter(start_time=time.time() - elapsed), tensorboard, CSVWriter(run_dir)]
            for name, spec in specs.items():
                # The checkpoints the restore below tries, in its order.
                sources: List[str] = []
                if model is None and (ckpt.resume or ckpt.inference):
                    sources = [p for _, p in checkpoint_candidates(run_dir, name, status)]
                elif model is None and init_status is not None:
                    sources = [p for _, p in checkpoint_candidates(init_dir, name, init_status)]
                elif model is None and settings_of[name].init_path is not None:
                    sources = [str(settings_of[name].init_path)]
                # A checkpoint of trainer-learn's resnet before Release 22's builds resnet_tf.
                settings, built_note = settings_for_checkpoint(name, settings_of[name], sources)
                if built_note is not None:  # configuration.yaml records what is built
                    print(f"[INFO] {built_note} (configuration.yaml records it)", flush=True)
                    settings_of[name] = settings
                    options = replace(options, behaviors={**options.behaviors, name: settings})
                reporters[name] = StatsReporter(name, writers)
                # A chief's local session only acts: on its CPU, beside the variables.
                if chief is not None and not settings.kind.cluster:
                    # A behavior without a section (refused at load for named ones).
                    raise ConfigError(f"behaviors.{name}.trainer_type: {cluster_refusal(settings.trainer_type)}")
                extra = {"cluster": chief} if chief is not None else {}
                trainer = trainer_classes[settings.trainer_type](
                    name, spec, settings, reporters[name], seed, devices, cpu or chief is not None, **extra
                )
                trainers[name] = trainer
                if model is not None:
                    _load_onnx_policy(trainer, model, name, spec, len(specs))
                elif ckpt.resume or ckpt.inference:
                    step_and_prefix = _restore_for_run(trainer, name, run_dir, status, ckpt)
                    trainer.episodes = status.get_episodes(name) if ckpt.resume else 0
                    if ckpt.resume:
                        restored[name] = step_and_prefix[0]
                        adopt_checkpoint(status, name, *step_and_prefix)
                elif init_status is not None:
                    found = restore_newest(
                        trainer, checkpoint_candidates(init_dir, name, init_status), _warn, reset_step=True
                    )
                    if found is None:
                        raise CheckpointError(f"{ckpt.initialize_from}: no checkpoint of behavior {name}")
                elif settings.init_path:
                    trainer.load(settings.init_path, reset_step=True)
                if ckpt.inference:
                    trainer.step = 0
            # Everything checked and every weight loaded: only now may --force delete.
            if ckpt.force and existed and not ckpt.resume:
                clear_run(run_dir)
            wrote = True
            write_resolved_config(options, layout.configuration)
            if restored:
                tensorboard.resume_from(min(restored.values()))
            for name in trainers:  # after resume_from: the first event opens the event file
                reporters[name].add_property("hyperparameters", settings_of[name])
            formats = () if ckpt.inference else _export_formats()
            controller = TrainerController(
                env,
                trainers,
                reporters,
                run_dir,
                status,
                training=not ckpt.inference,
                on_checkpoint=None if ckpt.inference else export_hook(formats),
                evaluation_env=evaluation_env,
                on_best=export_hook(formats, best=True) if evaluation_env is not None else None,
                curriculum=curriculum,
            )
            controller.run()
        finally:
            try:
                for trainer in trainers.values():
                    trainer.close()
                for reporter in reporters.values():
                    reporter.close()
            finally:
                try:  # last: after a second Ctrl-C it passes the interrupt on, once every worker is gone
                    try:
                        if evaluation_env is not None:
                            evaluation_env.close()
                    finally:
                        env.close()
                finally:
                    if chief is not None:
                        chief.end_workers()  # the run is over: the workers stop serving
    finally:
        lock.release(remove_if_empty=not wrote)
    return controller.exit_code


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Console entry point; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = docopt(__doc__, argv=argv, version=f"trainer-learn {__version__}")
    except DocoptExit as exc:
        print(usage_error("trainer-learn", __doc__, argv, exc), file=sys.stderr)
        return 2
    debug = bool(args.get("--debug"))
    if debug:
        show_tensorflow_logs()  # before TensorFlow is imported
    try:
        if args.get("--worker"):
            return run_worker(args["--cluster"], args.get("--task-index"))
        if args.get("--task-index") is not None:
            raise ConfigError("--task-index: only with --worker")
        from trainers.config import load_settings

        overrides = parse_overrides(args)
        model = args.get("--model")
        if model is not None and not args.get("--inference"):
            raise ConfigError("--model: only with --inference (it plays an exported model without training)")
        options = load_settings(args["<config>"], overrides)
        if args.get("--cluster"):
            # The command line's cluster replaces the config's (and is what configuration.yaml records).
            from dataclasses import replace

            from trainers.config import load_cluster_file

            options = replace(options, cluster_settings=load_cluster_file(args["--cluster"]))
        return run_training(options, cpu=bool(args.get("--cpu")), model=model)
    except (TrainerError, EnvError) as exc:
        if debug:
            raise
        print(f"trainer-learn: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # a read-only or full disk, a folder that is a file: the user's to fix
        if debug:
            raise
        print(f"trainer-learn: error: {os_error_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # Ctrl-C outside the training loop (which saves and returns by itself): while
        # building graphs or waiting for the Unity Editor's Play button, say.
        if debug:
            raise
        print("trainer-learn: interrupted; checkpoints already on disk are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
