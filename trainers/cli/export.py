"""trainer-export: export trained policies to ONNX (Unity Inference Engine / Sentis) and .pb.

Usage:
  trainer-export <run-dir-or-checkpoint> [options]
  trainer-export --help

Arguments:
  <run-dir-or-checkpoint>  A run directory (results/<run-id>): every behavior's latest
                           checkpoint is exported; or one checkpoint prefix
                           (results/<run-id>/<Behavior>/checkpoint-<step>).

Options:
  --out=<file-or-dir>  Directory for <Behavior>.onnx/.pb and <Behavior>-<step>.onnx/.pb
                       (default: the run directory), or a .onnx/.pb file name when one
                       behavior is exported.
  --format=<format>    onnx, pb or both (default: both; with --out=<file>, its extension).
  --opset=<n>          ONNX opset, 9 to 18 [default: 9] (Barracuda: up to 12; Sentis: up to 15).
  --legacy-names       TF-era names (version_number 2: vector_observation, action, ...)
                       for older Unity runtimes.
  --check              Print the comparison of the exported model(s) with the training
                       graph (max abs difference per output). The check itself always runs.
  --behavior=<name>    Export only this behavior.
  --debug              Print tracebacks for errors.
  -h --help            Show this help.
"""
from __future__ import annotations

import glob
import os
import re
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from docopt import DocoptExit, docopt

from envs.base_env import BehaviorSpec, specs_by_name
from envs.exceptions import EnvError
from trainers import show_tensorflow_logs
from trainers.cli import usage_error
from trainers.exceptions import CheckpointError, ConfigError, TrainerError, op_error_reason, os_error_line
from trainers.layout import (
    CHECKPOINT_PATTERN,
    CONFIGURATION_FILE,
    RUN_LOGS_DIR,
    TRAINING_STATUS_FILE,
    RunLayout,
    behavior_dir_name,
)

FORMAT_CHOICES = {"onnx": ("onnx",), "pb": ("pb",), "both": ("pb", "onnx")}
FILE_EXTENSIONS = (".onnx", ".pb")
_CHECKPOINT_SUFFIX = re.compile(r"\.(index|meta|data-\d+-of-\d+)$")
_STEP = re.compile(CHECKPOINT_PATTERN + "$")


@dataclass
class Target:
    """One behavior to export: its checkpoint prefix and step."""

    behavior: str
    prefix: str
    step: Optional[int]


def _resolve_prefix(run_dir: str, behavior: str, file_path: str) -> str:
    """A status entry -> its checkpoint prefix inside ``run_dir`` (the controller saves in
    ``<run_dir>/<behavior>/``; the status may hold a path relative to where training ran,
    or the run may have been moved or copied since)."""
    return RunLayout(run_dir).in_run(behavior, file_path)


def latest_checkpoints(run_dir: str, behavior: Optional[str]) -> List[Target]:
    from trainers.loop.status import TrainingStatus

    status_path = RunLayout(run_dir).training_status
    if not os.path.isfile(status_path):
        raise CheckpointError(
            f"{run_dir}: no {os.path.join(RUN_LOGS_DIR, TRAINING_STATUS_FILE)}; is this a run directory?"
        )
    status = TrainingStatus.load(status_path)
    names = list(status.behaviors)
    if behavior is not None:
        if behavior not in status.behaviors:
            raise CheckpointError(
                f"{run_dir}: no checkpoint of behavior {behavior!r} (the run has: {', '.join(names) or 'none'})"
            )
        names = [behavior]
    targets = []
    for name in names:
        entries = status.get_checkpoints(name)
        final = status.get_final_checkpoint(name)
        if final is not None:
            entries.append(final)
        if not entries:
            if behavior is not None:
                raise CheckpointError(f"{run_dir}: no checkpoint of behavior {name!r}")
            continue
        latest = max(entries, key=lambda e: e.steps)
        targets.append(Target(name, _resolve_prefix(run_dir, name, latest.file_path), latest.steps))
    if not targets:
        raise CheckpointError(f"{run_dir}: the run has no checkpoint to export")
    return targets


def _behavior_of_folder(run_dir: str, folder: str) -> str:
    """The behavior whose folder a checkpoint is in: the run's behavior whose
    `behavior_dir_name` is ``folder`` (``ALE/Pong-v5`` for ``ALE_Pong-v5``), else the folder."""
    from trainers.loop.status import TrainingStatus

    status_path = RunLayout(run_dir).training_status
    if os.path.isfile(status_path):
        for name in TrainingStatus.load(status_path).behaviors:
            if behavior_dir_name(name) == folder:
                return name
    return folder


def _locate(path: str, behavior: Optional[str]) -> Tuple[str, List[Target]]:
    """``<run-dir-or-checkpoint>`` -> (run directory, behaviors to export)."""
    path = path.rstrip("/") or path
    if os.path.isdir(path):
        if not os.path.isfile(RunLayout(path).configuration):
            raise CheckpointError(f"{path}: not a run directory (no {CONFIGURATION_FILE})")
        return path, latest_checkpoints(path, behavior)
    prefix = _CHECKPOINT_SUFFIX.sub("", path)
    if not glob.glob(prefix + ".index"):
        raise CheckpointError(f"{path}: no such run directory or checkpoint")
    layout = RunLayout.of_checkpoint(prefix)
    run_dir = layout.run_dir
    if not os.path.isfile(layout.configuration):
        raise CheckpointError(
            f"{prefix}: no {CONFIGURATION_FILE} in {run_dir}; a checkpoint must be inside its run directory"
        )
    name = behavior or _behavior_of_folder(run_dir, os.path.basename(os.path.dirname(os.path.abspath(prefix))))
    match = _STEP.search(os.path.basename(prefix))
    return run_dir, [Target(name, prefix, int(match.group(1)) if match else None)]


def _formats_and_out(args: Dict, run_dir: str, count: int) -> Tuple[Tuple[str, ...], str, Optional[str]]:
    """-> (formats, output directory, file stem or None)."""
    out = args.get("--out")
    fmt = args.get("--format")
    stem = None
    out_dir = run_dir
    ext = None
    if out:
        base, extension = os.path.splitext(out)
        if extension in FILE_EXTENSIONS:
            if count != 1:
                raise ConfigError(
                    f"--out={out}: a file name needs exactly one behavior, the run has {count}; "
                    "give a directory or --behavior"
                )
            ext = extension[1:]
            out_dir = os.path.dirname(out) or "."
            stem = os.path.basename(base)
        else:
            out_dir = out
    if fmt is None:
        formats = (ext,) if ext else FORMAT_CHOICES["both"]
    else:
        if fmt not in FORMAT_CHOICES:
            raise ConfigError(f"--format={fmt}: unknown format; expected onnx, pb or both")
        formats = FORMAT_CHOICES[fmt]
        if ext and ext not in formats:
            raise ConfigError(f"--out={out} is a .{ext} file but --format={fmt}")
    return formats, out_dir, stem


def _specs_from_status(run_dir: str, wanted: Sequence[str]) -> Optional[Dict[str, BehaviorSpec]]:
    """The behavior specs the run recorded in its ``training_status.json`` (every run trained
    since specs are recorded there), so that no env is needed; None when one of ``wanted``
    has none (an older run) and the env must tell."""
    from trainers.loop.status import TrainingStatus

    try:
        status = TrainingStatus.load(RunLayout(run_dir).training_status)
    except CheckpointError:
        # Exporting one checkpoint prefix never needed the status: a damaged one leaves
        # the env to tell, as before specs were recorded (a run directory's status was
        # already read whole by latest_checkpoints).
        return None
    specs: Dict[str, BehaviorSpec] = {}
    for name in wanted:
        spec = status.get_behavior_spec(name)
        if spec is None:
            return None
        specs[name] = spec
    return specs


def _spec_from_env(options, wanted: Sequence[str]):
    """Behavior specs from a short-lived env, for runs whose status records none (trained
    before `TrainingStatus` kept them)."""
    from envs.managers import make_env_manager

    env_settings = options.env_settings
    if env_settings.env_path is None:
        raise ConfigError("env_settings.env_path: the run's configuration names no environment to read the behavior specs from")
    seed = env_settings.seed if env_settings.seed >= 0 else 0
    env = make_env_manager(env_settings.env_path, env_settings.env_args, 1, env_settings.agents_per_env, seed)
    try:
        specs = specs_by_name(env.behavior_specs)
    finally:
        env.close()
    for name in wanted:
        if name not in specs:
            raise ConfigError(
                f"behavior {name!r}: the environment {env_settings.env_path} has no such behavior "
                f"(it has: {', '.join(specs)})"
            )
    return specs


def restore_policy(name: str, spec, settings, prefix: str, seed: int):
    """The actor alone (no optimizer, no reward signals), restored from a trainer checkpoint."""
    from trainers.graph import BehaviorGraph
    from trainers.policy import Policy
    from trainers.tf import tf

    policy = Policy(name, spec, settings, BehaviorGraph(settings, spec, seed, cpu_only=True))
    with policy.graph.as_default():
        saver = tf.train.Saver(var_list=policy.graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES))
    try:
        saver.restore(policy.session, prefix)
    except (tf.errors.OpError, ValueError) as exc:
        policy.session.close()
        raise CheckpointError(f"{prefix}: cannot restore behavior {name} ({op_error_reason(exc)})") from None
    return policy


def run(args: Dict) -> int:
    from trainers.export import DEFAULT_OPSET, check_opset, export_policy, format_diffs
    from trainers.config import load_settings
    from trainers.tf.encoder_compat import settings_for_checkpoint

    opset = check_opset(args.get("--opset") or DEFAULT_OPSET)
    run_dir, targets = _locate(args["<run-dir-or-checkpoint>"], args.get("--behavior"))
    formats, out_dir, stem = _formats_and_out(args, run_dir, len(targets))
    options = load_settings(RunLayout(run_dir).configuration)
    for t in targets:
        if not glob.glob(t.prefix + ".index"):
            raise CheckpointError(f"{t.prefix}: checkpoint of behavior {t.behavior} not found")
    wanted = [t.behavior for t in targets]
    specs = _specs_from_status(run_dir, wanted)
    if specs is None:  # a run trained before its status recorded specs: its env tells
        specs = _spec_from_env(options, wanted)
    seed = max(options.env_settings.seed, 0)
    for t in targets:
        # A checkpoint of trainer-learn's resnet before Release 22's builds resnet_tf.
        settings, built_note = settings_for_checkpoint(t.behavior, options.behavior_settings(t.behavior), [t.prefix])
        if built_note is not None:
            print(f"[INFO] {built_note}", flush=True)
        policy = restore_policy(t.behavior, specs[t.behavior], settings, t.prefix, seed)
        try:
            step = t.step if t.step is not None else policy.get_step()
            result = export_policy(
                policy,
                out_dir,
                step=None if stem else step,
                formats=formats,
                opset=opset,
                legacy_names=bool(args.get("--legacy-names")),
                check=True,
                file_stem=stem or behavior_dir_name(t.behavior),
            )
        finally:
            policy.session.close()
        print(f"{t.behavior} (step {step}): {', '.join(result.files)}")
        if args.get("--check"):
            for line in format_diffs(result):
                print(f"  {line}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Console entry point; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = docopt(__doc__, argv=argv)
    except DocoptExit as exc:
        print(usage_error("trainer-export", __doc__ or "", argv, exc), file=sys.stderr)
        return 2
    debug = bool(args.get("--debug"))
    if debug:
        show_tensorflow_logs()  # before TensorFlow is imported
    try:
        return run(args)
    except (TrainerError, EnvError) as exc:
        if debug:
            raise
        print(f"trainer-export: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # --out in a read-only or missing place, a full disk
        if debug:
            raise
        print(f"trainer-export: error: {os_error_line(exc)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
