"""The one-run update and the upstream-style one-run-per-network update (benchmark mode)
apply the same gradients: the benchmark compares equal work."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import check_towers  # noqa: E402


def test_separate_runs_reach_the_same_weights(tmp_path):
    _, one_run = check_towers.build(("/cpu:0",), vail=True, batch_size=40)
    prefix = one_run.save(str(tmp_path))
    _, separate = check_towers.build(("/cpu:0",), vail=True, batch_size=40)
    separate.load(prefix)
    mb = check_towers.random_minibatch(one_run, 40, np.random.default_rng(0))
    results = []
    for trainer, fn in ((one_run, one_run.optimizer.update), (separate, separate.optimizer.update_separately)):
        feed = {}
        for signal in trainer.signals.values():
            feed.update(signal.prepare_update(mb, 40))
        stats = fn(mb, 3, feed)
        variables = trainer.policy.graph.get_collection("variables")
        results.append((stats, dict(zip([v.op.name for v in variables], trainer.policy.session.run(variables)))))
    (stats_a, weights_a), (stats_b, weights_b) = results
    assert separate.optimizer.update_runs == 4  # ppo, curiosity, gail, rnd: one run each
    assert one_run.optimizer.update_runs == 1
    for name, value in weights_a.items():
        np.testing.assert_allclose(weights_b[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    for key in ("policy_loss", "value_loss", "curiosity/loss", "gail/loss", "gail/kl", "rnd/loss"):
        assert abs(stats_a[key] - stats_b[key]) <= 1e-5 * max(1.0, abs(stats_a[key])), key
    one_run.close()
    separate.close()
