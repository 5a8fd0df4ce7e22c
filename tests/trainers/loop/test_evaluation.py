"""``evaluation:``: deterministic episodes on an env of their own every ``interval`` steps,
the ``Environment/Evaluation *`` stats at their step, the best model and its checkpoint,
and training left exactly as it is without evaluation.

The first half drives the controller with the fake trainer of ``test_controller.py`` on
the built-in ``Chain`` (no TensorFlow work); the second trains through ``trainer-learn``."""
from __future__ import annotations

import csv
import json
import os
import signal
from typing import Dict, Hashable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pytest
import yaml
from test_controller import LENGTH, AlwaysRight, FakeTrainer
from trainer_test_utils import config_path

from envs.managers import make_env_manager
from envs.managers.base import EnvManager, EnvStep
from trainers.config import EvaluationSettings, TrainerSettings
from trainers.layout import RunLayout, checkpoint_step
from trainers.loop.controller import EVALUATION_LENGTH_TAG, EVALUATION_REWARD_TAG, TrainerController
from trainers.loop.evaluation import EVALUATION_KEY, EvaluatedBehavior, Evaluator, evaluation_seed
from trainers.loop.status import CheckpointEntry, TrainingStatus
from trainers.policy import ActionInfo
from trainers.stats import StatsReporter, StatsSummary, StatsWriter

ENV_SEED = 0  # the training env's seed in the fake-trainer runs
SIMPLE = config_path("Simple_discrete.yaml")
MEMORY = config_path("Memory.yaml")


# --------------------------------------------------------------- the fake trainer's runs


class RecordingActor(AlwaysRight):
    """`AlwaysRight`, recording each call's ``deterministic`` flag and agent keys; with
    ``recurrent``, it keeps a "memory" per agent key (its number of acts) as `Policy` does."""

    def __init__(self, recurrent: bool = False) -> None:
        super().__init__()
        self.use_recurrent = recurrent  # type: ignore[misc]  (a class attribute in AlwaysRight)
        self.calls_log: List[Tuple[bool, Optional[List[Hashable]]]] = []
        self.memories: Dict[Hashable, int] = {}

    def act(
        self,
        obs: Sequence[np.ndarray],
        action_masks: Optional[np.ndarray] = None,
        deterministic: bool = False,
        agent_keys: Optional[Sequence[Hashable]] = None,
    ) -> ActionInfo:
        self.calls_log.append((deterministic, list(agent_keys) if agent_keys is not None else None))
        if self.use_recurrent:
            assert agent_keys is not None and len(agent_keys) == obs[0].shape[0]
            for key in agent_keys:
                self.memories[key] = self.memories.get(key, 0) + 1
        return super().act(obs, action_masks, deterministic, agent_keys)

    def forget_agents(self, keys: Sequence[Hashable]) -> None:
        super().forget_agents(keys)
        for key in keys:
            self.memories.pop(key, None)


class EvaluatedFakeTrainer(FakeTrainer):
    """The fake trainer with the best model's checkpoint (`Trainer.save_as`)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.best_saves: List[Tuple[int, str]] = []

    def save_as(self, prefix: str) -> None:
        os.makedirs(os.path.dirname(prefix), exist_ok=True)
        open(prefix + ".index", "w").close()
        self.best_saves.append((self.step, prefix))


class ExtraWriter(StatsWriter):
    """Records the summaries written outside the periods (`StatsReporter.write_now`)."""

    def __init__(self) -> None:
        self.extra: List[Tuple[int, Dict[str, StatsSummary]]] = []

    def write_stats(self, category: str, values: Mapping[str, StatsSummary], step: int) -> None:
        pass

    def write_extra(self, category: str, values: Mapping[str, StatsSummary], step: int) -> None:
        self.extra.append((step, dict(values)))


class SignalOnStep(EnvManager):
    """Wraps the evaluation env: sends this process SIGINT at its ``at``-th step."""

    def __init__(self, env: EnvManager, at: int) -> None:
        self.inner, self.at, self.steps = env, at, 0

    @property
    def behavior_specs(self):  # type: ignore[no-untyped-def]
        return self.inner.behavior_specs

    @property
    def num_workers(self) -> int:
        return self.inner.num_workers

    def reset(self) -> List[EnvStep]:
        return self.inner.reset()

    def step(self, actions) -> List[EnvStep]:  # type: ignore[no-untyped-def]
        self.steps += 1
        if self.steps == self.at:
            os.kill(os.getpid(), signal.SIGINT)  # the controller's handler only sets a flag
        return self.inner.step(actions)

    def close(self) -> None:
        self.inner.close()


def _run(
    tmp_path,
    evaluation: Optional[EvaluationSettings],
    recurrent: bool = False,
    status: Optional[TrainingStatus] = None,
    signal_at: Optional[int] = None,
    **settings: object,
):
    options: Dict[str, object] = dict(
        max_steps=24, time_horizon=3, summary_freq=1000, checkpoint_interval=10, keep_checkpoints=2
    )
    options.update(settings)
    env = make_env_manager("builtin:Chain", {"length": LENGTH}, 1, 1, seed=ENV_SEED)
    evaluation_env: Optional[EnvManager] = None
    if evaluation is not None:
        evaluation_env = make_env_manager("builtin:Chain", {"length": LENGTH}, 1, 1, seed=evaluation_seed(ENV_SEED))
        if signal_at is not None:
            evaluation_env = SignalOnStep(evaluation_env, signal_at)
    writer = ExtraWriter()
    try:
        (name,) = env.behavior_specs
        trainer = EvaluatedFakeTrainer(env.behavior_specs[name], TrainerSettings(evaluation=evaluation, **options))
        trainer.actor = RecordingActor(recurrent)
        run_dir = str(tmp_path / "run")
        controller = TrainerController(
            env,
            {name: trainer},  # type: ignore[dict-item]  (a duck-typed Trainer)
            {name: StatsReporter(name, [writer])},
            run_dir,
            status if status is not None else TrainingStatus(),
            evaluation_env=evaluation_env,
        )
        controller.run()
    finally:
        env.close()
        if evaluation_env is not None:
            evaluation_env.close()
    return trainer, controller, writer


def _training_calls(actor: RecordingActor) -> List[Tuple[bool, Optional[List[Hashable]]]]:
    return [c for c in actor.calls_log if not c[0]]


def test_evaluations_run_every_interval_deterministically_and_leave_training_alone(tmp_path):
    evaluated, controller, writer = _run(tmp_path / "on", EvaluationSettings(interval=8, episodes=2))
    plain, _, _ = _run(tmp_path / "off", None)
    # Training saw exactly what it sees without evaluation: same trajectories, episodes,
    # updates, checkpoints, and one inference call per training step.
    assert evaluated.step == plain.step
    assert len(evaluated.trajectories) == len(plain.trajectories)
    for a, b in zip(evaluated.trajectories, plain.trajectories):
        assert a.agent == b.agent and a.done == b.done
        np.testing.assert_array_equal(a.obs[0], b.obs[0])
        np.testing.assert_array_equal(a.rewards, b.rewards)
    assert evaluated.episode_ends == plain.episode_ends and evaluated.episodes == plain.episodes
    assert (evaluated.updates, evaluated.saved) == (plain.updates, plain.saved)
    actor = evaluated.actor
    assert isinstance(actor, RecordingActor)
    assert len(_training_calls(actor)) == evaluated.step  # one agent, one call per step
    # Every interval: 2 whole episodes (4 right moves, reward 1), deterministic, written at
    # the step of the evaluation.
    assert [step for step, _ in writer.extra] == [8, 16, 24]
    for _, values in writer.extra:
        assert values[EVALUATION_REWARD_TAG].mean == pytest.approx(1.0)
        assert values[EVALUATION_REWARD_TAG].num == 2
        assert values[EVALUATION_LENGTH_TAG].mean == LENGTH - 1
    deterministic = [c for c in actor.calls_log if c[0]]
    assert len(deterministic) == 3 * 2 * (LENGTH - 1)
    assert controller.timers.as_dict()["evaluation"] > 0
    # The best checkpoint's writing is saving, not evaluation (benchmark_suite.py subtracts both).
    assert controller.timers.as_dict()["save"] > 0
    # The first evaluation is the best; equal ones later keep it (its step, its files).
    assert evaluated.best_saves == [(8, RunLayout(str(tmp_path / "on" / "run")).best_checkpoint("Chain"))]
    best = controller.status.get_best_checkpoint("Chain")
    assert best is not None and (best.steps, best.reward) == (8, pytest.approx(1.0))
    assert best.file_path == os.path.join("Chain", "checkpoint-best")
    with open(controller.layout.training_status) as f:
        assert json.load(f)["behaviors"]["Chain"]["best_checkpoint"]["steps"] == 8


def test_a_better_best_from_before_a_resume_is_kept(tmp_path):
    status = TrainingStatus()
    status.set_best_checkpoint("Chain", CheckpointEntry(4, "Chain/checkpoint-best", 0.0, 5.0))
    trainer, controller, writer = _run(tmp_path, EvaluationSettings(interval=8, episodes=1), status=status)
    assert len(writer.extra) == 3 and trainer.best_saves == []  # 1.0 never beats 5.0
    best = controller.status.get_best_checkpoint("Chain")
    assert best is not None and (best.steps, best.reward) == (4, 5.0)


def test_recurrent_evaluation_agents_have_their_own_keys_and_are_forgotten(tmp_path):
    snapshots: List[Tuple[Dict[Hashable, int], Dict[Hashable, int]]] = []
    original = TrainerController.evaluate

    def evaluate(self: TrainerController, name: str):  # type: ignore[no-untyped-def]
        memories = self.behaviors[name].trainer.actor.memories  # type: ignore[attr-defined]
        before = dict(memories)
        result = original(self, name)
        snapshots.append((before, dict(memories)))
        return result

    TrainerController.evaluate = evaluate  # type: ignore[method-assign]
    try:
        trainer, _, writer = _run(tmp_path, EvaluationSettings(interval=8, episodes=3), recurrent=True)
    finally:
        TrainerController.evaluate = original  # type: ignore[method-assign]
    assert len(snapshots) == len(writer.extra) == 3
    for before, after in snapshots:
        assert before == after  # the training agents' memories untouched, no evaluation key left
        assert before and all(k[0] != EVALUATION_KEY for k in before)
    actor = trainer.actor
    assert isinstance(actor, RecordingActor)
    evaluation_keys = {k for det, keys in actor.calls_log if det for k in keys or ()}
    training_keys = {k for det, keys in actor.calls_log if not det for k in keys or ()}
    assert evaluation_keys and all(k[0] == EVALUATION_KEY for k in evaluation_keys)
    assert not evaluation_keys & training_keys
    assert all(isinstance(k[0], int) for k in training_keys)  # (worker, agent id)


def test_ctrl_c_during_an_evaluation_saves_and_exits_as_without_one(tmp_path):
    trainer, controller, writer = _run(
        tmp_path, EvaluationSettings(interval=8, episodes=3), recurrent=True, signal_at=2, max_steps=100
    )
    assert controller.exit_code == 130
    assert trainer.step == 8  # the loop ended right after the interrupted evaluation
    assert trainer.saved[-1] == 8  # and saved, as after any Ctrl-C
    assert writer.extra == [] and trainer.best_saves == []  # a cut-short evaluation writes nothing
    actor = trainer.actor
    assert isinstance(actor, RecordingActor)
    assert not [k for k in actor.memories if k[0] == EVALUATION_KEY]


def test_the_controller_needs_the_evaluation_env(tmp_path):
    env = make_env_manager("builtin:Chain", {"length": LENGTH}, 1, 1, seed=ENV_SEED)
    try:
        (name,) = env.behavior_specs
        trainer = EvaluatedFakeTrainer(env.behavior_specs[name], TrainerSettings(evaluation=EvaluationSettings()))
        with pytest.raises(ValueError, match="behaviors.Chain.evaluation: the controller needs an evaluation_env"):
            TrainerController(
                env, {name: trainer}, {name: StatsReporter(name, [])}, str(tmp_path), TrainingStatus()  # type: ignore[dict-item]
            )
    finally:
        env.close()


class AlwaysLeft(AlwaysRight):
    """Never reaches the Chain's end: its episodes only end by the time limit."""

    def act(self, obs, action_masks=None, deterministic=False, agent_keys=None):  # type: ignore[no-untyped-def]
        info = super().act(obs, action_masks, deterministic, agent_keys)
        info.discrete[:] = 0
        return info


def test_an_evaluation_without_ending_episodes_gives_up_after_its_step_budget(monkeypatch):
    """An env without a time limit and a mode that never ends an episode: the evaluation
    stops after episodes x MAX_STEPS_PER_EPISODE steps with no episode, and says so."""
    import trainers.loop.evaluation as evaluation

    monkeypatch.setattr(evaluation, "MAX_STEPS_PER_EPISODE", 30)
    env = make_env_manager("builtin:Chain", {"length": LENGTH, "max_episode_steps": 10**9}, 1, 1, seed=0)
    try:
        (name,) = env.behavior_specs
        actor = AlwaysLeft()
        result = Evaluator(env).run(
            name, 2, {name: EvaluatedBehavior(actor, env.behavior_specs[name])}, lambda: False
        )
    finally:
        env.close()
    assert result is not None and result.rewards == () and result.lengths == ()
    assert actor.calls == 2 * 30  # one deterministic call per env step, up to the budget


def test_evaluation_seed_is_apart_from_the_training_envs():
    assert evaluation_seed(1) == 10_001
    assert 0 <= evaluation_seed(2**31 - 2) < 2**31 - 1


# --------------------------------------------------------------------- real policies


def test_a_deterministic_act_leaves_the_sampling_ops_where_they_were():
    """The policy's sampling is in-graph (stateful random ops, advanced only when they
    run): deterministic calls in between leave the samples exactly as without them."""
    from trainer_test_utils import make_spec, random_obs, small_settings

    from trainers.ppo.trainer import PPOTrainer

    spec = make_spec(continuous=2, branches=(3, 2), vector=4)
    twins = [PPOTrainer("B", spec, small_settings(), StatsReporter("B", []), seed=7) for _ in range(2)]
    obs = random_obs(spec, 5, np.random.default_rng(3))
    try:
        samples = []
        for i, trainer in enumerate(twins):
            drawn = []
            for _ in range(3):
                if i == 0:  # the first twin is "evaluated" between its training acts
                    trainer.policy.act(obs, deterministic=True)
                info = trainer.policy.act(obs)
                drawn.append((info.raw_continuous, info.discrete, info.log_probs))
            samples.append(drawn)
        for a, b in zip(*samples):
            for x, y in zip(a, b):
                np.testing.assert_array_equal(x, y)
    finally:
        for trainer in twins:
            trainer.close()


def test_recurrent_policy_evaluation_keeps_the_training_memories():
    from trainers.config import load_settings
    from trainers.ppo.trainer import PPOTrainer

    settings = load_settings(MEMORY).behaviors["Memory"]
    env = make_env_manager("builtin:Memory", {"continuous": 0, "discrete": 1, "num_agents": 2}, 1, 1, seed=1)
    evaluation_env = make_env_manager(
        "builtin:Memory", {"continuous": 0, "discrete": 1, "num_agents": 2}, 1, 1, seed=evaluation_seed(1)
    )
    spec = env.behavior_specs["Memory"]
    trainer = PPOTrainer("Memory", spec, settings, StatsReporter("Memory", []), seed=1)
    try:
        policy = trainer.policy
        (step,) = env.reset()
        for _ in range(3):  # training agents (0, 0) and (0, 1) build memories
            decision, _ = step.steps["Memory"]
            keys = [(0, a) for a in decision.agent_id.tolist()]
            info = policy.act(list(decision.obs), None, agent_keys=keys)
            from envs.base_env import ActionTuple

            (step,) = env.step([{"Memory": ActionTuple(discrete=info.discrete)}])
        memories = {k: v.copy() for k, v in policy._memories.items()}
        previous = {k: v.copy() for k, v in policy._prev_actions.items()}
        assert len(memories) == 2 and any(np.any(v != 0) for v in memories.values())
        acted: List[List[Hashable]] = []
        original_act = policy.act

        def act(*args, **kwargs):  # type: ignore[no-untyped-def]
            acted.append(list(kwargs["agent_keys"]))
            assert kwargs["deterministic"] is True
            return original_act(*args, **kwargs)

        policy.act = act  # type: ignore[method-assign]
        result = Evaluator(evaluation_env).run(
            "Memory", 4, {"Memory": EvaluatedBehavior(policy, spec)}, stop=lambda: False
        )
        policy.act = original_act  # type: ignore[method-assign]
        assert result is not None and len(result.rewards) == 4
        assert acted and all(k[0] == EVALUATION_KEY for keys in acted for k in keys)
        # The training agents' memories and previous actions are as they were; no evaluation
        # agent is left in the policy's dicts.
        assert set(policy._memories) == set(memories) and set(policy._prev_actions) == set(previous)
        for k, v in memories.items():
            np.testing.assert_array_equal(policy._memories[k], v)
        for k, v in previous.items():
            np.testing.assert_array_equal(policy._prev_actions[k], v)
    finally:
        trainer.close()
        env.close()
        evaluation_env.close()


# ------------------------------------------------------------------ trainer-learn runs


def _config(tmp_path, source: str, name: str, evaluation: Optional[dict], **behavior: object) -> str:
    with open(source) as f:
        cfg = yaml.safe_load(f)
    (section,) = cfg["behaviors"].values()
    section.update(behavior)
    if evaluation is not None:
        section["evaluation"] = evaluation
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def _stat_rows(run_dir, behavior: str, tag: str) -> List[Tuple[int, float, int]]:
    with open(os.path.join(run_dir, behavior, "stats.csv")) as f:
        return [(int(r["step"]), float(r["mean"]), int(r["count"])) for r in csv.DictReader(f) if r["tag"] == tag]


def _best(run_dir, behavior: str) -> Optional[dict]:
    with open(RunLayout(str(run_dir)).training_status) as f:
        return json.load(f)["behaviors"][behavior].get("best_checkpoint")


def _checkpoint_tensors(prefix: str) -> Dict[str, np.ndarray]:
    from trainers.tf import tf

    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def test_cli_evaluation_writes_stats_the_best_model_and_keeps_the_best_over_resume(run_cli, tmp_path):
    from trainers.cli.export import restore_policy
    from trainers.config import load_settings
    from trainers.export.check import check_inputs, model_feeds, onnx_session
    from trainers.loop.checkpoints import checkpoint_candidates
    from trainers.tf import names, tf

    path = _config(
        tmp_path, SIMPLE, "evaluated", {"interval": 200, "episodes": 3},
        max_steps=600, checkpoint_interval=300, keep_checkpoints=1,
    )
    code, out, err = run_cli(path, "--run-id=ev")
    assert code == 0, err
    run_dir = run_cli.results / "ev"
    layout = RunLayout(str(run_dir))
    rewards = _stat_rows(run_dir, "Simple", "Environment/Evaluation Reward")
    assert [(step, count) for step, _, count in rewards] == [(200, 3), (400, 3), (600, 3)]
    lengths = _stat_rows(run_dir, "Simple", "Environment/Evaluation Episode Length")
    assert [step for step, _, _ in lengths] == [200, 400, 600]
    assert "Evaluation Reward:" in out and "New best evaluation reward" in out
    best = _best(run_dir, "Simple")
    assert best is not None and best["file_path"] == os.path.join("Simple", "checkpoint-best")
    assert best["reward"] == pytest.approx(max(r for _, r, _ in rewards))
    assert (best["steps"], best["reward"]) in [(s, pytest.approx(r)) for s, r, _ in rewards]

    # keep_checkpoints=1 pruned the numbered ones, never the best; resuming never takes it.
    files = set(os.listdir(run_dir / "Simple"))
    assert {"checkpoint-best.index", "Simple-best.onnx", "Simple-best.pb"} <= files
    assert sorted(f for f in files if f.endswith(".index")) == ["checkpoint-600.index", "checkpoint-best.index"]
    assert checkpoint_step("checkpoint-best") is None
    candidates = checkpoint_candidates(str(run_dir), "Simple", TrainingStatus.load(layout.training_status))
    assert [step for step, _ in candidates] == [600]

    # The best models load and act as the best checkpoint does.
    options = load_settings(layout.configuration)
    spec_status = TrainingStatus.load(layout.training_status).get_behavior_spec("Simple")
    assert spec_status is not None
    best_prefix = layout.best_checkpoint("Simple")
    policy = restore_policy("Simple", spec_status, options.behavior_settings("Simple"), best_prefix, 0)
    try:
        obs, masks = check_inputs(spec_status)
        live = policy.act(obs, masks, deterministic=True).discrete
    finally:
        policy.session.close()
    session = onnx_session(layout.best_model("Simple", "onnx"))
    feeds = model_feeds([i.name for i in session.get_inputs()], spec_status, obs, masks, legacy=False)
    (onnx_actions,) = session.run([names.DETERMINISTIC_DISCRETE_ACTIONS], feeds)
    np.testing.assert_array_equal(onnx_actions, live)
    graph_def = tf.GraphDef()
    with open(layout.best_model("Simple", "pb"), "rb") as f:
        graph_def.ParseFromString(f.read())
    graph = tf.Graph()
    with graph.as_default():
        tf.import_graph_def(graph_def, name="")
    with tf.Session(graph=graph) as sess:
        pb_actions = sess.run(
            f"{names.DETERMINISTIC_DISCRETE_ACTIONS}:0", {f"{k}:0": v for k, v in feeds.items()}
        )
    np.testing.assert_array_equal(pb_actions, live)

    # --inference plays without evaluating (and without an evaluation env).
    code, out, err = run_cli(path, "--run-id=ev", "--inference", "--max-steps=100")
    assert code == 0, err
    assert "Evaluation Reward" not in out
    assert len(_stat_rows(run_dir, "Simple", "Environment/Evaluation Reward")) == 3

    # --resume keeps the best score: a better one recorded before the resume (here written
    # into the status) is never overwritten by the worse evaluations after it.
    status = json.loads(open(layout.training_status).read())
    status["behaviors"]["Simple"]["best_checkpoint"]["reward"] = 99.0
    with open(layout.training_status, "w") as f:
        json.dump(status, f)
    best_mtime = os.path.getmtime(layout.best_checkpoint("Simple") + ".index")
    code, out, err = run_cli(path, "--run-id=ev", "--resume", "--max-steps=800")
    assert code == 0, err
    assert [s for s, _, _ in _stat_rows(run_dir, "Simple", "Environment/Evaluation Reward")] == [200, 400, 600, 800]
    assert "New best evaluation reward" not in out
    resumed = _best(run_dir, "Simple")
    assert resumed is not None and (resumed["steps"], resumed["reward"]) == (best["steps"], 99.0)
    assert os.path.getmtime(layout.best_checkpoint("Simple") + ".index") == best_mtime

    # A worse best before the resume is replaced by the next evaluation.
    status = json.loads(open(layout.training_status).read())
    status["behaviors"]["Simple"]["best_checkpoint"]["reward"] = -99.0
    with open(layout.training_status, "w") as f:
        json.dump(status, f)
    code, out, err = run_cli(path, "--run-id=ev", "--resume", "--max-steps=1000")
    assert code == 0, err
    replaced = _best(run_dir, "Simple")
    assert replaced is not None and replaced["steps"] == 1000 and replaced["reward"] > -99.0
    assert "New best evaluation reward" in out and "(was -99.000)" in out


@pytest.mark.parametrize(
    "source,behavior,steps",
    [(SIMPLE, "Simple", dict(max_steps=600, checkpoint_interval=300)),
     (MEMORY, "Memory", dict(max_steps=400, checkpoint_interval=200))],
    ids=["feed-forward", "recurrent"],
)
def test_training_is_identical_with_and_without_evaluation(run_cli, tmp_path, monkeypatch, source, behavior, steps):
    interval = steps["checkpoint_interval"] // 2
    with_evaluation = _config(tmp_path, source, "on", {"interval": interval, "episodes": 2}, **steps)
    without = _config(tmp_path, source, "off", None, **steps)
    for run_id, path in (("on", with_evaluation), ("off", without)):
        code, _, err = run_cli(path, f"--run-id={run_id}")
        assert code == 0, err
    assert len(_stat_rows(run_cli.results / "on", behavior, "Environment/Evaluation Reward")) == 4
    checkpoints = range(steps["checkpoint_interval"], steps["max_steps"] + 1, steps["checkpoint_interval"])

    def tensors(run_id: str, step: int) -> Dict[str, np.ndarray]:
        return _checkpoint_tensors(str(RunLayout(str(run_cli.results / run_id)).checkpoint_prefix(behavior, step)))

    for step in checkpoints:
        on, off = tensors("on", step), tensors("off", step)
        assert sorted(on) == sorted(off)
        for name in on:
            np.testing.assert_array_equal(on[name], off[name], err_msg=f"{name} at step {step}")
    if behavior != "Simple":
        return
    # The comparison would see a disturbance: evaluating with sampled actions advances the
    # policy's random ops, and the trained weights differ.
    from trainers.loop import evaluation

    original = evaluation.EvaluatedBehavior

    class Sampling:
        def __init__(self, actor):  # type: ignore[no-untyped-def]
            self.actor = actor

        def __getattr__(self, key):  # type: ignore[no-untyped-def]
            return getattr(self.actor, key)

        def act(self, obs, masks=None, deterministic=False, agent_keys=None):  # type: ignore[no-untyped-def]
            return self.actor.act(obs, masks, deterministic=False, agent_keys=agent_keys)

    monkeypatch.setattr(
        "trainers.loop.controller.EvaluatedBehavior", lambda actor, spec: original(Sampling(actor), spec)
    )
    code, _, err = run_cli(with_evaluation, "--run-id=sampled")
    assert code == 0, err
    on, sampled = tensors("off", steps["max_steps"]), tensors("sampled", steps["max_steps"])
    assert any(not np.array_equal(on[n], sampled[n]) for n in on if n != "global_step")


def test_the_unity_editor_cannot_be_evaluated(run_cli, tmp_path):
    """One line before the Editor is waited for (it is one instance: evaluation needs its own)."""
    path = _config(tmp_path, SIMPLE, "editor", {"interval": 100, "episodes": 1})
    cfg = yaml.safe_load(open(path))
    cfg["env_settings"] = {"env_path": None}
    open(path, "w").write(yaml.safe_dump(cfg))
    code, _, err = run_cli(path, "--run-id=editor")
    assert code == 1
    assert "behaviors.Simple.evaluation: needs an environment of its own" in err and "Unity Editor" in err


def test_a_unity_build_is_evaluated_on_a_build_of_its_own(run_cli, tmp_path):
    """The evaluation build listens on the port after the training builds'."""
    from envs.unity.fake_game import free_port, write_fake_build

    config = tmp_path / "unity.yaml"
    config.write_text(yaml.safe_dump({
        "behaviors": {"Fake": {
            "hyperparameters": {"batch_size": 16, "buffer_size": 64, "learning_rate": 5.0e-3},
            "network_settings": {"hidden_units": 32, "num_layers": 1},
            "max_steps": 400, "summary_freq": 200, "checkpoint_interval": 400,
            "evaluation": {"interval": 200, "episodes": 2},
        }},
        "env_settings": {"seed": 1, "timeout_wait": 30},
    }))
    build = write_fake_build(str(tmp_path / "Game.x86_64"), [{"name": "Fake", "continuous": 0, "discrete": [2]}])
    port = free_port()
    code, out, err = run_cli(str(config), f"--env={build}", f"--base-port={port}", "--no-graphics", "--run-id=unity")
    assert code == 0, err
    assert f"(port {port})" in out and f"(port {port + 1})" in out
    run_dir = run_cli.results / "unity"
    assert [s for s, _, _ in _stat_rows(run_dir, "Fake", "Environment/Evaluation Reward")] == [200, 400]
    assert (run_dir / "Fake" / "Fake-best.onnx").is_file() and (run_dir / "run_logs" / "evaluation").is_dir()
