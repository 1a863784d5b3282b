"""Timings behind decoding ideas, kept or not.

    python bench/decode_probes.py [--rounds 15]
    ONEDNN_MAX_CPU_ISA=AVX2 python bench/decode_probes.py   # AVX2, roughly

Prints the machine's fingerprint, then one JSON line per probe, medians over
rounds, the variants of a probe timed in turn (BUILD_NOTES.md, "Decoding on
an Intel Xeon"):
- qkv: a step's query, key and value projections, [128,512] x [512,512]
  three times, against one [128,512] x [512,1536] matmul; both as the
  decoder runs them (one-batch matmul, kernel [1, d_out, d_in],
  transpose_b) and as 2-D matmuls.
- in_place_cache: whether `tf.tensor_scatter_nd_update` writes a fixed-size
  cache in place inside a `tf.while_loop`: ms per iteration for writing 1,024
  rows of 64 floats into an 82-position buffer, beside a full copy of it.
- int8_hybrid: TensorFlow's float32 x int8 `UniformQuantizedDotHybrid`
  and its int8 x int8 `UniformQuantizedDot` (int32 sums, rescaled) against
  the float32 matmul, [128,512] x [512,2048], with each one's largest error
  relative to the largest output. (The older `QuantizedMatMul`, quint8 x
  qint8, has no CPU kernel registered in TensorFlow 2.21.)
- onednn_int8: oneDNN's u8 x s8 inner product, which TensorFlow reaches
  through `QuantizedMatMulWithBiasAndDequantize`, as decode hparam int8
  runs it (`t2tlite.layers.int8`), for each matmul shape of a decode_base
  step: the kernel alone on quantized inputs, and the whole int8 map
  (activations quantized per row, weights per column, the result rescaled
  to float32) with the activations first and with the weights first (the
  layout int8 uses where the CPU has VNNI) against the float32 matmul,
  with the largest error (activations first) relative
  to the largest output for 8-bit and 7-bit activations (without VNNI,
  AVX2's u8 x s8 pair sums saturate at 16 bits unless the activations keep
  to 7 bits).
- search_weights: what a transformer_base search (vocabulary 37,000)
  costs to make its weights in the graph, float32 (decoding layouts) and
  int8 (quantized kernels), in ms; and the MB of those that
  `decoding.fixed_search_weights` keeps beside the model's variables (what
  an export saves in addition; BUILD_NOTES.md, "Search weights made
  once"). With TF_NUM_INTRAOP_THREADS=1 the times are those of a search
  step's threads under two concurrent searches on two cores.
"""
import argparse
import json
import statistics

import t2tlite  # first: it turns oneDNN on before TensorFlow loads
import keras
import tensorflow as tf

from t2tlite.decode.decoding import fixed_search_weights
from t2tlite.layers import int8

from fingerprint import fingerprint

# Run as a script, bench/ is the first folder on the import path.
import run as bench_run  # round_robin


def medians_ms(fns, rounds):
  """{name: median ms of a call} of fns (name -> no-argument callable), timed
  in turn, `rounds` rounds after one warm-up round (`run.round_robin`)."""
  bench_run.round_robin(fns, 1)
  times = bench_run.round_robin(fns, rounds)
  return {name: round(1e3 * statistics.median(seconds), 3)
          for name, seconds in times.items()}


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
  return medians_ms({name: lambda fn=tf.function(fn): fn(x)
                     for name, fn in variants.items()}, rounds)


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
  loops = medians_ms({"scatter": lambda: scatter_loop(buffer),
                      "full_copy": lambda: copy_loop(buffer)}, rounds)
  return {f"{name}_ms_per_iteration": round(ms / positions, 3)
          for name, ms in loops.items()}


def relative_error(approximate, exact):
  """The largest error of `approximate` relative to the largest output,
  rounded to 4 places."""
  return round(float(tf.reduce_max(tf.abs(approximate - exact)) /
                     tf.reduce_max(tf.abs(exact))), 4)


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

  # Both sides int8 (CTranslate2's scheme): the activations quantized per
  # tensor, the product summed in int32, then rescaled to float32.
  x_scale = tf.reduce_max(tf.abs(x)) / 127.0

  @tf.function
  def int8_int8(x):
    lhs = tf.raw_ops.UniformQuantize(
        input=x, scales=x_scale, zero_points=tf.constant(0), Tout=tf.qint8,
        quantization_axis=-1, quantization_min_val=-127,
        quantization_max_val=127)
    summed = tf.raw_ops.UniformQuantizedDot(
        lhs=lhs, rhs=quantized, lhs_scales=x_scale,
        lhs_zero_points=tf.constant(0), rhs_scales=scales,
        rhs_zero_points=zero_points, output_scales=x_scale * scales,
        output_zero_points=zero_points, Tout=tf.qint32,
        lhs_quantization_min_val=-127, lhs_quantization_max_val=127,
        rhs_quantization_axis=1, rhs_quantization_min_val=-127,
        rhs_quantization_max_val=127, output_quantization_axis=1,
        output_quantization_min_val=-2**31,
        output_quantization_max_val=2**31 - 1)
    return tf.cast(tf.bitcast(summed, tf.int32), tf.float32) * (
        x_scale * scales)

  exact = tf.matmul(x, w)
  matmul = tf.function(tf.matmul)
  times = medians_ms({"int8_hybrid": lambda: hybrid(x),
                      "int8_int8": lambda: int8_int8(x),
                      "float32": lambda: matmul(x, w)}, rounds)
  return {"int8_hybrid_ms": times["int8_hybrid"],
          "int8_int8_ms": times["int8_int8"],
          "float32_ms": times["float32"],
          "int8_max_error_relative_to_max_output": relative_error(
              hybrid(x), exact),
          "int8_int8_max_error_relative_to_max_output": relative_error(
              int8_int8(x), exact)}


def onednn_int8(rounds):
  shapes = {"logits": (128, 512, 37000), "ffn_in": (128, 512, 2048),
            "ffn_out": (128, 2048, 512),
            "attention_projection": (128, 512, 512)}
  result = {}
  for name, (m, k, n) in shapes.items():
    x = tf.random.normal([m, k])
    w = tf.random.normal([k, n], stddev=k**-0.5)
    quantized = int8.quantize_kernel(w, weights_first=False)
    weights_first = int8.quantize_kernel(w, weights_first=True)
    shifted, _ = int8.quantize_rows(x)
    int8_map = tf.function(int8.matmul)
    kernel_only = tf.function(int8.normalized_product)
    matmul = tf.function(tf.matmul)
    times = medians_ms({
        "float32": lambda: matmul(x, w),
        "int8_kernel": lambda: kernel_only(shifted, quantized),
        "int8_map": lambda: int8_map(x, quantized),
        "int8_weights_first_map": lambda: int8_map(x, weights_first)},
                       rounds)
    exact = tf.matmul(x, w)
    result.update({f"{name}_{variant}_ms": ms
                   for variant, ms in times.items()})
    for bits in (8, 7):
      result[f"{name}_error_{bits}_bit"] = relative_error(
          int8.matmul(x, quantized, bits), exact)
  return result


def search_weights(rounds):
  keras.utils.set_random_seed(1)
  model = t2tlite.build_model(
      t2tlite.create_hparams("transformer_base", ""), 37000)

  def megabytes(tensors):
    return round(sum(t.shape.num_elements() * t.dtype.size
                     for t in tensors) / 2**20, 1)

  result = {"model_variables_mb": megabytes([v.value for v in model.weights])}
  made = {}
  for name, quantized in (("float32", False), ("int8", True)):
    # One element of each weight read back, so that no part of making them
    # is pruned from the graph.
    made[name] = tf.function(lambda quantized=quantized: [
        tf.reshape(leaf, [-1])[0]
        for leaf in tf.nest.flatten(model.search_weights(quantized))])
    kept = fixed_search_weights(model, quantized)
    result[f"{name}_made_once_mb"] = megabytes(
        [t for value in kept.values() if not isinstance(value, tf.Variable)
         for t in tf.nest.flatten(value)])
  result.update({f"{name}_ms": ms
                 for name, ms in medians_ms(made, rounds).items()})
  return result


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rounds", type=int, default=15)
  args = parser.parse_args()
  print(f"machine: {fingerprint()}", flush=True)
  for probe in (qkv, in_place_cache, int8_hybrid, onednn_int8,
                search_weights):
    print(json.dumps({"probe": probe.__name__, **probe(args.rounds)}),
          flush=True)


if __name__ == "__main__":
  main()
