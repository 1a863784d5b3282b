"""Where a train_base step spends its time: timing
ablations, each piece a tf.function timed alone in one process, interleaved
(`--rounds` round-robin rounds, medians). One JSON line per piece.

    python bench/time_breakdown.py --work train_base [--rounds 5] [--dtype mixed_bfloat16]

train_base pieces (batch 64 x 32 + 32 tokens, transformer_base, vocab 37000):
  step          forward, backward and Adam (the Trainer's step without its
                all-reduce and global norm; model and optimizer only, so the
                profile fits in memory beside other jobs)
  fwd_bwd       model + loss forward and backward (dropout on), no optimizer
  forward       model + loss forward only
  output_layer  pre-softmax projection + label-smoothed loss, fwd + bwd
  attention     the 24 attention cores (q k^T, mask, softmax, weights v) of
                the model, fwd + bwd, on inputs of the model's shapes
  layer_norm    the 30 layer norms, fwd + bwd
  adam          optimizer.apply_gradients on the 63M weights
"""
import argparse
import json
import statistics

import numpy as np
import t2tlite  # first: it turns oneDNN on before TensorFlow loads
import tensorflow as tf

import run as bench_run  # bench/run.py, beside this script
from t2tlite.layers.attention import causal_bias, scaled_dot_product_attention
from t2tlite.train.losses import smoothed_cross_entropy
from t2tlite.train.schedules import build_optimizer

from fingerprint import fingerprint


def train_pieces(args, rng):
  hparams_set, overrides, vocab, batch, length = bench_run.TRAIN_WORKS[
      "train_base"]
  hp = t2tlite.create_hparams(hparams_set, overrides)
  features = {"inputs": bench_run.random_ids(rng, vocab, batch, length),
              "targets": bench_run.random_ids(rng, vocab, batch, length)}
  model = t2tlite.build_model(hp, vocab, dtype=args.dtype)
  optimizer = build_optimizer(hp)
  optimizer.build(model.trainable_variables)
  d = hp.d_model
  dtype = model.compute_dtype

  def loss_of(logits):
    smoothed, _, weights = smoothed_cross_entropy(
        logits, features["targets"], hp.label_smoothing)
    return tf.reduce_sum(smoothed) / tf.reduce_sum(weights)

  def gradients():
    with tf.GradientTape() as tape:
      loss = loss_of(model(features, training=True))
    return tape.gradient(loss, model.trainable_variables)

  def fwd_bwd():
    return tf.add_n([tf.reduce_sum(tf.convert_to_tensor(g))
                     for g in gradients()])

  def step():
    grads = [tf.convert_to_tensor(g) for g in gradients()]
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return tf.add_n([tf.reduce_sum(g) for g in grads])

  def forward():
    return loss_of(model(features, training=True))

  hidden = tf.random.normal([batch, length, d], dtype=tf.float32)

  def output_layer():
    x = tf.cast(hidden, dtype)
    with tf.GradientTape() as tape:
      tape.watch(x)
      loss = loss_of(model.embedding.logits(x))
    grads = tape.gradient(loss, [x, model.embedding.embeddings])
    return tf.reduce_sum(tf.cast(grads[0], tf.float32)) + tf.reduce_sum(
        tf.convert_to_tensor(grads[1]))

  heads = tf.cast(tf.random.normal([batch, hp.num_heads, length, hp.d_k]),
                  dtype)
  dropout = bench_run.keras.layers.Dropout(0.0)
  bias = causal_bias(length)

  def attention():
    qs = [heads + i for i in range(24)]  # distinct: no common subexpressions
    with tf.GradientTape() as tape:
      tape.watch(qs)
      outs = [scaled_dot_product_attention(q, q, q, bias, dropout, True)[0]
              for q in qs]
      total = tf.add_n([tf.reduce_sum(tf.cast(o, tf.float32)) for o in outs])
    return tf.add_n([tf.reduce_sum(tf.cast(g, tf.float32))
                     for g in tape.gradient(total, qs)])

  norm = model.encoder_layers[0].self_attention_residual.norm

  def layer_norm():
    xs = [tf.cast(hidden, dtype) + i for i in range(30)]
    with tf.GradientTape() as tape:
      tape.watch(xs)
      total = tf.add_n([tf.reduce_sum(tf.cast(norm(x), tf.float32))
                        for x in xs])
    return tf.add_n([tf.reduce_sum(tf.cast(g, tf.float32))
                     for g in tape.gradient(total, xs)])

  zero_grads = [tf.zeros_like(v) for v in model.trainable_variables]

  def adam():
    optimizer.apply_gradients(
        zip(zero_grads, model.trainable_variables))
    return tf.constant(0.0)

  pieces = {"step": tf.function(step),
            "fwd_bwd": tf.function(fwd_bwd), "forward": tf.function(forward),
            "output_layer": tf.function(output_layer),
            "attention": tf.function(attention),
            "layer_norm": tf.function(layer_norm), "adam": tf.function(adam)}
  return pieces


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--work", choices=["train_base"], required=True)
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--dtype", default=None, help="e.g. mixed_bfloat16")
  args = parser.parse_args()
  print(f"machine: {fingerprint()}", flush=True)
  bench_run.keras.utils.set_random_seed(1)
  rng = np.random.RandomState(1)
  pieces = train_pieces(args, rng)
  for fn in pieces.values():  # trace and warm up
    bench_run.read_back(fn())
    bench_run.read_back(fn())
  times = bench_run.round_robin(pieces, args.rounds)
  whole = statistics.median(times[next(iter(pieces))])
  for name, t in times.items():
    print(json.dumps({"work": "profile_" + args.work, "piece": name,
                      "dtype": args.dtype or "float32",
                      "s_median": round(statistics.median(t), 3),
                      "fraction_of_" + next(iter(pieces)): round(
                          statistics.median(t) / whole, 3),
                      "rounds": args.rounds,
                      "loadavg": bench_run.load_average(),
                      "machine": fingerprint()}), flush=True)


if __name__ == "__main__":
  main()
