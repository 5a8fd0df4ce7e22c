"""The training loop: env manager <-> trainers (`controller`), threaded updates (`threaded`),
per-agent trajectory assembly (`trajectory`), checkpoints to resume from (`checkpoints`),
the run's ``training_status.json`` (`status`) and the run directory (`run_dir`)."""
