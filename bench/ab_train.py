"""Same-process A/B of the training step: broadcasting batch matmuls against
one 2-D matmul per position-wise linear map (t2tlite/layers/linear.py).

    python bench/ab_train.py [--work train_base] [--mixed_precision=bfloat16]
        [--xla] [--rounds 7]

Builds two Trainers of the run.py work on the same synthetic batch, the
first traced with every position-wise map as `tf.matmul([batch, len, d],
kernel)` (the code before the change), the second with the library's
`position_wise`, and alternates their timed steps. One JSON line per variant:
median step time, the speedup and the first step's loss (same weights, so it
must agree).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench_run  # noqa: E402
from ab import broadcasting_matmul, linear_map  # noqa: E402
import t2tlite  # noqa: E402
from t2tlite.layers import feed_forward  # noqa: E402
from t2tlite.train import strategy as strategy_lib  # noqa: E402
from t2tlite.train.trainer import TrainConfig, Trainer  # noqa: E402


def make_step(args, linear_fn, features, vocab, hp, output_dir):
  """A traced train step of a fresh Trainer whose layers use linear_fn."""
  strategy = strategy_lib.make_strategy(0)
  bench_run.keras.utils.set_random_seed(args.seed)
  dataset = lambda split, training: strategy.experimental_distribute_dataset(
      tf.data.Dataset.from_tensors(features).repeat())
  config = TrainConfig(output_dir=output_dir, train_steps=10**9,
                       schedule="train", xla=args.xla,
                       mixed_precision=args.mixed_precision)
  trainer = Trainer(hp, config, strategy, vocab, dataset)
  iterator = iter(dataset("train", True))
  with linear_map(linear_fn):
    out = trainer._train_step(iterator)  # traces (and compiles) here
  first_loss = float(out["loss"]) / float(out["target_tokens"])
  return (lambda: trainer._train_step(iterator)["loss"]), first_loss


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--work", default="train_base",
                      choices=sorted(bench_run.TRAIN_WORKS))
  parser.add_argument("--mixed_precision", choices=["bfloat16"], default=None)
  parser.add_argument("--xla", action="store_true")
  parser.add_argument("--rounds", type=int, default=7)
  parser.add_argument("--seed", type=int, default=1)
  args = parser.parse_args()
  hparams_set, overrides, vocab, batch, length = bench_run.TRAIN_WORKS[
      args.work]
  hp = t2tlite.create_hparams(hparams_set, overrides)
  rng = np.random.RandomState(args.seed)
  features = {"inputs": bench_run.random_ids(rng, vocab, batch, length),
              "targets": bench_run.random_ids(rng, vocab, batch, length)}
  variants = {"broadcasting_matmul": broadcasting_matmul,
              "position_wise": feed_forward.position_wise}
  steps, first_loss = {}, {}
  with tempfile.TemporaryDirectory() as tmp:
    for name, fn in variants.items():
      steps[name], first_loss[name] = make_step(
          args, fn, features, vocab, hp, os.path.join(tmp, name))
    times = bench_run.round_robin(steps, args.rounds)
  base = statistics.median(times["broadcasting_matmul"])
  for name, t in times.items():
    median = statistics.median(t)
    print(json.dumps({
        "work": "ab_" + args.work, "variant": name, "xla": args.xla,
        "mixed_precision": args.mixed_precision or "float32",
        "step_s_median": round(median, 4),
        "s_all": [round(x, 3) for x in t],
        "tokens_per_s": round(batch * length / median, 1),
        "speedup_vs_broadcasting_matmul": round(base / median, 3),
        "first_loss": round(first_loss[name], 5), "rounds": args.rounds,
        "loadavg": bench_run.load_average()}), flush=True)


if __name__ == "__main__":
  main()
