"""Kept for one release: the ``trainer-learn`` front-end is `trainers.cli.learn`
(``python -m trainers.learn`` still runs it)."""
import sys

from trainers.cli.learn import (  # noqa: F401
    INT_OPTIONS,
    export_hook,
    main,
    parse_overrides,
    resolve_devices,
    run_training,
    run_worker,
    unity_options,
)

if __name__ == "__main__":
    sys.exit(main())
