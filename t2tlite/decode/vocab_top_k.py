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
  (BUILD_NOTES.md, "Decoding cache and search");
- tokens that may not be chosen (the padding id; EOS before a minimum
  length) are left out without a pass over the vocabulary to mask them:
  the k + n best drop them, and the normalizer loses their share,
  log(1 - P(them)).
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


def log_normalizer_and_top_k(logits, k, excluded_ids=(), excluding=None):
  """Row log-normalizers and the k largest logits of each row.

  Args:
    logits: float32 [rows, vocab] (static vocab for the block path); may
      hold -inf or large negative values (masked tokens).
    k: int, winners per row (<= vocab - len(excluded_ids)).
    excluded_ids: token ids (Python ints) treated as if their logits were
      -inf: never winners, and outside the normalizer.
    excluding: None (every id of excluded_ids is left out), or a bool
      tensor [len(excluded_ids)] saying which of them are, for all rows.
  Returns:
    (log_z float32 [rows]: logsumexp of the row, values float32 [rows, k]
    in descending order, ids int32 [rows, k]); so values - log_z[:, None]
    are the winners' log-probabilities.
  """
  excluded_ids = tuple(excluded_ids)
  n = len(excluded_ids)
  values, ids = _top_k(logits, k + n)
  probs = tf.nn.softmax(logits)
  if n:
    flags = _exclusion_flags(n, excluding)
    hidden = excluded(ids, excluded_ids, flags)
    share = tf.zeros_like(logits[:, 0])
    for i, token in enumerate(excluded_ids):
      share += tf.where(flags[i], probs[:, token], 0.0)
    # At most n of the k + n are left out: the first k others, in order.
    _, order = tf.math.top_k(
        tf.cast(tf.logical_not(hidden), tf.int32) * (k + n) -
        tf.range(k + n), k=k)
    values = tf.gather(values, order, batch_dims=1)
    ids = tf.gather(ids, order, batch_dims=1)
  best = values[:, 0]
  log_z = best - tf.math.log(tf.gather(probs, ids[:, 0], batch_dims=1))
  if n:
    # log(1 - p) loses precision as p nears 1; a model that puts most of a
    # row's mass on the excluded tokens gets the direct sum instead.
    log_z = tf.cond(
        tf.reduce_any(share > 0.5),
        lambda: _logsumexp_without(logits, excluded_ids, flags),
        lambda: log_z + tf.math.log1p(-share))
  # A row of -inf has no probabilities (0 / 0): its normalizer is -inf, as
  # tf.reduce_logsumexp gives.
  return tf.where(tf.math.is_finite(best), log_z, best), values, ids


def log_normalizer(logits, excluded_ids=(), excluding=None):
  """float32 [rows]: logsumexp of each row of logits [rows, vocab] without
  `excluded_ids` (as `log_normalizer_and_top_k` leaves them out)."""
  excluded_ids = tuple(excluded_ids)
  if not excluded_ids:
    return tf.reduce_logsumexp(logits, axis=-1)
  return _logsumexp_without(logits, excluded_ids,
                            _exclusion_flags(len(excluded_ids), excluding))


def _exclusion_flags(n, excluding):
  """bool [n]: which of n excluded ids are left out (`excluding`, or all
  of them when it is None)."""
  return (tf.ones([n], tf.bool) if excluding is None else
          tf.convert_to_tensor(excluding))


def excluded(token_ids, excluded_ids, flags):
  """Which of `token_ids` (int32, any shape) are left out: bool, shaped
  like them, true where a token is one of `excluded_ids` (Python ints)
  whose flag (bool [len(excluded_ids)]) is true."""
  hidden = tf.zeros_like(token_ids, tf.bool)
  for i, token in enumerate(excluded_ids):
    hidden |= flags[i] & tf.equal(token_ids, token)
  return hidden


def _logsumexp_without(logits, tokens, flags):
  """logsumexp of each row of logits [rows, vocab] without the columns of
  `tokens` whose `flags` are true."""
  hidden = excluded(tf.range(tf.shape(logits)[-1]), tokens, flags)
  return tf.reduce_logsumexp(
      tf.where(hidden, tf.constant(-float("inf"), logits.dtype), logits),
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
