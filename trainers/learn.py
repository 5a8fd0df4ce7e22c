"""``python -m trainers.learn``: the ``trainer-learn`` front-end, `trainers.cli.learn`.

No TensorFlow at module level here: ``spawn`` re-imports ``__main__`` in every env worker.
"""
import sys

from trainers.cli.learn import main

if __name__ == "__main__":
    sys.exit(main())
