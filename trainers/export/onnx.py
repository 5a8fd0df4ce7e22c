"""Export, step 2: the frozen graph converted to ONNX with tf2onnx (`to_onnx`), and the
opsets it can be written at."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Optional, Sequence

from trainers.export.freeze import ExportError, FrozenActor
from trainers.tf import names

if TYPE_CHECKING:  # onnx is optional (the ``export`` extra), imported where used
    import onnx

# Opset 9 is what ML-Agents exports (``SerializationSettings.onnx_opset``) and what every
# Unity runtime imports: Barracuda 1.x-2.x (ML-Agents 1.x-2.x) and Sentis / Inference
# Engine (ML-Agents 3.x). Up to 12 Unsqueeze keeps its axes as an attribute, which is all
# Barracuda before 2.3 reads (13 makes them an input); Sentis reads 7 to 15; 16-18 are for
# onnxruntime. tf2onnx 1.17 converts 9 to 18; below 9 random normal noise of a dynamic
# shape (ConstantOfShape) has no form.
DEFAULT_OPSET = 9
MIN_OPSET = 9
MAX_OPSET = 18
BARRACUDA_MAX_OPSET = 12
SENTIS_MAX_OPSET = 15
# ONNX ops that draw random numbers; their ``seed`` attribute is removed (see `to_onnx`).
RANDOM_OPS = ("RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial")


def check_opset(opset: int) -> int:
    """The opset as an int; `ExportError` when tf2onnx cannot export this graph at it."""
    try:
        value = int(opset)
    except (TypeError, ValueError):
        raise ExportError(f"opset: expected an integer, got {opset!r}") from None
    if not MIN_OPSET <= value <= MAX_OPSET:
        raise ExportError(
            f"opset {value} is not supported: ONNX export works with opsets {MIN_OPSET} to {MAX_OPSET} "
            f"(Barracuda reads up to {BARRACUDA_MAX_OPSET}, Sentis up to {SENTIS_MAX_OPSET}; "
            f"default {DEFAULT_OPSET}, as ML-Agents)"
        )
    return value


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _ErrorCapture(logging.Handler):
    """Keeps the first error tf2onnx logs (it logs conversion failures instead of raising)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.first: Optional[str] = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.first is None:
            message = record.getMessage().strip()
            self.first = message.splitlines()[0] if message else record.levelname


def _constant_outputs_as_nodes(graph, output_names: Sequence[str]) -> None:
    """Outputs that tf2onnx left as bare initializers become ``Constant`` nodes: every
    output is then produced by a node (what Unity's importer and older runtimes expect)."""
    from onnx import helper

    initializers = {t.name: t for t in graph.initializer}
    constants = []
    for name in output_names:
        tensor = initializers.get(name)
        if tensor is None:
            continue
        graph.initializer.remove(tensor)
        value = type(tensor)()
        value.CopyFrom(tensor)
        value.name = name
        constants.append(helper.make_node("Constant", [], [name], name=f"{name}_const", value=value))
    for node in reversed(constants):
        graph.node.insert(0, node)


def to_onnx(frozen: FrozenActor, opset: int = DEFAULT_OPSET, behavior_name: str = "") -> "onnx.ModelProto":
    """Converts the frozen graph with tf2onnx; inputs/outputs renamed without ``:0``, in
    contract order, with the dynamic batch dimension named ``batch``."""
    opset = check_opset(opset)
    try:
        import onnx
        import tf2onnx
    except ImportError as exc:
        raise ExportError(f"ONNX export needs tf2onnx and onnx ({exc}); pip install 'trainer-learn[export]'") from None

    rename = {f"{n}:0": n for n in frozen.input_names + frozen.output_names}
    # tf2onnx logs (with tracebacks) the nodes it cannot convert and carries on with an
    # invalid graph: keep its records, print none, and report the first one.
    capture = _ErrorCapture()
    logger = logging.getLogger("tf2onnx")
    old_level, old_propagate = logger.level, logger.propagate
    tf2onnx.logging.set_level(logging.ERROR)
    logger.addHandler(capture)
    logger.propagate = False
    logger.setLevel(logging.ERROR)
    # tf2onnx numbers the names it makes with a process-wide counter: restart it, so that
    # the same weights give the same file (whatever was exported before in this process).
    tf2onnx.utils.INTERNAL_NAME = 1
    try:
        model, _ = tf2onnx.convert.from_graph_def(
            frozen.graph_def,
            name=behavior_name or None,
            input_names=[f"{n}:0" for n in frozen.input_names],
            output_names=[f"{n}:0" for n in frozen.output_names],
            opset=opset,
            tensors_to_rename=rename,
        )
    except Exception as exc:  # tf2onnx raises many kinds; one line for the user
        raise ExportError(
            f"{behavior_name}: tf2onnx cannot convert the policy at opset {opset}: {capture.first or _first_line(exc)}"
        ) from None
    finally:
        logger.removeHandler(capture)
        logger.setLevel(old_level)
        logger.propagate = old_propagate
    graph = model.graph
    by_name = {o.name: o for o in graph.output}
    if capture.first or set(by_name) != set(frozen.output_names) or [i.name for i in graph.input] != frozen.input_names:
        raise ExportError(
            f"{behavior_name}: tf2onnx cannot convert the policy at opset {opset}: "
            f"{capture.first or 'unexpected inputs/outputs ' + str([i.name for i in graph.input] + list(by_name))}"
        )
    _constant_outputs_as_nodes(graph, frozen.output_names)
    for node in graph.node:
        if node.op_type in RANDOM_OPS:
            kept_attributes = [a for a in node.attribute if a.name != "seed"]
            del node.attribute[:]
            node.attribute.extend(kept_attributes)
    used_domains = {node.domain or "" for node in graph.node}
    kept = [o for o in model.opset_import if (o.domain or "") in used_domains or (o.domain or "") == ""]
    del model.opset_import[:]
    model.opset_import.extend(kept)
    ordered = []
    for n in frozen.output_names:
        value = type(by_name[n])()
        value.CopyFrom(by_name[n])
        ordered.append(value)
    del graph.output[:]
    graph.output.extend(ordered)
    for value in list(graph.input) + list(graph.output):
        dims = value.type.tensor_type.shape.dim
        if dims and not dims[0].HasField("dim_value"):
            dims[0].dim_param = names.ONNX_BATCH_DIM
    model.producer_name = "trainer-learn"
    version = names.LEGACY_VERSION if frozen.legacy else names.MODEL_EXPORT_VERSION
    model.doc_string = f"{behavior_name} actor, ML-Agents model version {version}"
    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        raise ExportError(f"{behavior_name}: the converted ONNX model is invalid at opset {opset}: {_first_line(exc)}") from None
    return model
