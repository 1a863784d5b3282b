"""How fast the input pipeline alone delivers training batches.

    python bench/pipeline_speed.py --problem=translate_ende_wmt \
        --data_dir=DATA --hparams_set=transformer_small [--batches=300]

Reads the real training records through `Problem.dataset` (shuffling,
length filter, bucketing, padding: exactly what t2t-trainer consumes) and
prints one JSON line: batches/s and real (non-padding) source + target
tokens/s, the same token count as t2t-trainer's console `tokens/s`, so the two
compare directly, and the CPU time the process spent per batch (every thread:
the share of the cores the pipeline takes from training at that rate).
"""
import argparse
import json
import os
import time

import t2tlite  # first: it turns oneDNN on before TensorFlow loads
import tensorflow as tf

from t2tlite.problem import get_problem

from fingerprint import fingerprint


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--problem", required=True)
  parser.add_argument("--data_dir", required=True)
  parser.add_argument("--hparams_set", required=True)
  parser.add_argument("--hparams", default="")
  parser.add_argument("--batches", type=int, default=300)
  args = parser.parse_args()
  print(f"machine: {fingerprint()}", flush=True)
  hp = t2tlite.create_hparams(args.hparams_set, args.hparams)
  dataset = get_problem(args.problem).dataset(args.data_dir, "train", hp,
                                              training=True, seed=1)
  iterator = iter(dataset)
  next(iterator)  # start-up (file listing, first shuffle fill) not timed
  tokens = 0
  start, cpu_start = time.perf_counter(), time.process_time()
  for _ in range(args.batches):
    batch = next(iterator)
    tokens += int(tf.math.count_nonzero(batch["inputs"]) +
                  tf.math.count_nonzero(batch["targets"]))
  seconds = time.perf_counter() - start
  cpu_seconds = time.process_time() - cpu_start
  print(json.dumps({
      "problem": args.problem, "hparams_set": args.hparams_set,
      "batch_size": hp.batch_size, "batches": args.batches,
      "batches_per_s": round(args.batches / seconds, 1),
      "tokens_per_s": round(tokens / seconds),
      "cpu_ms_per_batch": round(1e3 * cpu_seconds / args.batches, 2),
      "load_average": os.getloadavg()[0],
      "machine": fingerprint()}))


if __name__ == "__main__":
  main()
