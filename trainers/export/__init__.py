"""Model export: the actor of a `Policy` as a frozen TF graph (``.pb``) and as ONNX.

The exported graph is the actor only (no critic, optimizer or training towers): it is built
again in a separate ``tf.Graph`` with the same builder (`trainers.policy.build_actor`, so
the same variable names), the weights are copied from the live session by variable name,
and the variables are folded to constants (``convert_variables_to_constants``). Export
therefore does not depend on how many towers the optimizer has, and never touches the
(finalized) training graph. The observation normalizer is included, folded to float32
constants (mean and std computed exactly as the training graph does).

ML-Agents 2.0 contract (``version_number`` 3, FACTS section 6), what current Unity
Inference Engine / Sentis loads:

* inputs: ``obs_0`` ... ``obs_{n-1}`` float32, vector ``[batch, size]``, visual
  ``[batch, C, H, W]`` (NCHW; transposed to NHWC inside the graph); ``action_masks``
  float32 ``[batch, sum(branches)]`` (1 = allowed) only with discrete actions.
* outputs, in this order: ``version_number``, ``memory_size``, then with continuous actions
  ``continuous_actions`` (sampled, ``clamp(x, -3, 3) / 3``; SAC's squashed actor: ``tanh(x)``,
  as ML-Agents exports it), ``continuous_action_output_shape``,
  ``deterministic_continuous_actions`` (the clipped or squashed mean), then with discrete actions
  ``discrete_actions`` (sampled, one column per branch), ``discrete_action_output_shape``,
  ``deterministic_discrete_actions`` (argmax). The batch dimension is dynamic (``batch``).

Dtypes (decided from what ML-Agents 2.0's exporter wrote and what Unity's runtime reads):

* ``version_number`` ``[1]``, ``memory_size`` ``[1]``, ``continuous_action_output_shape``
  ``[1]`` and ``discrete_action_output_shape`` ``[1, num_branches]`` are **float32**:
  ML-Agents wrote them as ``torch.Tensor`` parameters, and Unity reads them as
  ``Tensor<float>`` (``(int)((Tensor<float>)t)[0]``; it sums every element of the discrete
  shape). int32 constants would make Unity's cast fail.
* ``continuous_actions`` / ``deterministic_continuous_actions``: float32 ``[batch, c]``.
* ``discrete_actions`` / ``deterministic_discrete_actions``: **int64** ``[batch, branches]``,
  as ``torch.multinomial`` / ``torch.argmax`` produced them; Unity reads them as
  ``Tensor<int>`` (a float output would load and then fail at inference).

Sampling ops: ``RandomStandardNormal`` with the dynamic batch shape becomes ONNX
``RandomNormalLike``, ``Multinomial`` becomes ONNX ``Multinomial``; tf2onnx writes
``seed=0`` on both, which makes every onnxruntime session draw the same numbers, so the
attribute is removed: onnxruntime then seeds per process and draws fresh noise at every
call, and no runtime that honours the attribute repeats one fixed noise sequence.

Visual observations: the convolutions run in NCHW in ONNX and the encoders flatten in
channel-major order (as ML-Agents does), so the exported graph has no Transpose.

TF-era contract (``legacy_names=True``, ``version_number`` 2), for older runtimes: inputs
``vector_observation`` ``[batch, sum of vector sizes]`` (every vector observation
concatenated in spec order), ``visual_observation_<k>`` ``[batch, H, W, C]`` (k counts the
visual observations), ``action_masks`` (discrete), ``epsilon`` ``[batch, c]`` (continuous:
the standard-normal noise, fed by the runtime, as TF-era Unity did; zeros give the mean);
outputs ``action``, ``action_probs``, ``version_number``, ``memory_size``,
``is_continuous_control``, ``action_output_shape``, the constants int32 ``[1]``.
``action`` is ``clamp(mean + std * epsilon, -3, 3) / 3`` for continuous actions and, for
discrete ones, the masked per-branch log-probabilities ``[batch, sum(branches)]`` from which
the TF-era runtime samples; ``action_probs`` is the per-dimension log-density of the raw
continuous action, or the per-branch probabilities. ``action_output_shape`` is the
continuous size or the sum of branch sizes. Hybrid actions have no TF-era form.

Verification (``check=True``): the ONNX model (onnxruntime) and the frozen graph (TF) are
run on a fixed batch of observations and masks, and their deterministic outputs compared
with the live training graph's; a max abs difference above 1e-5 raises `ExportError`.
Sampled outputs are checked for shape, range and masks.

Recurrent policies (``network_settings.memory``): one LSTM step per call. Input
``recurrent_in`` float32 ``[batch, 1, memory_size]`` after ``action_masks`` (and, with
discrete actions, ``prev_action`` int32 ``[batch, branches]``, the TF-era input the
previous action is fed through: 0 at an episode's first step); output ``recurrent_out``
``[batch, 1, memory_size]`` last; ``memory_size`` > 0. The runtime feeds each agent's
``recurrent_out`` back as its next ``recurrent_in`` (zeros at an episode start). The check
runs a 20-step rollout with the memories fed back. No TF-era form.
"""
from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from trainers.export.check import (  # noqa: F401  (re-exported)
    CHECK_BATCH,
    CHECK_TOLERANCE,
    RECURRENT_CHECK_STEPS,
    check_inputs,
    expected_constants,
    model_feeds,
    onnx_session,
    run_frozen,
    run_onnx,
    verify,
)
from trainers.export.freeze import ExportError, FrozenActor, freeze_actor
from trainers.export.onnx import (  # noqa: F401  (re-exported)
    BARRACUDA_MAX_OPSET,
    DEFAULT_OPSET,
    MAX_OPSET,
    MIN_OPSET,
    RANDOM_OPS,
    SENTIS_MAX_OPSET,
    check_opset,
    to_onnx,
)
from trainers.policy import Policy
from trainers.tf import names

FORMATS = ("pb", "onnx")


@dataclass
class ExportResult:
    """What `export_policy` wrote and measured.

    Attributes:
        behavior_name: the policy's behavior.
        files: every file written (latest and per-step copies), in writing order.
        onnx_path: ``<out_dir>/<Behavior>.onnx`` (None when not exported).
        pb_path: ``<out_dir>/<Behavior>.pb`` (None when not exported).
        version: the contract's ``version_number`` (3, or 2 with legacy names).
        opset: ONNX opset used.
        input_names: model inputs, in order.
        output_names: model outputs, in order.
        diffs: runtime (``onnx``/``pb``) -> compared output -> max abs difference with the
            live training graph (empty without ``check``).
        seconds: wall time of the export (graph, conversion, writing, check).
    """

    behavior_name: str
    files: List[str] = field(default_factory=list)
    onnx_path: Optional[str] = None
    pb_path: Optional[str] = None
    version: int = names.MODEL_EXPORT_VERSION
    opset: int = DEFAULT_OPSET
    input_names: List[str] = field(default_factory=list)
    output_names: List[str] = field(default_factory=list)
    diffs: Dict[str, Dict[str, float]] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def max_diff(self) -> float:
        """Largest measured difference over every runtime and output (0.0 if none)."""
        return max((d for per in self.diffs.values() for d in per.values()), default=0.0)


def _write_atomic(path: str, data: bytes) -> None:
    directory = os.path.dirname(path) or "."
    descriptor, temporary = tempfile.mkstemp(prefix=".export.", dir=directory)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def export_policy(
    policy: Policy,
    out_dir: str,
    step: Optional[int] = None,
    formats: Sequence[str] = FORMATS,
    opset: int = DEFAULT_OPSET,
    legacy_names: bool = False,
    check: bool = True,
    file_stem: Optional[str] = None,
) -> ExportResult:
    """Exports the actor of ``policy`` to ``out_dir``.

    Writes ``<stem>.pb`` / ``<stem>.onnx`` and, when ``step`` is given, also
    ``<stem>-<step>.pb`` / ``<stem>-<step>.onnx`` (stem: the behavior name unless
    ``file_stem``). Files are written atomically (a temporary file, then a rename), so a
    runtime watching the directory never reads half a model.

    Args:
        policy: the live policy (its graph may be finalized; it is only read).
        out_dir: created if missing.
        step: the trainer step, for the per-step copies.
        formats: any of ``pb``, ``onnx``.
        opset: ONNX opset (MIN_OPSET..MAX_OPSET).
        legacy_names: TF-era (version 2) names instead of ML-Agents 2.0's.
        check: run the exported model(s) and compare with the live graph (ExportError above
            1e-5).

    Raises:
        ExportError: unknown format, unsupported opset, recurrent policy, conversion failure,
            or a mismatch found by the check.
    """
    start = time.perf_counter()
    formats = tuple(dict.fromkeys(formats))
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise ExportError(f"unknown export format {unknown[0] if unknown else '(none)'!r}; expected pb, onnx or both")
    if "onnx" in formats:
        opset = check_opset(opset)
    frozen = freeze_actor(policy, legacy_names)
    stem = file_stem or policy.behavior_name
    result = ExportResult(
        behavior_name=policy.behavior_name,
        version=names.LEGACY_VERSION if legacy_names else names.MODEL_EXPORT_VERSION,
        opset=opset,
        input_names=list(frozen.input_names),
        output_names=list(frozen.output_names),
    )
    payloads: Dict[str, bytes] = {}
    if "pb" in formats:
        payloads["pb"] = frozen.graph_def.SerializeToString()
    if "onnx" in formats:
        payloads["onnx"] = to_onnx(frozen, opset, policy.behavior_name).SerializeToString()
    if check:
        result.diffs = verify(policy, frozen, payloads.get("onnx"), run_pb=True)
    os.makedirs(out_dir, exist_ok=True)
    for ext in FORMATS:
        if ext not in payloads:
            continue
        path = os.path.join(out_dir, f"{stem}.{ext}")
        _write_atomic(path, payloads[ext])
        result.files.append(path)
        if ext == "onnx":
            result.onnx_path = path
        else:
            result.pb_path = path
        if step is not None:
            step_path = os.path.join(out_dir, f"{stem}-{int(step)}.{ext}")
            _write_atomic(step_path, payloads[ext])
            result.files.append(step_path)
    result.seconds = time.perf_counter() - start
    return result


def format_diffs(result: ExportResult) -> List[str]:
    """Human-readable lines of the check: one per runtime and compared output."""
    lines = []
    for runtime, per in result.diffs.items():
        for key, diff in per.items():
            lines.append(f"{result.behavior_name}: {runtime:4s} {key}: max abs diff {diff:.3g}")
    return lines


__all__ = [
    "ExportError",
    "ExportResult",
    "FrozenActor",
    "export_policy",
    "freeze_actor",
    "to_onnx",
    "verify",
    "check_opset",
    "expected_constants",
    "format_diffs",
    "FORMATS",
    "DEFAULT_OPSET",
    "MIN_OPSET",
    "MAX_OPSET",
]
