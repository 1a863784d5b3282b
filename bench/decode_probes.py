"""Timings behind decoding ideas that were measured and not kept.

    python bench/decode_probes.py [--rounds 15]
    ONEDNN_MAX_CPU_ISA=AVX2 python bench/decode_probes.py   # AVX2, roughly

Prints the machine's fingerprint, then one JSON line per probe, medians over
rounds (BUILD_NOTES.md, "Decoding on an Intel Xeon"):
- qkv: a step's query, key and value projections, [128,512] x [512,512]
  three times, against one [128,512] x [512,1536] matmul; both as the
  decoder runs them (one-batch matmul, kernel [1, d_out, d_in],
  transpose_b) and as 2-D matmuls.
- in_place_cache: whether `tf.tensor_scatter_nd_update` writes a fixed-size
  cache in place inside a `tf.while_loop`: ms per iteration for writing 1,024
  rows of 64 floats into an 82-position buffer, beside a full copy of it.
- int8_hybrid: TensorFlow's float32 x int8 `UniformQuantizedDotHybrid`
  against the float32 matmul, [128,512] x [512,2048].
"""
import argparse
import json
import time

import numpy as np
import tensorflow as tf

from t2tlite import precision


def median_ms(fn, args, rounds, repeats=20):
  """Median over rounds of fn(*args)'s time, results read back."""
  tf.nest.map_structure(lambda t: t.numpy(), fn(*args))
  times = []
  for _ in range(rounds):
    start = time.perf_counter()
    for _ in range(repeats):
      out = fn(*args)
    tf.nest.map_structure(lambda t: t.numpy(), out)
    times.append((time.perf_counter() - start) / repeats)
  return round(1e3 * float(np.median(times)), 3)


def qkv(rounds):
  x = tf.random.normal([128, 512])
  kernels = [tf.random.normal([512, 512]) for _ in range(3)]
  batch_kernels = [tf.transpose(k)[tf.newaxis] for k in kernels]
  fused_kernel = tf.concat(kernels, axis=1)
  fused_batch_kernel = tf.concat(batch_kernels, axis=1)
  as_batch = lambda x: tf.reshape(x, [1, 128, 512])
  variants = {
      "three_one_batch": lambda x: [tf.matmul(as_batch(x), k, transpose_b=True)
                                    for k in batch_kernels],
      "fused_one_batch": lambda x: tf.matmul(as_batch(x), fused_batch_kernel,
                                             transpose_b=True),
      "three_2d": lambda x: [tf.matmul(x, k) for k in kernels],
      "fused_2d": lambda x: tf.matmul(x, fused_kernel),
  }
  return {name: median_ms(tf.function(fn), (x,), rounds)
          for name, fn in variants.items()}


def in_place_cache(rounds, positions=82, rows=1024, depth=64):
  update = tf.ones([rows, depth])

  @tf.function
  def scatter_loop(buffer):
    def body(i, b):
      at = (i * rows + tf.range(rows))[:, tf.newaxis]
      return i + 1, tf.tensor_scatter_nd_update(
          b, at, update + tf.cast(i, tf.float32))
    return tf.while_loop(lambda i, b: i < positions, body, (0, buffer))[1]

  @tf.function
  def copy_loop(buffer):
    def body(i, b):  # a real copy: the arithmetic optimizer keeps a * s
      return i + 1, b * tf.cast(i + 1, tf.float32)
    return tf.while_loop(lambda i, b: i < positions, body, (0, buffer))[1]

  buffer = tf.zeros([positions * rows, depth])
  written = scatter_loop(buffer).numpy()
  assert written[0, 0] == 1 and written[-1, 0] == positions  # really written
  return {name: round(median_ms(fn, (buffer,), rounds, repeats=1) /
                      positions, 3)
          for name, fn in (("scatter_ms_per_iteration", scatter_loop),
                           ("full_copy_ms_per_iteration", copy_loop))}


def int8_hybrid(rounds, m=128, k=512, n=2048):
  x, w = tf.random.normal([m, k]), tf.random.normal([k, n])
  scales = tf.reduce_max(tf.abs(w), axis=0) / 127.0
  zero_points = tf.zeros([n], tf.int32)
  quantized = tf.raw_ops.UniformQuantize(
      input=w, scales=scales, zero_points=zero_points, Tout=tf.qint8,
      quantization_axis=1, quantization_min_val=-127,
      quantization_max_val=127)

  @tf.function
  def hybrid(x):
    return tf.raw_ops.UniformQuantizedDotHybrid(
        lhs=x, rhs=quantized, rhs_scales=scales, rhs_zero_points=zero_points,
        Tout=tf.float32, rhs_quantization_axis=1,
        rhs_quantization_min_val=-127, rhs_quantization_max_val=127)

  exact = tf.matmul(x, w)
  error = float(tf.reduce_max(tf.abs(hybrid(x) - exact)) /
                tf.reduce_max(tf.abs(exact)))
  return {"int8_hybrid_ms": median_ms(hybrid, (x,), rounds, repeats=3),
          "float32_ms": median_ms(tf.function(tf.matmul), (x, w), rounds),
          "int8_max_error_relative_to_max_output": round(error, 4)}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rounds", type=int, default=15)
  args = parser.parse_args()
  print(f"machine: {precision.fingerprint()}", flush=True)
  for probe in (qkv, in_place_cache, int8_hybrid):
    print(json.dumps({"probe": probe.__name__, **probe(args.rounds)}),
          flush=True)


if __name__ == "__main__":
  main()
