"""Export of policies with entity (variable-length) observations: ONNX input
``obs_<i>`` ``[batch, max_entities, entity_size]`` in the Unity 2.0 contract, and parity of
onnxruntime and the frozen graph with the live graph at 0, 1 and the maximum number of
entities (op coverage for Barracuda and Sentis: ``test_onnx_runtimes.py``, model
``entities``)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from envs.base_env import ActionSpec, BehaviorSpec, ObservationKind, ObservationSpec
from trainers.config import MemorySettings, NetworkSettings, TrainerSettings
from trainers.export import ExportError, export_policy, model_feeds, onnx_session
from trainers.export.check import run_frozen
from trainers.export.freeze import freeze_actor
from trainers.ppo.trainer import PPOTrainer
from trainers.stats import StatsReporter

E, F = 5, 3
SPEC = BehaviorSpec(
    (ObservationSpec((4,), "vector"), ObservationSpec((E, F), "buffer", ObservationKind.ENTITIES)),
    ActionSpec(2, (3, 2)),
)


def _trainer(memory=None) -> PPOTrainer:
    network = NetworkSettings(hidden_units=16, num_layers=1, normalize=True, memory=memory)
    return PPOTrainer("Sorter", SPEC, TrainerSettings(network_settings=network), StatsReporter("Sorter", []), 3)


def _obs(k: int, n: int, rng: np.random.Generator, scattered: bool = False):
    vector = rng.normal(size=(n, 4)).astype(np.float32)
    entities = np.zeros((n, E, F), np.float32)
    for row in range(n):
        slots = rng.choice(E, size=k, replace=False) if scattered else np.arange(k)
        entities[row, slots] = rng.normal(0.0, 2.0, (k, F)) + 0.5
    return [vector, entities]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    trainer = _trainer()
    # check=True: export_policy itself compares both runtimes with the live graph on a
    # batch whose rows hold 0..E entities (`check_inputs`).
    result = export_policy(trainer.policy, str(tmp_path_factory.mktemp("entities")))
    yield trainer, result
    trainer.close()


def test_onnx_input_is_batch_entities_features(exported):
    _, result = exported
    model = onnx.load(result.onnx_path)
    inputs = {i.name: [d.dim_value or d.dim_param for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    assert inputs["obs_1"][1:] == [E, F] and inputs["obs_0"][1:] == [4]
    assert isinstance(inputs["obs_1"][0], str)  # the batch dimension is free
    assert result.max_diff <= 1e-5


@pytest.mark.parametrize("k", [0, 1, E], ids=["none", "one", "max"])
@pytest.mark.parametrize("scattered", [False, True], ids=["first_rows", "any_rows"])
def test_onnx_and_frozen_graph_match_the_live_graph(exported, k, scattered):
    trainer, result = exported
    policy = trainer.policy
    obs = _obs(k, 32, np.random.default_rng(10 + k), scattered)
    masks = np.ones((32, 5), np.float32)
    live = policy.session.run(
        [policy.deterministic_continuous, policy.deterministic_discrete],
        {**dict(zip(policy.obs, obs)), policy.action_masks: masks},
    )
    session = onnx_session(result.onnx_path)
    feeds = model_feeds([i.name for i in session.get_inputs()], SPEC, obs, masks, legacy=False)
    outputs = ["deterministic_continuous_actions", "deterministic_discrete_actions"]
    got_onnx = dict(zip(outputs, session.run(outputs, feeds)))
    got_pb = run_frozen(freeze_actor(policy), feeds)
    for got in (got_onnx, got_pb):
        np.testing.assert_allclose(got["deterministic_continuous_actions"], live[0], atol=1e-5)
        np.testing.assert_array_equal(got["deterministic_discrete_actions"], live[1])
    if k == 0:  # no entity: the attention's output is zeros, the actions depend on the vector only
        other = _obs(0, 32, np.random.default_rng(99))
        other[0] = obs[0]
        np.testing.assert_array_equal(
            session.run(outputs[:1], model_feeds([i.name for i in session.get_inputs()], SPEC, other, masks, False))[0],
            got_onnx[outputs[0]],
        )


@pytest.mark.slow  # ~23 s on 2 shared cores
def test_recurrent_policy_with_entities_exports(tmp_path):
    """The LSTM sits after the encoder: a 20-step rollout of memories matches (1e-5)."""
    trainer = _trainer(MemorySettings(memory_size=8, sequence_length=4))
    try:
        result = export_policy(trainer.policy, str(tmp_path))
    finally:
        trainer.close()
    assert result.max_diff <= 1e-5 and "recurrent_in" in result.input_names


def test_legacy_names_refuse_entities(exported):
    trainer, _ = exported
    with pytest.raises(ExportError, match="entity \\(variable-length\\) observations have no TF-era"):
        freeze_actor(trainer.policy, legacy_names=True)
