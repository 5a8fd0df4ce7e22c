"""Model export: the actor of a `Policy` as a frozen TF graph (``.pb``) and as ONNX.

`export_policy` rebuilds the actor alone in its own graph, folds the live weights and the
normalizer into constants, writes the formats asked for atomically and checks them
against the live graph (`ExportResult`). The contract (inputs, outputs, dtypes, the TF-era names,
recurrent policies, the check) is in docs/export-contract.md.
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
from trainers.layout import model_file_name
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
        path = os.path.join(out_dir, model_file_name(stem, ext))
        _write_atomic(path, payloads[ext])
        result.files.append(path)
        if ext == "onnx":
            result.onnx_path = path
        else:
            result.pb_path = path
        if step is not None:
            step_path = os.path.join(out_dir, model_file_name(stem, ext, step))
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
