"""Graph building only: layers, encoders, distributions, normalizer, towers, names, sessions.

Importing this package switches TensorFlow to TF1 graph mode once, for the whole process:
eager execution off, and TF1 control flow (tf2onnx converts loops only in that form).
"""
import gc as _gc

# The collector stays off while TensorFlow imports, and what the import made is frozen
# (`gc.freeze`: never walked again). The import creates ~360k objects that live as long
# as the process, and every full collection walked them all: 6 during the import (~0.4 s
# of a 3-4 s import on the 2-core machine), then ~0.2 s each later on (one while the
# first ONNX export imports tf2onnx). The import leaves ~10 unreachable objects, so
# freezing without a collection first loses nothing worth a 0.2 s collection.
_gc_was_enabled = _gc.isenabled()
_gc.disable()
try:
    import tensorflow as _tf  # (trainers/__init__.py has already quietened TF's C++ logs)

    _gc.freeze()
finally:
    if _gc_was_enabled:
        _gc.enable()

tf = _tf.compat.v1
tf.disable_eager_execution()
tf.disable_control_flow_v2()
_tf.get_logger().setLevel("ERROR")

__all__ = ["tf"]
