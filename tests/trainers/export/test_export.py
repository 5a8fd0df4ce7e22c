"""Tests for trainers/export.py, trainers/onnx_policy.py and trainers/export_cli.py.

Policies are built directly (PPOTrainer + a writer-less StatsReporter, small networks) with
random weights and a non-trivial normalizer, so that the comparisons mean something; one
end-to-end test trains builtin:Simple briefly through trainer-learn and exports the run.
"""
from __future__ import annotations

import os

import numpy as np
import onnx
import onnx.numpy_helper
import pytest

from envs.base_env import ActionSpec, BehaviorSpec, ObservationSpec
from trainers.export import (
    CHECK_TOLERANCE,
    ExportError,
    check_inputs,
    expected_constants,
    export_policy,
    model_feeds,
    onnx_session,
)
from trainers.exceptions import TrainerError
from trainers.export.onnx_policy import ModelError, OnnxPolicy
from trainers.ppo.trainer import PPOTrainer
from trainers.config import NetworkSettings, TrainerSettings
from trainers.stats import StatsReporter
from trainers.tf import tf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

SPECS = {
    "continuous": BehaviorSpec((ObservationSpec((4,)), ObservationSpec((3,))), ActionSpec(2)),
    "discrete": BehaviorSpec((ObservationSpec((6,)),), ActionSpec(0, (3, 2))),
    "hybrid": BehaviorSpec((ObservationSpec((5,)),), ActionSpec(2, (3,))),
    "visual": BehaviorSpec(
        (ObservationSpec((20, 20, 3), "camera", "visual"), ObservationSpec((4,))), ActionSpec(1, (2,))
    ),
}

V3_OUTPUTS = {
    "continuous": [
        "version_number",
        "memory_size",
        "continuous_actions",
        "continuous_action_output_shape",
        "deterministic_continuous_actions",
    ],
    "discrete": [
        "version_number",
        "memory_size",
        "discrete_actions",
        "discrete_action_output_shape",
        "deterministic_discrete_actions",
    ],
}
V3_OUTPUTS["hybrid"] = V3_OUTPUTS["continuous"] + V3_OUTPUTS["discrete"][2:]
V3_OUTPUTS["visual"] = V3_OUTPUTS["hybrid"]
V3_INPUTS = {
    "continuous": ["obs_0", "obs_1"],
    "discrete": ["obs_0", "action_masks"],
    "hybrid": ["obs_0", "action_masks"],
    "visual": ["obs_0", "obs_1", "action_masks"],
}


def make_trainer(kind: str, devices=("/cpu:0",), seed: int = 3) -> PPOTrainer:
    network = NetworkSettings(hidden_units=16, num_layers=2, normalize=True, activation="tanh")
    settings = TrainerSettings(network_settings=network)
    spec = SPECS[kind]
    trainer = PPOTrainer(kind, spec, settings, StatsReporter(kind, []), seed, devices)
    randomize(trainer.policy, seed)
    return trainer


def randomize(policy, seed: int) -> None:
    """Large random actor weights and a non-trivial normalizer (the graph is finalized:
    ``Variable.load`` only feeds the existing initializers)."""
    rng = np.random.default_rng(seed)
    for v in policy.graph.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES):
        if v.op.name.startswith("policy/"):
            shape = v.shape.as_list()
            v.load(rng.normal(0.0, 0.5, shape).astype(np.float32), policy.session)
    obs = [rng.normal(3.0, 2.0, (50,) + o.shape).astype(np.float32) for o in policy.spec.observation_specs]
    policy.update_normalization(obs)


@pytest.fixture(scope="module")
def trainers():
    built = {}

    def get(kind):
        if kind not in built:
            built[kind] = make_trainer(kind)
        return built[kind]

    yield get
    for t in built.values():
        t.close()


def io_names(path):
    model = onnx.load(path)
    return [i.name for i in model.graph.input], [o.name for o in model.graph.output], model


def elem_type(value):
    return onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)


def run_model(path, kind, n, seed=1, legacy=False):
    spec = SPECS[kind]
    obs, masks = check_inputs(spec, n=n, seed=seed)
    sess = onnx_session(path)
    feeds = model_feeds([i.name for i in sess.get_inputs()], spec, obs, masks, legacy)
    out_names = [o.name for o in sess.get_outputs()]
    return obs, masks, dict(zip(out_names, sess.run(out_names, feeds)))


# ------------------------------------------------------------------ contract


@pytest.mark.parametrize("kind", ["continuous", "discrete", "hybrid", "visual"])
def test_contract_names_constants_and_equality(kind, trainers, tmp_path):
    trainer = trainers(kind)
    result = export_policy(trainer.policy, str(tmp_path), step=1234)
    spec = SPECS[kind]
    for f in (f"{kind}.onnx", f"{kind}.pb", f"{kind}-1234.onnx", f"{kind}-1234.pb"):
        assert os.path.isfile(tmp_path / f), f
    assert result.onnx_path == str(tmp_path / f"{kind}.onnx")
    inputs, outputs, model = io_names(result.onnx_path)
    assert inputs == V3_INPUTS[kind] == result.input_names
    assert outputs == V3_OUTPUTS[kind] == result.output_names
    assert not any(":" in n for n in inputs + outputs)
    assert {o.domain for o in model.opset_import} == {""}
    # Inputs: float32, dynamic batch named "batch", visual in NCHW.
    for value, o in zip(model.graph.input, spec.observation_specs):
        dims = [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
        want = [o.shape[2], o.shape[0], o.shape[1]] if o.kind.value == "visual" else list(o.shape)
        assert dims == ["batch"] + want
        assert elem_type(value) == np.float32
    # Every output is produced by a node (no bare initializers).
    produced = {out for node in model.graph.node for out in node.output}
    assert set(outputs) <= produced
    # Checked against the live graph by both runtimes.
    assert set(result.diffs) == {"onnx", "pb"}
    assert 0.0 <= result.max_diff <= CHECK_TOLERANCE
    # Constants and dtypes, at batch 1 and 64.
    for n in (1, 64):
        obs, masks, got = run_model(result.onnx_path, kind, n)
        for key, want in expected_constants(spec, legacy=False).items():
            assert got[key].dtype == np.float32 and got[key].shape == want.shape
            np.testing.assert_array_equal(got[key], want)
        assert got["version_number"].tolist() == [3.0] and got["memory_size"].tolist() == [0.0]
        feed = {ph: o for ph, o in zip(trainer.policy.obs, obs)}
        if masks is not None:
            feed[trainer.policy.action_masks] = masks
        if spec.action_spec.is_continuous:
            c = spec.action_spec.continuous_size
            assert got["continuous_actions"].shape == (n, c) and got["continuous_actions"].dtype == np.float32
            assert np.all(np.abs(got["continuous_actions"]) <= 1.0)
            live = trainer.policy.session.run(trainer.policy.deterministic_continuous, feed)
            np.testing.assert_allclose(got["deterministic_continuous_actions"], live, atol=CHECK_TOLERANCE, rtol=0)
            assert got["continuous_action_output_shape"].tolist() == [float(c)]
        if spec.action_spec.is_discrete:
            b = spec.action_spec.discrete_size
            for key in ("discrete_actions", "deterministic_discrete_actions"):
                assert got[key].shape == (n, b) and got[key].dtype == np.int64
            live = trainer.policy.session.run(trainer.policy.deterministic_discrete, feed)
            np.testing.assert_array_equal(got["deterministic_discrete_actions"], live)
            assert got["discrete_action_output_shape"].tolist() == [list(map(float, spec.action_spec.discrete_branches))]
    # The frozen graph holds no variable and no training op.
    graph_def = tf.GraphDef()
    with open(result.pb_path, "rb") as stream:
        graph_def.ParseFromString(stream.read())
    ops = {node.op for node in graph_def.node}
    assert not ops & {"VarHandleOp", "VariableV2", "ReadVariableOp", "ApplyAdam", "ResourceApplyAdam"}
    assert not any(node.name.startswith(("critic", "tower", "update")) for node in graph_def.node)


def test_masked_discrete_actions_are_never_chosen(trainers, tmp_path):
    trainer = trainers("discrete")
    result = export_policy(trainer.policy, str(tmp_path), check=False)
    sess = onnx_session(result.onnx_path)
    rng = np.random.default_rng(7)
    n = 256
    obs = rng.normal(3.0, 4.0, (n, 6)).astype(np.float32)
    # Mask the action the unmasked policy prefers, plus random others (one stays allowed).
    free = sess.run(["deterministic_discrete_actions"], {"obs_0": obs, "action_masks": np.ones((n, 5), np.float32)})[0]
    masks = (rng.uniform(size=(n, 5)) < 0.5).astype(np.float32)
    offset = 0
    for branch, size in enumerate((3, 2)):
        masks[np.arange(n), offset + free[:, branch]] = 0.0
        keep = np.array([rng.choice([j for j in range(size) if j != f]) for f in free[:, branch]])
        masks[np.arange(n), offset + keep] = 1.0
        offset += size
    for _ in range(3):
        det, sampled = sess.run(
            ["deterministic_discrete_actions", "discrete_actions"], {"obs_0": obs, "action_masks": masks}
        )
        offset = 0
        for branch, size in enumerate((3, 2)):
            assert np.all(masks[np.arange(n), offset + det[:, branch]] == 1.0)
            assert np.all(masks[np.arange(n), offset + sampled[:, branch]] == 1.0)
            offset += size
    assert np.any(det != free)  # the masks changed decisions
    live = trainer.policy.act([obs], masks, deterministic=True).discrete
    np.testing.assert_array_equal(det, live)


def test_sampled_continuous_actions_vary_and_stay_clipped(trainers, tmp_path):
    result = export_policy(trainers("continuous").policy, str(tmp_path), formats=("onnx",), check=False)
    sess = onnx_session(result.onnx_path)
    feeds = {"obs_0": np.zeros((64, 4), np.float32), "obs_1": np.zeros((64, 3), np.float32)}
    a = sess.run(["continuous_actions"], feeds)[0]
    b = sess.run(["continuous_actions"], feeds)[0]
    assert np.all(np.abs(a) <= 1.0) and not np.array_equal(a, b)
    assert len(np.unique(a[:, 0])) > 32  # per-row noise, not one draw broadcast


def test_export_is_independent_of_tower_count(tmp_path):
    one = make_trainer("hybrid", devices=("/cpu:0",), seed=5)
    two = make_trainer("hybrid", devices=("/cpu:0", "/cpu:1"), seed=5)
    try:
        assert len(two.optimizer.towers.tower_stats) == 2 and len(one.optimizer.towers.tower_stats) == 1
        r1 = export_policy(one.policy, str(tmp_path / "one"))
        r2 = export_policy(two.policy, str(tmp_path / "two"))
    finally:
        one.close()
        two.close()
    i1, o1, m1 = io_names(r1.onnx_path)
    i2, o2, m2 = io_names(r2.onnx_path)
    assert (i1, o1) == (i2, o2)
    assert [n.op_type for n in m1.graph.node] == [n.op_type for n in m2.graph.node]
    weights = [sorted(onnx.numpy_helper.to_array(t).tobytes() for t in m.graph.initializer) for m in (m1, m2)]
    assert weights[0] == weights[1]
    _, _, g1 = run_model(r1.onnx_path, "hybrid", 32)
    _, _, g2 = run_model(r2.onnx_path, "hybrid", 32)
    for key in ("deterministic_continuous_actions", "deterministic_discrete_actions"):
        np.testing.assert_array_equal(g1[key], g2[key])
    frozen = []
    for path in (r1.pb_path, r2.pb_path):
        graph_def = tf.GraphDef()
        with open(path, "rb") as stream:
            graph_def.ParseFromString(stream.read())
        frozen.append({node.name: node for node in graph_def.node})
    assert frozen[0] == frozen[1]  # the same nodes and weights (the order may differ)


# ------------------------------------------------------------------ legacy names


def test_legacy_names_continuous_and_discrete(trainers, tmp_path):
    cont = export_policy(trainers("continuous").policy, str(tmp_path / "c"), legacy_names=True)
    inputs, outputs, model = io_names(cont.onnx_path)
    assert inputs == ["vector_observation", "epsilon"]
    assert outputs == [
        "action",
        "action_probs",
        "version_number",
        "memory_size",
        "is_continuous_control",
        "action_output_shape",
    ]
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim][1:] == [7]
    assert cont.version == 2 and cont.max_diff <= CHECK_TOLERANCE
    _, _, got = run_model(cont.onnx_path, "continuous", 8, legacy=True)
    assert got["version_number"].tolist() == [2] and got["version_number"].dtype == np.int32
    assert got["is_continuous_control"].tolist() == [1] and got["action_output_shape"].tolist() == [2]

    disc = export_policy(trainers("discrete").policy, str(tmp_path / "d"), legacy_names=True)
    inputs, outputs, _ = io_names(disc.onnx_path)
    assert inputs == ["vector_observation", "action_masks"]
    assert outputs[:2] == ["action", "action_probs"]
    _, masks, got = run_model(disc.onnx_path, "discrete", 8, legacy=True)
    assert got["action"].shape == (8, 5) and got["action_output_shape"].tolist() == [5]
    assert got["is_continuous_control"].tolist() == [0]
    np.testing.assert_allclose(got["action_probs"][:, :3].sum(axis=1), 1.0, atol=1e-5)
    assert np.all(got["action_probs"][masks == 0] < 1e-6)


def test_action_clip_is_exported(tmp_path):
    """PPO's ``action_clip`` (here 2) is in the exported graphs: the ONNX model's actions are
    the live policy's, clip(a, -2, 2) / 2, in the current names and the legacy ones."""
    from trainers.config import PPOSettings

    network = NetworkSettings(hidden_units=16, num_layers=2, activation="tanh")
    settings = TrainerSettings(hyperparameters=PPOSettings(action_clip=2.0), network_settings=network)
    spec = SPECS["continuous"]
    trainer = PPOTrainer("clip", spec, settings, StatsReporter("clip", []), 3)
    try:
        randomize(trainer.policy, 3)  # weights of std 0.5: means beyond +-2 on some rows
        result = export_policy(trainer.policy, str(tmp_path / "v3"), formats=("onnx",))
        assert result.max_diff <= CHECK_TOLERANCE
        obs, _, got = run_model(result.onnx_path, "continuous", 64)
        mean = trainer.policy.session.run(trainer.policy.actor.continuous.mean, dict(zip(trainer.policy.obs, obs)))
        assert np.any(np.abs(mean) > 2.0) and np.any(np.abs(mean) < 2.0)
        np.testing.assert_allclose(got["deterministic_continuous_actions"], np.clip(mean, -2, 2) / 2, atol=1e-5)
        legacy = export_policy(trainer.policy, str(tmp_path / "v2"), formats=("onnx",), legacy_names=True)
        sess = onnx_session(legacy.onnx_path)
        zero = np.zeros((64, 2), np.float32)  # epsilon 0: the mean's action
        (action,) = sess.run(["action"], {"vector_observation": np.concatenate(obs, axis=1), "epsilon": zero})
        np.testing.assert_allclose(action, np.clip(mean, -2, 2) / 2, atol=1e-5)
    finally:
        trainer.close()


def test_legacy_visual_input_is_nhwc(tmp_path):
    spec = BehaviorSpec((ObservationSpec((20, 20, 3), "cam", "visual"), ObservationSpec((4,))), ActionSpec(0, (2,)))
    network = NetworkSettings(hidden_units=8, num_layers=1)
    trainer = PPOTrainer("V", spec, TrainerSettings(network_settings=network), StatsReporter("V", []), 1)
    try:
        result = export_policy(trainer.policy, str(tmp_path), legacy_names=True, formats=("onnx",))
    finally:
        trainer.close()
    inputs, _, model = io_names(result.onnx_path)
    assert inputs == ["vector_observation", "visual_observation_0", "action_masks"]
    dims = [d.dim_param or d.dim_value for d in model.graph.input[1].type.tensor_type.shape.dim]
    assert dims == ["batch", 20, 20, 3]


def test_legacy_names_reject_hybrid(trainers, tmp_path):
    with pytest.raises(ExportError, match="hybrid"):
        export_policy(trainers("hybrid").policy, str(tmp_path), legacy_names=True)


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"formats": ("zip",)}, "unknown export format 'zip'"),
        ({"opset": 5}, "opset 5 is not supported"),
        ({"opset": 99}, "opset 99 is not supported"),
        ({"opset": "x"}, "opset: expected an integer"),
    ],
)
def test_export_errors(kwargs, message, trainers, tmp_path):
    with pytest.raises(ExportError, match=message) as info:
        export_policy(trainers("continuous").policy, str(tmp_path), **kwargs)
    assert isinstance(info.value, TrainerError) and "\n" not in str(info.value)
    assert not os.listdir(tmp_path)


def test_check_detects_a_mismatch(trainers, tmp_path, monkeypatch):
    import trainers.export.check as export

    real = export._live_reference

    def shifted(*args, **kwargs):
        out = real(*args, **kwargs)
        out["deterministic_continuous_actions"] = out["deterministic_continuous_actions"] + 1e-3
        return out

    monkeypatch.setattr(export, "_live_reference", shifted)
    with pytest.raises(ExportError, match="differs from the training graph by 0.001"):
        export_policy(trainers("continuous").policy, str(tmp_path))
    assert not os.listdir(tmp_path)  # nothing written when the check fails


# ------------------------------------------------------------------ OnnxPolicy


def test_onnx_policy_matches_live_policy(trainers, tmp_path):
    trainer = trainers("visual")
    result = export_policy(trainer.policy, str(tmp_path), formats=("onnx",), check=False)
    spec = SPECS["visual"]
    policy = OnnxPolicy(result.onnx_path, spec)
    assert policy.version == 3
    obs, masks = check_inputs(spec, n=10, seed=4)  # env layout: visual NHWC
    got = policy.act(obs, masks, deterministic=True)
    want = trainer.policy.act(obs, masks, deterministic=True)
    np.testing.assert_allclose(got.env_continuous, want.env_continuous, atol=CHECK_TOLERANCE, rtol=0)
    np.testing.assert_array_equal(got.discrete, want.discrete)
    assert got.discrete.dtype == np.int32 and got.env_continuous.dtype == np.float32
    sampled = policy.act(obs, masks, deterministic=False)
    assert sampled.env_continuous.shape == (10, 1) and np.all(np.abs(sampled.env_continuous) <= 1)
    assert np.all(masks[np.arange(10), sampled.discrete[:, 0]] == 1)
    assert policy.act(obs, None).discrete.shape == (10, 1)
    policy.close()  # closable like the TF policy's session (PPOTrainer.close() calls it)
    with pytest.raises(RuntimeError, match="closed"):
        policy.act(obs, masks)


@pytest.mark.parametrize(
    "spec, message",
    [
        (BehaviorSpec((ObservationSpec((5,)),), ActionSpec(2)), r"model inputs \['obs_0', 'action_masks'\]"),
        (BehaviorSpec((ObservationSpec((6,)),), ActionSpec(2, (3,))), r"input obs_0 has shape \[5\]"),
        (BehaviorSpec((ObservationSpec((5,)),), ActionSpec(3, (3,))), "2 continuous actions, the behavior 3"),
        (BehaviorSpec((ObservationSpec((5,)),), ActionSpec(2, (4,))), "input action_masks has shape"),
    ],
)
def test_onnx_policy_rejects_a_mismatched_spec(spec, message, trainers, tmp_path):
    path = export_policy(trainers("hybrid").policy, str(tmp_path), formats=("onnx",), check=False).onnx_path
    with pytest.raises(ModelError, match=message) as info:
        OnnxPolicy(path, spec)
    assert str(info.value).startswith(path + ": ") and "\n" not in str(info.value)
    assert isinstance(info.value, TrainerError)


def test_onnx_policy_rejects_legacy_and_missing_files(trainers, tmp_path):
    path = export_policy(trainers("discrete").policy, str(tmp_path), legacy_names=True, check=False).onnx_path
    with pytest.raises(ModelError, match="TF-era model"):
        OnnxPolicy(path, SPECS["discrete"])
    with pytest.raises(ModelError, match="model file not found"):
        OnnxPolicy(str(tmp_path / "nope.onnx"), SPECS["discrete"])
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(ModelError, match="not a loadable ONNX model"):
        OnnxPolicy(str(bad), SPECS["discrete"])


# ------------------------------------------------------------------ CLI, end to end


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    from trainers.cli.learn import main as learn_main

    results = tmp_path_factory.mktemp("results")
    config = os.path.join(ROOT, "config", "ppo", "Simple_discrete.yaml")
    code = learn_main([config, "--max-steps=200", f"--results-dir={results}", "--run-id=run"])
    assert code == 0
    return str(results / "run")


def test_cli_exports_a_trained_run(trained_run, tmp_path, capsys):
    from envs.registry import make_env
    from trainers.cli.export import main

    assert main([trained_run, "--check"]) == 0
    out = capsys.readouterr().out
    assert "Simple (step 200)" in out and "onnx deterministic_discrete_actions: max abs diff" in out
    for f in ("Simple.onnx", "Simple.pb", "Simple-200.onnx", "Simple-200.pb"):
        assert os.path.isfile(os.path.join(trained_run, f))
    # The exported model acts in the env it was trained in.
    env = make_env("builtin:Simple", {"continuous": 0, "discrete": 1}, 0, 1)
    try:
        spec = env.behavior_specs["Simple"]
        policy = OnnxPolicy(os.path.join(trained_run, "Simple.onnx"), spec)
        env.reset()
        decision, _ = env.get_steps("Simple")
        info = policy.act(decision.obs, None)
        assert info.discrete.shape == (len(decision), 1)
    finally:
        env.close()
    # One file, one format, from a checkpoint prefix.
    target = tmp_path / "m.onnx"
    prefix = os.path.join(trained_run, "Simple", "checkpoint-200")
    assert main([prefix, f"--out={target}", "--opset=13", "--legacy-names"]) == 0
    assert os.listdir(tmp_path) == ["m.onnx"]
    assert io_names(str(target))[0] == ["vector_observation", "action_masks"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["{run}/Simple/checkpoint-999"], "checkpoint-999: no such run directory or checkpoint"),
        (["{tmp}"], "not a run directory"),
        (["{run}", "--format=zip"], "--format=zip: unknown format"),
        (["{run}", "--opset=5"], "opset 5 is not supported"),
        (["{run}", "--opset=99"], "opset 99 is not supported"),
        (["{run}", "--behavior=Other"], "no checkpoint of behavior 'Other'"),
        (["{run}", "--out={tmp}/x.pb", "--format=onnx"], "is a .pb file but --format=onnx"),
    ],
)
def test_cli_errors(args, message, trained_run, tmp_path, capsys):
    from trainers.cli.export import main

    argv = [a.format(run=trained_run, tmp=tmp_path) for a in args]
    assert main(argv) == 1
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainer-export: error: ")
    assert message in lines[0]
    assert "Traceback" not in err


def test_cli_debug_raises(trained_run):
    from trainers.cli.export import main

    with pytest.raises(ExportError):
        main([trained_run, "--opset=5", "--debug"])


def test_cli_missing_checkpoint_file_in_status(trained_run, tmp_path, capsys):
    """The status names a checkpoint whose files were deleted."""
    import shutil

    from trainers.cli.export import main

    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    for f in os.listdir(copy / "Simple"):
        if f.startswith("checkpoint-200"):
            os.remove(copy / "Simple" / f)
    assert main([str(copy)]) == 1
    assert "checkpoint of behavior Simple not found" in capsys.readouterr().err


def _no_env(*args, **kwargs):
    raise AssertionError("trainer-export built an environment")


def test_cli_exports_from_the_recorded_spec_without_an_env(trained_run, tmp_path, capsys, monkeypatch):
    """A run records its behavior specs in training_status.json: exporting it needs no env
    (a Unity build gone, a Gymnasium package uninstalled), and the export still verifies."""
    import json
    import shutil

    import envs.managers
    from envs.registry import make_env
    from trainers.cli.export import main
    from trainers.layout import RunLayout
    from trainers.loop.status import TrainingStatus

    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    layout = RunLayout(str(copy))
    env = make_env("builtin:Simple", {"continuous": 0, "discrete": 1}, 0, 1)
    try:
        assert TrainingStatus.load(layout.training_status).get_behavior_spec("Simple") == env.behavior_specs["Simple"]
    finally:
        env.close()
    # The env can neither be built nor found.
    monkeypatch.setattr(envs.managers, "make_env_manager", _no_env)
    config = open(layout.configuration).read()
    assert "env_path: builtin:Simple" in config
    with open(layout.configuration, "w") as f:
        f.write(config.replace("env_path: builtin:Simple", "env_path: builtin:NoSuchEnv"))
    out_dir = tmp_path / "out"
    assert main([str(copy), f"--out={out_dir}", "--check"]) == 0
    out = capsys.readouterr().out
    assert "Simple (step 200)" in out and "onnx deterministic_discrete_actions: max abs diff" in out
    assert sorted(os.listdir(out_dir)) == ["Simple-200.onnx", "Simple-200.pb", "Simple.onnx", "Simple.pb"]
    assert io_names(str(out_dir / "Simple.onnx"))[0] == ["obs_0", "action_masks"]
    # One checkpoint prefix: the run's status still tells.
    assert main([layout.checkpoint_prefix("Simple", 200), f"--out={tmp_path / 'one.onnx'}"]) == 0
    assert os.path.isfile(tmp_path / "one.onnx")
    # The spec really came from the status: without it, the missing env is what is reported.
    data = json.loads(open(layout.training_status).read())
    del data["behaviors"]["Simple"]["behavior_spec"]
    with open(layout.training_status, "w") as f:
        json.dump(data, f)
    with pytest.raises(AssertionError, match="built an environment"):
        main([str(copy), f"--out={tmp_path / 'again'}"])


def test_cli_exports_a_run_without_recorded_specs_through_its_env(trained_run, tmp_path, capsys, monkeypatch):
    """A run trained before specs were recorded (its status has none) builds its env, as
    before."""
    import json
    import shutil

    import envs.managers
    from trainers.cli.export import main
    from trainers.layout import RunLayout

    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    layout = RunLayout(str(copy))
    data = json.loads(open(layout.training_status).read())
    for entry in data["behaviors"].values():
        del entry["behavior_spec"]
    with open(layout.training_status, "w") as f:
        json.dump(data, f)
    built = []
    real = envs.managers.make_env_manager

    def counting(*args, **kwargs):
        built.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(envs.managers, "make_env_manager", counting)
    out_dir = tmp_path / "out"
    assert main([str(copy), f"--out={out_dir}", "--check"]) == 0
    assert built == ["builtin:Simple"]
    assert "Simple (step 200)" in capsys.readouterr().out
    assert sorted(os.listdir(out_dir)) == ["Simple-200.onnx", "Simple-200.pb", "Simple.onnx", "Simple.pb"]
