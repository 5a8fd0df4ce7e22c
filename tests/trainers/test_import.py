"""What importing `trainers.tf` does to the process (trainers/tf/__init__.py).

One fresh interpreter, since the test process has long imported TensorFlow: Keras stays
out of TensorFlow's import (it is never used, and cost ~0.5 s of every process), yet a
later ``import keras`` still works; the collector is back on, with the import's objects
frozen; TensorFlow is in graph mode.
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROBE = """
import gc, json, sys
import trainers.tf
from trainers.tf import tf
state = {
    "keras_after_tf": sorted(m for m in sys.modules if m == "keras" or m.startswith("keras.")),
    "ipython_after_tf": "IPython" in sys.modules,
    "gc_enabled": gc.isenabled(),
    "frozen": gc.get_freeze_count(),
    "eager": tf.executing_eagerly(),
}
import keras  # a user's own code may still want it
state["keras_version"] = keras.__version__
print(json.dumps(state))
"""


def test_tensorflow_import_leaves_keras_out_and_the_collector_on() -> None:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    state = json.loads(out.stdout.strip().splitlines()[-1])
    assert state["keras_after_tf"] == []
    assert state["ipython_after_tf"] is False
    assert state["gc_enabled"] is True
    assert state["frozen"] > 100_000  # TensorFlow's import made ~360k objects
    assert state["eager"] is False
    assert state["keras_version"]  # the block was lifted after TensorFlow's import
