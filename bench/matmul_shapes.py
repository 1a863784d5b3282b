"""Speed of the matmuls a decoding step runs, in each way TensorFlow can be
asked for them, on this machine's CPU (oneDNN picks kernels by instruction
set, so the fast formulation on AVX-512 need not be the fast one on AVX2).

    python bench/matmul_shapes.py [--rows 128] [--rounds 7]
    # an AVX2-only CPU, approximately (same cores, restricted instructions):
    ONEDNN_MAX_CPU_ISA=AVX2 python bench/matmul_shapes.py --dtypes float32

Shapes (transformer_base, rows = 32 sentences x 4 beams): the tied output
projection (logits, 512 -> 37,000), the feed-forward maps 512 -> 2048 and
2048 -> 512, and an attention projection 512 -> 512. Formulations of
[rows, d_in] x W:
  matmul              2-D MatMul, W stored [d_in, d_out]
  matmul_transpose_b  2-D MatMul, W stored [d_out, d_in], transpose_b
  batch_broadcast     BatchMatMulV2 of [rows, 1, d_in] and W [d_in, d_out]
  batch_broadcast_transpose_b   the same with W [d_out, d_in], transpose_b
  batch_one_transpose_b   BatchMatMulV2 of one batch, [1, rows, d_in] and
                      W [1, d_out, d_in], transpose_b
  einsum              tf.einsum("rd,de->re") with W [d_in, d_out]
t2tlite's float32 search runs batch_one_transpose_b for the decoder layers'
maps and matmul for the logits (t2tlite/layers/linear.py); bfloat16 steps
run batch_broadcast. Each is traced alone in a tf.function, and the
formulations of one shape and dtype are timed in turn (`--rounds` rounds,
medians) after one warm-up call. Output: the machine's fingerprint
(`bench/fingerprint.py`: CPU, flags, ONEDNN_MAX_CPU_ISA when set,
matmul peaks) and the load average, then one Markdown table row per shape
and formulation (ms, GFLOP/s = 2 rows d_in d_out / time).
"""
import argparse
import statistics

import t2tlite  # first: it turns oneDNN on before TensorFlow loads
import tensorflow as tf


from fingerprint import fingerprint

# Run as a script, bench/ is the first folder on the import path.
import run as bench_run  # round_robin, load_average

# name: (d_in, d_out)
SHAPES = {
    "logits": (512, 37000),
    "ffn_in": (512, 2048),
    "ffn_out": (2048, 512),
    "attention_projection": (512, 512),
}


def formulations(x, w):
  """name -> no-argument callable giving a scalar that depends on the
  product (so reading it back waits for the whole matmul, not its copy)."""
  w_t = tf.transpose(w)
  x3 = x[:, tf.newaxis, :]

  def traced(fn, *args):
    f = tf.function(lambda *a: tf.reduce_sum(fn(*a)[0, ..., :1]))
    return lambda: f(*args)

  return {
      "matmul": traced(tf.matmul, x, w),
      "matmul_transpose_b": traced(
          lambda a, b: tf.matmul(a, b, transpose_b=True), x, w_t),
      "batch_broadcast": traced(tf.matmul, x3, w),
      "batch_broadcast_transpose_b": traced(
          lambda a, b: tf.matmul(a, b, transpose_b=True), x3, w_t),
      "batch_one_transpose_b": traced(
          lambda a, b: tf.matmul(a, b, transpose_b=True), x[tf.newaxis],
          w_t[tf.newaxis]),
      "einsum": traced(lambda a, b: tf.einsum("rd,de->re", a, b), x, w),
  }


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rows", type=int, default=128,
                      help="rows of the left operand (sentences x beams)")
  parser.add_argument("--rounds", type=int, default=11,
                      help="timed calls of each formulation")
  parser.add_argument("--shapes", default=",".join(SHAPES),
                      help="comma-separated subset of " + ", ".join(SHAPES))
  parser.add_argument("--dtypes", default="float32,bfloat16",
                      help="comma-separated; under ONEDNN_MAX_CPU_ISA=AVX2 "
                      "oneDNN has no bfloat16 matmul and aborts: use float32")
  args = parser.parse_args()
  tf.get_logger().setLevel("ERROR")  # one trace per formulation is intended
  print(f"machine: {fingerprint()}")
  print(f"load average at start: {bench_run.load_average()}")
  print("| shape | dtype | formulation | ms | GFLOP/s |")
  print("|---|---|---|---:|---:|")
  for name in args.shapes.split(","):
    d_in, d_out = SHAPES[name]
    for dtype in map(tf.as_dtype, args.dtypes.split(",")):
      x = tf.random.stateless_normal([args.rows, d_in], [1, 2], dtype=dtype)
      w = tf.random.stateless_normal([d_in, d_out], [3, 4], dtype=dtype)
      fns = formulations(x, w)
      bench_run.round_robin(fns, 1)  # trace and warm up
      times = bench_run.round_robin(fns, args.rounds)
      for formulation, seconds in times.items():
        median = statistics.median(seconds)
        gflops = 2 * args.rows * d_in * d_out / median / 1e9
        print(f"| {name} [{args.rows},{d_in}]x[{d_in},{d_out}] | "
              f"{dtype.name} | {formulation} | {median * 1e3:.2f} | "
              f"{gflops:.1f} |", flush=True)
  print(f"load average at end: {bench_run.load_average()}")


if __name__ == "__main__":
  main()
