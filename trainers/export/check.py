"""Export, step 3: the exported model(s) run on a fixed batch and compared with the live
training graph (`verify`); the helpers that feed an exported model (`check_inputs`,
`model_feeds`, `run_frozen`, `onnx_session`, `run_onnx`)."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from envs.base_env import BehaviorSpec, ObservationKind
from trainers.export.freeze import ExportError, FrozenActor
from trainers.policy import Policy
from trainers.tf import names, tf

CHECK_TOLERANCE = 1e-5
CHECK_BATCH = 16


def check_inputs(spec: BehaviorSpec, n: int = CHECK_BATCH, seed: int = 0) -> Tuple[List[np.ndarray], Optional[np.ndarray]]:
    """A fixed batch: observations as the env gives them (visual NHWC in [0, 1]) and masks
    (1 = allowed; the first row all allowed, every branch keeps at least one action).
    Entity observations ``[E, F]``: row ``r`` has its first ``r % (E + 1)`` entities
    present and the rest zero rows (absent), so a batch of at least ``E + 1`` rows checks
    0, 1, ..., ``E`` entities."""
    rng = np.random.default_rng(seed)
    obs = []
    for o in spec.observation_specs:
        if o.kind == ObservationKind.VISUAL:
            obs.append(rng.uniform(0.0, 1.0, (n,) + o.shape).astype(np.float32))
        elif o.kind == ObservationKind.ENTITIES:
            max_entities = o.shape[0]
            values = rng.normal(0.0, 2.0, (n,) + o.shape).astype(np.float32)
            present = np.arange(max_entities)[None, :] < (np.arange(n) % (max_entities + 1))[:, None]
            obs.append(values * present[:, :, None])
        else:
            obs.append(rng.normal(0.0, 2.0, (n,) + o.shape).astype(np.float32))
    masks = None
    branches = spec.action_spec.discrete_branches
    if branches:
        parts = []
        for size in branches:
            m = (rng.uniform(size=(n, size)) < 0.6).astype(np.float32)
            m[np.arange(n), rng.integers(0, size, n)] = 1.0
            m[0] = 1.0
            parts.append(m)
        masks = np.concatenate(parts, axis=1)
    return obs, masks


def model_feeds(
    frozen_inputs: Sequence[str],
    spec: BehaviorSpec,
    obs: Sequence[np.ndarray],
    masks: Optional[np.ndarray],
    legacy: bool,
    memory: Optional[np.ndarray] = None,
    prev_action: Optional[np.ndarray] = None,
) -> Dict[str, np.ndarray]:
    """Input name -> array for an exported model, from env-layout observations (and, for a
    recurrent model, ``memory`` ``[N, memory_size]`` and ``prev_action`` ``[N, branches]``)."""
    n = obs[0].shape[0]
    feeds: Dict[str, np.ndarray] = {}
    if legacy:
        vectors = [o for o, s in zip(obs, spec.observation_specs) if s.kind == ObservationKind.VECTOR]
        if vectors:
            feeds[names.LEGACY_VECTOR_OBSERVATION] = np.concatenate(vectors, axis=1).astype(np.float32)
        visual = [o for o, s in zip(obs, spec.observation_specs) if s.kind == ObservationKind.VISUAL]
        for k, o in enumerate(visual):
            feeds[names.legacy_visual_name(k)] = o
        if spec.action_spec.is_continuous:
            feeds[names.LEGACY_EPSILON] = np.zeros((n, spec.action_spec.continuous_size), np.float32)
    else:
        for i, (o, s) in enumerate(zip(obs, spec.observation_specs)):
            feeds[names.obs_name(i)] = (
                np.ascontiguousarray(o.transpose(0, 3, 1, 2)) if s.kind == ObservationKind.VISUAL else o
            )
    if masks is not None:
        feeds[names.ACTION_MASKS] = masks
    if memory is not None:
        feeds[names.RECURRENT_IN] = np.asarray(memory, np.float32)[:, None, :]
    if prev_action is not None:
        feeds[names.PREV_ACTION] = np.asarray(prev_action, np.int32)
    assert list(feeds) == list(frozen_inputs), (list(feeds), frozen_inputs)
    return feeds


def _live_reference(
    policy: Policy,
    obs: Sequence[np.ndarray],
    masks: Optional[np.ndarray],
    legacy: bool,
    memory: Optional[np.ndarray] = None,
    prev_action: Optional[np.ndarray] = None,
) -> Dict[str, np.ndarray]:
    """The training graph's deterministic outputs under the exported names (recurrent:
    ``recurrent_out`` too, as ``[N, 1, memory_size]``)."""
    feed = {ph: o for ph, o in zip(policy.obs, obs)}
    if policy.action_masks is not None:
        assert masks is not None  # both exist exactly when the spec has discrete branches
        feed[policy.action_masks] = masks
    fetch: Dict[str, tf.Tensor] = {}
    if memory is not None:
        feed[policy.memory_in] = memory
        fetch[names.RECURRENT_OUT] = policy.memory_out
    if prev_action is not None:
        feed[policy.prev_action] = prev_action
    if legacy:
        if policy.deterministic_continuous is not None:
            fetch[names.LEGACY_ACTION] = policy.deterministic_continuous
        else:
            assert policy.actor.discrete is not None  # legacy models are continuous or discrete
            fetch["discrete_probs"] = policy.actor.discrete.log_probs
            fetch[names.DETERMINISTIC_DISCRETE_ACTIONS] = policy.deterministic_discrete
    else:
        if policy.deterministic_continuous is not None:
            fetch[names.DETERMINISTIC_CONTINUOUS_ACTIONS] = policy.deterministic_continuous
        if policy.deterministic_discrete is not None:
            fetch[names.DETERMINISTIC_DISCRETE_ACTIONS] = policy.deterministic_discrete
    out = policy.session.run(fetch, feed_dict=feed)
    if names.RECURRENT_OUT in out:
        out[names.RECURRENT_OUT] = out[names.RECURRENT_OUT][:, None, :]
    if "discrete_probs" in out:
        out["discrete_probs"] = np.exp(np.concatenate(out["discrete_probs"], axis=1))
    return out


def _legacy_discrete_views(action: np.ndarray, branches: Sequence[int]) -> Tuple[np.ndarray, np.ndarray]:
    """TF-era discrete ``action`` (log-probs) -> (probabilities, argmax per branch)."""
    probs = np.exp(action)
    argmax, offset = [], 0
    for size in branches:
        argmax.append(np.argmax(action[:, offset : offset + size], axis=1))
        offset += size
    return probs, np.stack(argmax, axis=1)


def _compare(
    runtime: str, got: Dict[str, np.ndarray], ref: Dict[str, np.ndarray], spec: BehaviorSpec, legacy: bool, behavior: str
) -> Dict[str, float]:
    diffs: Dict[str, float] = {}
    if legacy and spec.action_spec.is_discrete:
        probs, argmax = _legacy_discrete_views(got[names.LEGACY_ACTION], spec.action_spec.discrete_branches)
        pairs = {
            names.LEGACY_ACTION: (probs, ref["discrete_probs"]),
            "argmax(" + names.LEGACY_ACTION + ")": (argmax, ref[names.DETERMINISTIC_DISCRETE_ACTIONS]),
        }
    else:
        pairs = {k: (got[k], v) for k, v in ref.items()}
    for key, (a, b) in pairs.items():
        a = np.asarray(a)
        b = np.asarray(b)
        if a.shape != b.shape:
            raise ExportError(f"{behavior}: exported {runtime} output {key} has shape {a.shape}, expected {b.shape}")
        diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
        diffs[key] = diff
        tolerance = CHECK_TOLERANCE
        if key == names.RECURRENT_OUT and a.size:
            # The LSTM's cell state is unbounded (it grew to |c| ~8 over the 20-step check of
            # a recurrent SAC policy), and float32 rounding differs between runtimes by a
            # few ulps a step: relative above 1, as the actions' 1e-5 is.
            tolerance *= max(1.0, float(np.max(np.abs(b))))
        if not diff <= tolerance:
            raise ExportError(
                f"{behavior}: exported {runtime} output {key} differs from the training graph by "
                f"{diff:.3g} (tolerance {tolerance:.3g})"
            )
    return diffs


def _check_sampled(
    runtime: str, got: Dict[str, np.ndarray], spec: BehaviorSpec, masks: Optional[np.ndarray], n: int, behavior: str
) -> None:
    """Sampled outputs: shapes, dtypes, range [-1, 1], masked actions never chosen."""
    a = spec.action_spec
    problems = []
    if names.CONTINUOUS_ACTIONS in got:
        c = got[names.CONTINUOUS_ACTIONS]
        if c.shape != (n, a.continuous_size) or c.dtype != np.float32 or not np.all(np.abs(c) <= 1.0):
            problems.append(f"{names.CONTINUOUS_ACTIONS} {c.dtype}{c.shape} outside [-1, 1] or misshaped")
    if names.DISCRETE_ACTIONS in got:
        d = got[names.DISCRETE_ACTIONS]
        if d.shape != (n, a.discrete_size) or d.dtype != np.int64:
            problems.append(f"{names.DISCRETE_ACTIONS} is {d.dtype}{d.shape}, expected int64{(n, a.discrete_size)}")
        else:
            assert masks is not None  # `check_inputs` makes masks for every discrete spec
            offset = 0
            for b, size in enumerate(a.discrete_branches):
                chosen = d[:, b]
                if np.any((chosen < 0) | (chosen >= size)) or np.any(masks[np.arange(n), offset + chosen] == 0):
                    problems.append(f"{names.DISCRETE_ACTIONS} branch {b} chose a masked or invalid action")
                offset += size
    if problems:
        raise ExportError(f"{behavior}: exported {runtime} model: {problems[0]}")


def expected_constants(spec: BehaviorSpec, legacy: bool, memory_size: int = 0) -> Dict[str, np.ndarray]:
    """The constant outputs an exported model must have, with dtype and shape."""
    a = spec.action_spec
    return names.contract_constants(a.continuous_size, a.discrete_branches, memory_size, legacy)


def _check_constants(
    runtime: str, got: Dict[str, np.ndarray], spec: BehaviorSpec, legacy: bool, behavior: str, memory_size: int = 0
) -> None:
    for key, want in expected_constants(spec, legacy, memory_size).items():
        value = np.asarray(got[key])
        if value.dtype != want.dtype or value.shape != want.shape or not np.array_equal(value, want):
            raise ExportError(
                f"{behavior}: exported {runtime} constant {key} is {value.dtype}{list(value.shape)} "
                f"{value.tolist()}, expected {want.dtype}{list(want.shape)} {want.tolist()}"
            )


def run_frozen(frozen: FrozenActor, feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Runs the frozen graph in a fresh TF graph/session; output name -> value."""
    graph = tf.Graph()
    with graph.as_default():
        tf.import_graph_def(frozen.graph_def, name="")
    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    with tf.Session(graph=graph, config=config) as sess:
        values = sess.run(
            [f"{n}:0" for n in frozen.output_names], feed_dict={f"{k}:0": v for k, v in feeds.items()}
        )
    return dict(zip(frozen.output_names, values))


def onnx_session(model_bytes_or_path, threads: int = 1):
    """An onnxruntime CPU session with small thread pools (the networks are tiny)."""
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise ExportError(f"checking an ONNX export needs onnxruntime ({exc}); pip install 'trainer-learn[export]'") from None

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(model_bytes_or_path, options, providers=["CPUExecutionProvider"])


def run_onnx(model_bytes: bytes, output_names: Sequence[str], feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    session = onnx_session(model_bytes)
    values = session.run(list(output_names), feeds)
    return dict(zip(output_names, values))


#: Steps of the recurrent check's rollout (memories fed back at every step).
RECURRENT_CHECK_STEPS = 20


def verify(
    policy: Policy, frozen: FrozenActor, onnx_bytes: Optional[bytes], run_pb: bool = True
) -> Dict[str, Dict[str, float]]:
    """Compares the exported model(s) with the live graph; raises `ExportError` on mismatch.

    A recurrent model is checked over a `RECURRENT_CHECK_STEPS`-step rollout: every runtime
    (live graph, ONNX, frozen graph) is fed back its own ``recurrent_out`` (and its own
    deterministic discrete actions as ``prev_action``), and the outputs, memories included,
    are compared at every step (the reported difference is the maximum over the steps).
    """
    spec = policy.spec
    behavior = policy.behavior_name
    obs, masks = check_inputs(spec)
    n = obs[0].shape[0]
    recurrent = policy.use_recurrent and not frozen.legacy
    steps = RECURRENT_CHECK_STEPS if recurrent else 1
    runtimes = (["onnx"] if onnx_bytes is not None else []) + (["pb"] if run_pb else [])
    session = onnx_session(onnx_bytes) if onnx_bytes is not None else None
    memory = {r: np.zeros((n, policy.memory_size), np.float32) for r in ["live"] + runtimes}
    with_prev = recurrent and policy.prev_action is not None
    prev = {r: np.zeros((n, spec.action_spec.discrete_size), np.int32) for r in memory}
    diffs: Dict[str, Dict[str, float]] = {r: {} for r in runtimes}
    for t in range(steps):
        if t:
            obs, masks = check_inputs(spec, seed=t)
        ref = _live_reference(
            policy, obs, masks, frozen.legacy,
            memory["live"] if recurrent else None, prev["live"] if with_prev else None,
        )
        for runtime in runtimes:
            feeds = model_feeds(
                frozen.input_names, spec, obs, masks, frozen.legacy,
                memory[runtime] if recurrent else None, prev[runtime] if with_prev else None,
            )
            if runtime == "onnx":
                assert session is not None  # "onnx" is a runtime only with onnx_bytes
                got = dict(zip(frozen.output_names, session.run(list(frozen.output_names), feeds)))
            else:
                got = run_frozen(frozen, feeds)
            if t == 0:
                _check_constants(runtime, got, spec, frozen.legacy, behavior, policy.memory_size if recurrent else 0)
                if not frozen.legacy:
                    _check_sampled(runtime, got, spec, masks, n, behavior)
            for key, diff in _compare(runtime, got, ref, spec, frozen.legacy, behavior).items():
                diffs[runtime][key] = max(diff, diffs[runtime].get(key, 0.0))
            if recurrent:
                memory[runtime] = got[names.RECURRENT_OUT][:, 0, :]
                if with_prev:
                    prev[runtime] = got[names.DETERMINISTIC_DISCRETE_ACTIONS].astype(np.int32)
        if recurrent:
            memory["live"] = ref[names.RECURRENT_OUT][:, 0, :]
            if with_prev:
                prev["live"] = ref[names.DETERMINISTIC_DISCRETE_ACTIONS].astype(np.int32)
    return diffs
