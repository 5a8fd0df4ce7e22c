"""Graph building only: layers, encoders, distributions, normalizer, towers, names, sessions.

Importing this package switches TensorFlow to TF1 graph mode once, for the whole process:
eager execution off, and TF1 control flow (tf2onnx converts loops only in that form).
"""
import gc as _gc
import sys as _sys

# The collector stays off while TensorFlow imports, and what the import made is frozen
# (`gc.freeze`: never walked again). The import creates ~360k objects that live as long
# as the process, and every full collection walked them all: 6 during the import (~0.4 s
# of a 3-4 s import on the 2-core machine), then ~0.2 s each later on (one while the
# first ONNX export imports tf2onnx). The import leaves ~10 unreachable objects, so
# freezing without a collection first loses nothing worth a 0.2 s collection.
#
# Keras stays out of the import. TensorFlow's `__init__` eagerly imports
# `keras.src.optimizers` (to register Keras optimizers for SavedModel loading) inside a
# `try: ... except ImportError`. Nothing here uses Keras (layers are written with
# `get_variable`), and that import cost ~0.5 s of every process: Keras 3 pulls in IPython,
# prompt_toolkit and jedi. A None entry in `sys.modules` turns it into an ImportError that
# TensorFlow ignores; the entry is removed right after, so a later `import keras` (say a
# user's own code, or `tf.keras`) imports it as usual.
_block_keras = "keras" not in _sys.modules
_gc_was_enabled = _gc.isenabled()
_gc.disable()
if _block_keras:
    _sys.modules["keras"] = None  # type: ignore[assignment]
try:
    import tensorflow as _tf  # (trainers/__init__.py has already quietened TF's C++ logs)

    _gc.freeze()
finally:
    if _block_keras and "keras" in _sys.modules and _sys.modules["keras"] is None:
        del _sys.modules["keras"]
    if _gc_was_enabled:
        _gc.enable()

tf = _tf.compat.v1
tf.disable_eager_execution()
tf.disable_control_flow_v2()
_tf.get_logger().setLevel("ERROR")

__all__ = ["tf"]
