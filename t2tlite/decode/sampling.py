"""Sampling outputs instead of searching them: temperature, epsilon, top-k
and top-p (nucleus) sampling, reproducible with a seed.

    sample = Sample(temperature=0.8, top_k=0, top_p=0.9, seed=7,
                    num_samples=4)                 # strategy.Sample
    _, keys = expand(sample, inputs)
    searcher = SampleSearcher(sample, keys)        # in loop.search

At every step the next token is drawn from the model's distribution with
its logits divided by the temperature, without the tokens whose
probability there is under `epsilon` (epsilon sampling, Hewitt et al.,
2022; the most probable token always stays; 0: none dropped), restricted
to the `top_k` most probable tokens (0: all) and then to the smallest set
of most probable tokens whose probability reaches `top_p` (1: all). Tokens
a decoding constraint forbids have probability 0, so a sampled output obeys
the constraint as a searched one does (a sampled parse is still a tree).

Reproducibility: each draw reads one uniform number made by an integer
hash of (seed, the row's input ids, the sample's index, the step), in
TensorFlow ops. So a sentence gets the same samples whatever other
sentences share its batch, whatever its padding and in whichever
concurrent search it runs: t2t-decoder, a Decoder and an export give the
same outputs for the same seed. Two equal input sentences get the same
samples.
"""
import math

import tensorflow as tf

from t2tlite.decode.greedy import GreedySearcher
from t2tlite.ids import PAD_ID

_MASK = 0xFFFFFFFF
# Multipliers below 2**31: a 32-bit value times one stays within int64.
_MULTIPLIER = 0x45D9F3B
_GOLDEN = 0x9E3779B1 & 0x7FFFFFFF
# The largest float32 below 1.
_BELOW_ONE = 1.0 - 2.0**-24


def _mix(x):
  """A 32-bit integer hash (xor-shift-multiply), elementwise.

  Args:
    x: int64 tensor of values in [0, 2**32).
  Returns:
    int64 tensor of the same shape, values in [0, 2**32).
  """
  x = tf.bitwise.bitwise_and(
      tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 16)) * _MULTIPLIER,
      _MASK)
  x = tf.bitwise.bitwise_and(
      tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 16)) * _MULTIPLIER,
      _MASK)
  return tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 16))


def _combine(a, b):
  """Hash of two [0, 2**32) int64 tensors (broadcast)."""
  return _mix(tf.bitwise.bitwise_and(_mix(a) * 31 + b + _GOLDEN, _MASK))


def row_keys(inputs, sample_index, seed):
  """One key per row, from its input ids (padding ignored), its sample's
  index and the seed.

  Args:
    inputs: int32 [rows, src_len] source ids, 0-padded.
    sample_index: int32 [rows], which of an input's samples the row is.
    seed: int, the sampling seed.
  Returns:
    int64 [rows] keys in [0, 2**32).
  """
  ids = tf.cast(inputs, tf.int64)
  positions = tf.range(tf.shape(inputs, out_type=tf.int64)[1],
                       dtype=tf.int64)
  token_hashes = _combine(tf.bitwise.bitwise_and(ids, _MASK),
                          positions[tf.newaxis, :])
  token_hashes = tf.where(inputs != PAD_ID, token_hashes,
                          tf.zeros_like(token_hashes))
  # A sum: independent of trailing padding, and different for reorderings
  # (each hash depends on its position).
  text = tf.bitwise.bitwise_and(tf.reduce_sum(token_hashes, axis=1), _MASK)
  seeded = _combine(text, tf.constant(seed & _MASK, tf.int64))
  return _combine(seeded, tf.cast(sample_index, tf.int64))


def uniforms(keys, step):
  """float32 [rows] uniform numbers in (0, 1) for `step` of each row."""
  bits = _combine(keys, tf.cast(step, tf.int64))
  # 24 bits, (n + 0.5) / 2**24: never 0. In float32 the half of n >= 2**23
  # rounds to n or n + 1, and that of the largest n to 2**24: held below 1.
  top = tf.cast(tf.bitwise.right_shift(bits, 8), tf.float32)
  return tf.minimum((top + 0.5) / float(1 << 24), _BELOW_ONE)


def without_improbable(logits, epsilon):
  """Epsilon sampling's truncation (Hewitt et al., 2022): the tokens whose
  probability is under `epsilon` get logit -inf, except each row's most
  probable token (so one always stays).

  Args:
    logits: float32 [rows, V].
    epsilon: float in (0, 1).
  Returns:
    float32 [rows, V].
  """
  keep = tf.logical_or(
      tf.nn.log_softmax(logits, axis=-1) >= math.log(epsilon),
      logits >= tf.reduce_max(logits, axis=-1, keepdims=True))
  return tf.where(keep, logits, tf.constant(-math.inf, logits.dtype))


def draw(logits, u, top_k=0, top_p=1.0):
  """One token a row drawn from softmax(logits) restricted to the top_k
  most probable tokens (0: all), then to the smallest set of most probable
  ones whose probability reaches top_p (1: all), by inverting the
  cumulative distribution at u.

  Args:
    logits: float32 [rows, V] (tokens at -inf or IMPOSSIBLE_LOG_PROB are
      never drawn).
    u: float32 [rows] uniform numbers in (0, 1).
  Returns:
    int32 [rows] token ids.
  """
  vocab = logits.shape[-1]
  order = None
  if top_k or top_p < 1.0:
    k = min(top_k, vocab) if top_k and vocab is not None else (
        top_k or tf.shape(logits)[-1])
    logits, order = tf.math.top_k(logits, k=k)  # sorted, ties: lower id
  probs = tf.nn.softmax(logits, axis=-1)
  if top_p < 1.0:
    # Keep the most probable tokens up to and including the one whose
    # cumulative probability reaches top_p (the first token always).
    before = tf.math.cumsum(probs, axis=-1, exclusive=True)
    probs = tf.where(before < top_p, probs, tf.zeros_like(probs))
  cdf = tf.math.cumsum(probs, axis=-1)
  total = cdf[:, -1:]
  # cdf never decreases and reaches `total` at the last token of nonzero
  # probability; with u in (0, 1), 0 < u * total <= total: the choice is a
  # token of nonzero probability, never past that one.
  choice = tf.reduce_sum(tf.cast(cdf < u[:, tf.newaxis] * total, tf.int32),
                         axis=-1)
  if order is None:
    return choice
  return tf.gather(order, choice, batch_dims=1)


def expand(sample, inputs):
  """The rows a sampling search runs: each input num_samples times.

  Args:
    sample: a `strategy.Sample`.
    inputs: int32 [batch, src_len].
  Returns:
    (int32 [batch * num_samples, src_len], the inputs' samples
    consecutive; int64 [batch * num_samples] their row keys).
  """
  n = sample.num_samples
  rows = tf.repeat(inputs, n, axis=0) if n > 1 else inputs
  index = tf.tile(tf.range(n), [tf.shape(inputs)[0]])
  return rows, row_keys(rows, index, sample.seed)


def pick_for(sample, keys):
  """`step_rules.StepRules.picked`'s pick for rows with these keys:
  `sample.draw` (a `strategy.Sample`) at each step's uniform numbers."""

  def pick(logits, step):
    return sample.draw(logits, uniforms(keys, step))

  return pick


class SampleSearcher(GreedySearcher):
  """Greedy search whose next token is drawn (`strategy.Sample.draw`),
  each row with its key (a row tensor: it leaves with its row).

  Args:
    sample: a `strategy.Sample`.
    keys: int64 [rows] (`expand`).
  """

  def __init__(self, sample, keys):
    self.sample, self.keys = sample, keys

  def row_tensors(self):
    return {"keys": self.keys}

  def next_token(self, rules, logits, seqs, step, row_tensors):
    return rules.picked(logits, seqs, step,
                        pick_for(self.sample, row_tensors["keys"]))
