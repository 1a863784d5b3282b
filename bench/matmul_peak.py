"""The machine's matmul peak as TensorFlow reaches it: GFLOP/s of a large
square tf.matmul in float32 and bfloat16 (oneDNN; AVX-512 BF16 where the CPU
has it). One JSON line per dtype.

    python bench/matmul_peak.py [--n 4096] [--steps 7]

FLOPs of one [n, n] x [n, n] product: 2 n^3. The figure is the median over
`--steps` products after one warm-up; the result is read back each time.
"""
import argparse
import json
import statistics
import sys

import tensorflow as tf

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import run as bench_run  # noqa: E402  (machine(), versions(), load_average())


def peak(n, dtype, steps):
  a = tf.random.stateless_normal([n, n], seed=[1, 2], dtype=dtype)
  b = tf.random.stateless_normal([n, n], seed=[3, 4], dtype=dtype)
  product = tf.function(lambda a, b: tf.reduce_sum(tf.matmul(a, b)[0, :1]))
  product(a, b).numpy()
  times = bench_run.round_robin({"matmul": lambda: product(a, b)},
                                steps)["matmul"]
  median = statistics.median(times)
  return {"work": "matmul_peak", "dtype": dtype.name, "n": n,
          "step_s_median": round(median, 4),
          "gflop_per_s": round(2 * n**3 / median / 1e9, 1),
          "gflop_per_s_best": round(2 * n**3 / min(times) / 1e9, 1),
          "steps": steps, "versions": bench_run.versions(),
          "machine": bench_run.machine(), "loadavg": bench_run.load_average()}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--n", type=int, default=4096)
  parser.add_argument("--steps", type=int, default=7)
  args = parser.parse_args()
  for dtype in (tf.float32, tf.bfloat16):
    print(json.dumps(peak(args.n, dtype, args.steps)), flush=True)


if __name__ == "__main__":
  main()
