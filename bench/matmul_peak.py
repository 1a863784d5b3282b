"""The machine's matmul peak as TensorFlow reaches it: GFLOP/s of a large
square tf.matmul in float32 and bfloat16 (oneDNN; AVX-512 BF16 or AMX where
the CPU has them). One JSON line per dtype, after the machine's fingerprint.

    python bench/matmul_peak.py [--n 4096] [--steps 7]

FLOPs of one [n, n] x [n, n] product: 2 n^3. The figure is the median over
`--steps` products after one warm-up; the result is read back each time.
"""
import argparse
import json
import os
import statistics

from fingerprint import fingerprint, matmul_seconds


def peak(n, dtype, steps):
  times = matmul_seconds(dtype, n, steps)
  median = statistics.median(times)
  return {"work": "matmul_peak", "dtype": dtype, "n": n,
          "step_s_median": round(median, 4),
          "gflop_per_s": round(2 * n**3 / median / 1e9, 1),
          "gflop_per_s_best": round(2 * n**3 / min(times) / 1e9, 1),
          "steps": steps, "machine": fingerprint(),
          "loadavg": list(os.getloadavg())}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--n", type=int, default=4096)
  parser.add_argument("--steps", type=int, default=7)
  args = parser.parse_args()
  print(f"machine: {fingerprint()}", flush=True)
  for dtype in ("float32", "bfloat16"):
    print(json.dumps(peak(args.n, dtype, args.steps)), flush=True)


if __name__ == "__main__":
  main()
