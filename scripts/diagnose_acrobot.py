"""Acrobot-v1 diagnosis (issue 14 item 8): which part of the setup keeps PPO at -500.

Trains config/ppo/Acrobot.yaml (swish, normalize on, 16 copies, batch 256, buffer 4096,
lr 1e-3, lambda 0.94, 4 epochs) with one change per variant and records the reward curve
and, before every update, diagnostics of the update buffer: explained variance of the
critic, advantage spread, the policy's marginal entropy / state-action mutual information
and the fraction of normalised inputs at the +-5 clip. One run per call:

    python scripts/diagnose_acrobot.py NAME SEED STEPS [key=value ...]

Keys: ``hp.<hyperparameter>=v`` / ``net.<network setting>=v`` (config overrides, e.g.
``net.activation=tanh``, ``net.normalize=false``, ``hp.clip_value_loss=false``);
``init=orth|vs|fanorth``, ``body_gain``, ``out_gain``, ``val_gain``, ``bias=<std>``
(initialisation variants, patched into trainers.tf.layers.dense); ``normclip=<c>``,
``normmode=nocenter|floor``, ``normfreeze=<rows>`` (normaliser variants);
``scaledclip=1`` is ignored (a value-clipping variant tried and dropped); ``bias=<std>``
reproduces the fix on any activation, ``bias=0`` is not the old behaviour (use
``normmode``/``net.normalize`` instead, or check out the commit before the fix). Writes
``$DIAG_OUT/<NAME>_s<SEED>.json`` (default /tmp/acrobot_diag); ``--plot OUT.png
NAME,NAME,...`` draws the reward curves of saved runs (needs matplotlib, not a project
dependency). Variants patch the graph builders of this process only.
"""
import csv, json, os, sys, tempfile, time, yaml
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.chdir(ROOT)
OUT = os.environ.get("DIAG_OUT", "/tmp/acrobot_diag")
os.makedirs(OUT, exist_ok=True)
if sys.argv[1] == "--plot":
    import collections, glob
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    groups = sys.argv[3].split(",")
    tags = sys.argv[4].split(",") if len(sys.argv) > 4 else ["Environment/Cumulative Reward"]
    data = collections.defaultdict(list)
    for f in glob.glob(os.path.join(OUT, "*.json")):
        d = json.load(open(f))
        if d["name"] in groups:
            data[d["name"]].append(d)
    fig, axes = plt.subplots(1, len(tags), figsize=(5.5 * len(tags), 4), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, tag in zip(axes[0], tags):
        for gi, g in enumerate(groups):
            for k, d in enumerate(sorted(data[g], key=lambda d: d["seed"])):
                c = d["curves"].get(tag, {})
                xs = sorted(c, key=int)
                ax.plot([int(x) / 1000 for x in xs], [c[x] for x in xs], color=colors[gi % 10],
                        label=f"{g} ({len(data[g])} seeds)" if k == 0 else None)
        ax.set_title(tag)
        ax.set_xlabel("steps (k)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=90)
    sys.exit(0)
name, seed, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
opts = dict(a.split("=", 1) for a in sys.argv[4:])
opts.setdefault("diag", "1")
cfg = yaml.safe_load(open(opts.pop("config", "config/ppo/Acrobot.yaml")))
beh = next(iter(cfg["behaviors"].values()))
for k, v in list(opts.items()):
    if k.startswith(("hp.", "net.", "rs.")):
        sec = {"hp": "hyperparameters", "net": "network_settings"}[k.split(".")[0]]
        beh[sec][k.split(".", 1)[1]] = yaml.safe_load(v)
        opts.pop(k)
# init knobs by monkeypatching
import numpy as np
from trainers.tf import layers, encoders, distributions, tf
from trainers.ppo import optimizer
orig_dense = layers.dense
body_gain = float(opts.get("body_gain", np.sqrt(2)))
out_gain = opts.get("out_gain")
val_gain = opts.get("val_gain")
init = opts.get("init", "orth")
def dense(x, units, name, activation=None, gain=float(np.sqrt(2.0)), bias_std=0.0):
    if gain == float(np.sqrt(2.0)):
        gain = body_gain
    elif gain == 0.01 and out_gain is not None:
        gain = float(out_gain)
    elif gain == 1.0 and val_gain is not None:
        gain = float(val_gain)
    if opts.get("bias") and gain == body_gain:
        in_size = int(x.shape[-1])
        with tf.variable_scope(name):
            kernel = tf.get_variable("kernel", [in_size, units], dtype=x.dtype, initializer=tf.orthogonal_initializer(gain))
            bias = tf.get_variable("bias", [units], dtype=x.dtype, initializer=tf.random_normal_initializer(0.0, float(opts["bias"])))
        y = tf.matmul(x, kernel) + bias
        return activation(y) if activation is not None else y
    if init == "orth":
        return orig_dense(x, units, name, activation, gain, bias_std)
    if init == "fanorth":  # orthogonal, rescaled so each unit's variance is gain^2 / fan_in
        in_size = int(x.shape[-1])
        return orig_dense(x, units, name, activation, gain * max(1.0, (units / in_size) ** 0.5), bias_std)
    in_size = int(x.shape[-1])
    with tf.variable_scope(name):
        ini = tf.variance_scaling_initializer(gain ** 2, mode="fan_in", distribution="truncated_normal")
        kernel = tf.get_variable("kernel", [in_size, units], dtype=x.dtype, initializer=ini)
        bias = tf.get_variable("bias", [units], dtype=x.dtype, initializer=tf.zeros_initializer())
    y = tf.matmul(x, kernel) + bias
    return activation(y) if activation is not None else y
for m in (layers, encoders, distributions, optimizer):
    if hasattr(m, "dense"): m.dense = dense
layers.mlp.__globals__["dense"] = dense
from trainers.tf import normalizer as _nm
if opts.get("normclip"):
    _nm.CLIP = float(opts["normclip"])
if opts.get("normmode"):
    def _normalize(self, x):
        variance = self.m2 / self.count
        mean = tf.cast(self.mean, x.dtype)
        std = tf.cast(tf.sqrt(variance + 1e-8), x.dtype)
        if opts["normmode"] == "floor":
            std = tf.maximum(std, 1.0)
        elif opts["normmode"] == "nocenter":
            mean = tf.zeros_like(mean)
        return tf.clip_by_value((x - mean) / std, -_nm.CLIP, _nm.CLIP)
    _nm.Normalizer.normalize = _normalize
from trainers.cli.learn import run_training
from trainers.layout import RunLayout
from trainers.ppo.trainer import PPOTrainer
_orig_update = PPOTrainer.update
def _update(self):
    # Policy diagnostics on the update buffer before the update: marginal entropy H(E[p]),
    # conditional entropy E[H(p)], their difference (mutual information between state and action).
    if opts.get("diag") and self.policy.actor.discrete is not None:
        obs = [self.buffer[f"obs_{i}"] for i in range(len(self.policy.obs))]
        masks = self.buffer["action_mask"]
        lp = self.policy.session.run(self.policy.actor.discrete.log_probs[0], {**dict(zip(self.policy.obs, obs)), self.policy.action_masks: masks})
        p = np.exp(lp); pm = p.mean(0)
        h_marg = float(-(pm * np.log(pm)).sum()); h_cond = float(-(p * lp).sum(1).mean())
        self.stats.add_stat("Diag/Marginal Entropy", h_marg)
        self.stats.add_stat("Diag/Mutual Information", h_marg - h_cond)
        self.stats.add_stat("Diag/Max Marginal Prob", float(pm.max()))
        adv = self.buffer["advantages"]
        self.stats.add_stat("Diag/Advantage Std", float(adv.std()))
        norm = self.policy.normalizers[0]
        if norm is not None:
            cnt, mean, m2 = self.policy.session.run([norm.count, norm.mean, norm.m2])
            z = (obs[0] - mean) / np.sqrt(m2 / cnt + 1e-8)
            self.stats.add_stat("Diag/Clipped Input Fraction", float((np.abs(z) >= 5).mean()))
            self.stats.add_stat("Diag/Clipped cos1 Fraction", float((np.abs(z[:, 0]) >= 5).mean()))
            self.stats.add_stat("Diag/Input RMS", float(np.sqrt((np.clip(z, -5, 5) ** 2).mean())))
        ret = self.buffer["extrinsic_returns"]; v = self.buffer["extrinsic_value_estimates"]
        self.stats.add_stat("Diag/Explained Variance", float(1 - np.var(ret - v) / (np.var(ret) + 1e-8)))
    return _orig_update(self)
PPOTrainer.update = _update
if opts.get("normfreeze"):
    from trainers.policy import Policy
    _orig_un = Policy.update_normalization
    _rows = [0]
    def _un(self, obs):
        if _rows[0] < int(opts["normfreeze"]):
            _rows[0] += len(obs[0]); _orig_un(self, obs)
    Policy.update_normalization = _un
from trainers.config import load_settings
with tempfile.TemporaryDirectory() as d:
    p = os.path.join(d, "c.yaml"); yaml.safe_dump(cfg, open(p, "w"))
    o = load_settings(p, {"run_id": "r", "results_dir": d, "max_steps": steps, "seed": seed})
    t = time.time()
    try:
        run_training(o)
    except Exception as e:  # the export check after training (patched graphs): keep the curves
        print("ignored:", type(e).__name__, e, flush=True)
    wall = time.time() - t
    bname = next(iter(cfg["behaviors"]))
    rows = list(csv.DictReader(open(RunLayout(os.path.join(d, "r")).stats_csv(bname))))
curves = {}
for r in rows:
    curves.setdefault(r["tag"], {})[int(r["step"])] = float(r["mean"])
out = {"name": name, "seed": seed, "opts": sys.argv[4:], "wall": wall, "curves": curves}
json.dump(out, open(os.path.join(OUT, f"{name}_s{seed}.json"), "w"))
rew = curves.get("Environment/Cumulative Reward", {})
print(name, seed, f"{wall:.0f}s", " ".join(f"{v:.0f}" for k, v in sorted(rew.items())), flush=True)
