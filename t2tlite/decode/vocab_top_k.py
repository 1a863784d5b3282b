"""The k best tokens of each row of logits, and the row's log-normalizer,
in fewer passes over the vocabulary than log_softmax + top_k.

A search step of transformer_base decodes 128 rows of 37,000 logits. On CPU,
`tf.nn.log_softmax` then `tf.math.top_k` over them costs more than a third of
the step's output projection (BUILD_NOTES.md, Performance), so:
- top-k goes by blocks: the row is cut into blocks of equal size; the k best
  elements lie in the k blocks with the largest maxima (any other block has
  k blocks before it whose maxima already beat all its elements), so top_k
  runs over the block maxima and then over k blocks only;
- no log_softmax tensor is made: log P(token) = logit - logsumexp(row) is
  computed only for the k candidates. The normalizer comes from one softmax
  op (oneDNN's, one fused kernel on CPU): the best token's probability is
  exp(best - max) / sum = 1 / sum, so logsumexp = best - log(P(best)), to
  within a rounding of the per-op exp, max, subtract and sum it replaces
  (BUILD_NOTES.md, "The search's normalizer");
- a token that is never chosen (the padding id) is left out without a pass
  over the vocabulary to mask it: the k + 1 best drop it, and the normalizer
  loses its share, log(1 - P(token)).
Ties are broken as `tf.math.top_k` breaks them (the lower token id first):
blocks are contiguous and kept in order.
"""
import math

import tensorflow as tf

# Blocks must be small enough that k of them are cheap to gather, and
# numerous enough that their maxima are cheap to rank: about sqrt(V / k)
# elements each. A vocabulary with no divisor near that uses plain top_k.
_MAX_BLOCK_FACTOR = 8


def block_size(vocab_size, k):
  """The block length used for `vocab_size` logits and k winners, or None
  when plain top_k is used (no divisor of vocab_size close to the ideal, or
  fewer than k blocks)."""
  ideal = max(1, int(math.sqrt(vocab_size / k)))
  for size in range(ideal, _MAX_BLOCK_FACTOR * ideal + 1):
    if vocab_size % size == 0 and vocab_size // size >= k:
      return size
  return None


def log_normalizer_and_top_k(logits, k, excluded_id=None):
  """Row log-normalizers and the k largest logits of each row.

  Args:
    logits: float32 [rows, vocab] (static vocab for the block path); may
      hold -inf or large negative values (masked tokens).
    k: int, winners per row (<= vocab, or vocab - 1 with excluded_id).
    excluded_id: None, or a token id (a Python int) treated as if its logit
      were -inf: never a winner, and outside the normalizer.
  Returns:
    (log_z float32 [rows]: logsumexp of the row, values float32 [rows, k]
    in descending order, ids int32 [rows, k]); so values - log_z[:, None]
    are the winners' log-probabilities.
  """
  values, ids = _top_k(logits, k if excluded_id is None else k + 1)
  if excluded_id is not None:
    # At most one of the k + 1 is the excluded token: the others, in order.
    kept = tf.not_equal(ids, excluded_id)
    _, order = tf.math.top_k(tf.cast(kept, tf.int32) * (k + 1) -
                             tf.range(k + 1), k=k)
    values = tf.gather(values, order, batch_dims=1)
    ids = tf.gather(ids, order, batch_dims=1)
  probs = tf.nn.softmax(logits)
  best = values[:, 0]
  log_z = best - tf.math.log(tf.gather(probs, ids[:, 0], batch_dims=1))
  if excluded_id is not None:
    excluded = probs[:, excluded_id]
    # log(1 - p) loses precision as p nears 1; a model that puts most of a
    # row's mass on the excluded token gets the direct sum instead.
    log_z = tf.cond(
        tf.reduce_any(excluded > 0.5),
        lambda: _logsumexp_without(logits, excluded_id),
        lambda: log_z + tf.math.log1p(-excluded))
  # A row of -inf has no probabilities (0 / 0): its normalizer is -inf, as
  # tf.reduce_logsumexp gives.
  return tf.where(tf.math.is_finite(best), log_z, best), values, ids


def _logsumexp_without(logits, token):
  """logsumexp of each row of logits [rows, vocab] without column `token`."""
  column = tf.equal(tf.range(tf.shape(logits)[-1]), token)
  return tf.reduce_logsumexp(
      tf.where(column, tf.constant(-float("inf"), logits.dtype), logits),
      axis=-1)


def _top_k(logits, k):
  """tf.math.top_k(logits, k) over [rows, vocab], by blocks where the
  vocabulary allows (`block_size`)."""
  vocab = logits.shape[-1]
  size = block_size(vocab, k) if vocab is not None else None
  if size is None:
    return tf.math.top_k(logits, k=k)
  rows = tf.shape(logits)[0]
  blocks = tf.reshape(logits, [rows, vocab // size, size])
  block_max = tf.reduce_max(blocks, axis=-1)  # [rows, blocks]
  # The k best blocks, in token order (so ties go to the lower id).
  _, best = tf.math.top_k(block_max, k=k)
  best = tf.sort(best, axis=-1)
  candidates = tf.reshape(tf.gather(blocks, best, batch_dims=1),
                          [rows, k * size])
  values, positions = tf.math.top_k(candidates, k=k)
  ids = (tf.gather(best, positions // size, batch_dims=1) * size +
         positions % size)
  return values, ids
