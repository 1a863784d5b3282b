"""Beam search and greedy search over a fixed-size decoding cache.

Both searches take a generic one-step function

    decode_step(ids int32 [n], step int32 scalar, cache)
        -> (logits float [n, V], cache)

and its initial cache (a nest of tensors whose first dimension is the batch),
so they work for the Transformer (`model.prepare_decoding(inputs)`) and
for hand-written test functions alike. Beam search tiles every cache leaf
to the beams and reorders it with them, except those under a dict key
"per_batch" (at any depth): a step function that keeps state per batch
element, shared by its beams, keeps it there (the Transformer's growing
self-attention caches). At step 0 `ids` is 0 (the start symbol);
at step i > 0 it is the token chosen at position i - 1.

Everything runs in one `tf.while_loop` with TensorFlow core ops only
(sequences live in [.., max_decode_length] buffers written in place), so the
searches can be put in a SavedModel. A cache leaf may grow along a dimension
that is empty (size 0) in the initial cache, e.g. keys and values appended
one position per step; with a cache of fixed shapes the searches also
compile with XLA (`tf.function(jit_compile=True)`).

Output sequences end with EOS (included) and are padded with 0 after it; a
hypothesis that reached its length limit without EOS is returned as it is.

Lengths: `max_decode_length` (int or int32 scalar; static under XLA) sizes
the buffers; optional `max_lengths` int32 [batch] (each <= max_decode_length)
limits each batch element on its own, so that an output does not depend on
which other inputs share its batch.
"""
import tensorflow as tf

from t2tlite.decode.vocab_top_k import excluded, log_normalizer_and_top_k
from t2tlite.ids import EOS_ID

# The score of a hypothesis (or token) that must never be chosen: a finite
# "minus infinity", so that score arithmetic never meets inf - inf = nan.
# It is much smaller in magnitude than attention's MASK_BIAS because scores
# are sums: at 1e7 float32 values are spaced 1 apart (64 apart at 1e9), so
# an impossible score plus a log-probability still keeps that log-probability
# to the nearest unit.
IMPOSSIBLE_LOG_PROB = -1e7


def length_penalty(length, alpha):
  """GNMT length penalty ((5 + length) / 6) ** alpha (Wu et al., 2016).

  Args:
    length: int or float tensor, output tokens counted with the final EOS.
    alpha: float >= 0; 0 disables the penalty.
  Returns:
    float32 tensor shaped like `length`.
  """
  return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


def _batch_size(cache):
  return tf.shape(tf.nest.flatten(cache)[0])[0]


def _limits(max_lengths, batch, max_decode_length):
  """int32 [batch]: each element's length limit."""
  if max_lengths is None:
    return tf.fill([batch], tf.cast(max_decode_length, tf.int32))
  return tf.minimum(tf.cast(max_lengths, tf.int32), max_decode_length)


def _write_position(buffer, step, tokens):
  """buffer int32 [..., max_len] with `tokens` [...] written at `step`."""
  at_step = tf.equal(tf.range(tf.shape(buffer)[-1]), step)
  return tf.where(at_step, tokens[..., tf.newaxis], buffer)


def _previous_tokens(seqs, step):
  """int32 [...]: the token at position step - 1 of seqs [..., max_len], or 0
  (the start symbol) at step 0."""
  last = tf.gather(seqs, tf.maximum(step - 1, 0), axis=-1)
  return tf.where(step > 0, last, tf.zeros_like(last))


def _loop(cond, body, state, cache):
  """tf.while_loop over (*state, cache) that lets cache leaves grow along
  their initially empty dimensions."""
  def invariant(x):
    return tf.TensorShape([None if size == 0 else size
                           for size in x.shape.as_list()])

  shapes = (*[tf.TensorShape(x.shape) for x in state],
            tf.nest.map_structure(invariant, cache))
  return tf.while_loop(cond, body, (*state, cache), shape_invariants=shapes)


def _per_element(flags, rank):
  """bool [batch] reshaped to [batch, 1, ...] of the given rank."""
  return tf.reshape(flags, [-1] + [1] * (rank - 1))


def _gather_beams(x, indices):
  """x [batch, k, ...], indices int32 [batch, k'] -> [batch, k', ...]."""
  return tf.gather(x, indices, batch_dims=1)


PER_BATCH = "per_batch"


def _map_rows(fn, cache):
  """fn applied to every cache leaf but those under a PER_BATCH key.
  (tf.nest has no public map with paths, so the nest is walked here.)"""
  if isinstance(cache, dict):
    return {key: value if key == PER_BATCH else _map_rows(fn, value)
            for key, value in cache.items()}
  if isinstance(cache, (list, tuple)):
    return type(cache)(_map_rows(fn, value) for value in cache)
  return fn(cache)


def _gather_cache(cache, indices, beam_size):
  """Reorders cache leaves [batch * beam, ...] by indices [batch, beam]."""
  batch = tf.shape(indices)[0]
  flat = tf.reshape(indices + beam_size * tf.range(batch)[:, tf.newaxis], [-1])
  return _map_rows(lambda x: tf.gather(x, flat), cache)


def _exclusions(excluded_id, eos_id, min_length, step):
  """(excluded_ids, excluding) for `log_normalizer_and_top_k` at `step`:
  `excluded_id` always, EOS while step < min_length."""
  tokens, flags = [], []
  if excluded_id is not None:
    tokens.append(excluded_id)
    flags.append(tf.constant(True))
  if min_length:
    tokens.append(eos_id)
    flags.append(step < min_length)
  return tuple(tokens), (tf.stack(flags) if tokens else None)


def _without_repeats(logits, seqs, step, n):
  """`logits` for position `step` with every token that would complete an
  n-gram already in its sequence set to IMPOSSIBLE_LOG_PROB (decode hparam
  no_repeat_ngram_size, as fairseq's --no-repeat-ngram-size).

  Args:
    logits: float32 [rows, vocab].
    seqs: int32 [rows, max_len], the tokens of positions < step written.
    step: int32 scalar.
    n: int >= 1 (Python): the n-gram size.
  Returns:
    float32 [rows, vocab].
  """
  rows, max_len = tf.shape(seqs)[0], tf.shape(seqs)[1]
  # Window j: a prefix at j .. j + n - 2, then a token; none when n is
  # longer than the buffer. Ops, not a loop over n: the graph's size does
  # not grow with n (a decode hparam a server's request may set).
  starts = tf.range(tf.maximum(max_len - n + 1, 0))
  offsets = tf.range(tf.minimum(n - 1, max_len))
  prefixes = tf.gather(seqs, starts[:, tf.newaxis] + offsets, axis=1)
  current = tf.gather(seqs, tf.maximum(step - n + 1 + offsets, 0), axis=1)
  # Window j matches if its prefix is the n - 1 tokens before `step` and its
  # token was written (j + n - 1 < step): that token is banned.
  match = (tf.reduce_all(tf.equal(prefixes, current[:, tf.newaxis]), axis=-1)
           & (starts < step - n + 1))
  banned = tf.gather(seqs, starts + n - 1, axis=1)
  row_ids = tf.broadcast_to(tf.range(rows)[:, tf.newaxis], tf.shape(banned))
  indices = tf.stack([row_ids, tf.where(match, banned, 0)], axis=-1)
  # A min with +inf leaves the windows that do not match as they were.
  updates = tf.where(match, IMPOSSIBLE_LOG_PROB, float("inf"))
  return tf.tensor_scatter_nd_min(logits, tf.reshape(indices, [-1, 2]),
                                  tf.reshape(updates, [-1]))


def _best_extensions(logits, alive_log_probs, n, excluded_ids=(),
                     excluding=None):
  """The n most probable one-token extensions of the live hypotheses.

  A beam's own n best tokens hold every one of the n best extensions that go
  through it, so only k * n candidates are ranked, not k * V.

  Args:
    logits: [batch * k, V] next-token logits, hypothesis j of batch element b
      in row b * k + j.
    alive_log_probs: float32 [batch, k] (k static).
    n: int, extensions kept.
    excluded_ids, excluding: tokens left out of the choice and of the
      distribution (`log_normalizer_and_top_k`).
  Returns:
    (log_probs float32 [batch, n] in descending order, beams int32 [batch, n],
    tokens int32 [batch, n]). Ties go to the lower beam, then to the lower
    token: the order of a top_k over all k * V extensions.
  """
  batch, k = tf.shape(alive_log_probs)[0], alive_log_probs.shape[1]
  vocab = logits.shape[-1]
  per_beam = n if vocab is None else min(
      n, vocab - len(excluded_ids))  # a tiny vocabulary
  log_z, values, tokens = log_normalizer_and_top_k(
      tf.cast(logits, tf.float32), per_beam, excluded_ids, excluding)
  scores = alive_log_probs[:, :, tf.newaxis] + tf.reshape(
      values - log_z[:, tf.newaxis], [batch, k, per_beam])
  best_scores, best = tf.math.top_k(
      tf.reshape(scores, [batch, k * per_beam]), k=n)
  tokens = tf.gather(tf.reshape(tokens, [batch, k * per_beam]), best,
                     batch_dims=1)
  return best_scores, best // per_beam, tokens


def greedy_search(decode_step, initial_cache, max_decode_length,
                  eos_id=EOS_ID, max_lengths=None, pick=None,
                  excluded_id=None, min_length=0, no_repeat_ngram_size=0):
  """Picks the most probable token at every step until EOS (or, with
  `pick`, the token `pick` chooses: sampling).

  Args:
    decode_step: callable(ids int32 [batch], step, cache) -> (logits [batch, V],
      cache).
    initial_cache: nest of tensors [batch, ...].
    max_decode_length: int or int32 scalar tensor, most tokens per output.
    eos_id: the end-of-sequence id.
    max_lengths: optional int32 [batch], per-element limits.
    pick: None (the most probable token), or callable(logits float32
      [batch, V], step int32 scalar) -> int32 [batch] the tokens written
      (`t2tlite.decode.sampling`).
    excluded_id: None, or a token id never chosen and left out of the
      distribution, as if its logit were -inf (with `pick`, which draws
      from the logits, it is masked in them by IMPOSSIBLE_LOG_PROB).
    min_length: EOS is left out the same way at steps < min_length, so
      outputs hold at least min_length tokens before EOS (or end at their
      limit).
    no_repeat_ngram_size: n > 0: no output holds an n-gram twice (tokens
      that would repeat one are impossible, sampled or not); 0: off.
  Returns:
    (ids int32 [batch, max_decode_length], scores float32 [batch]: the sum of
    the chosen tokens' log-probabilities).
  """
  batch = _batch_size(initial_cache)
  limits = _limits(max_lengths, batch, max_decode_length)
  seqs = tf.zeros([batch, max_decode_length], tf.int32)
  finished = tf.zeros([batch], tf.bool)
  scores = tf.zeros([batch], tf.float32)

  def cond(step, seqs, finished, scores, cache):
    return tf.logical_and(step < max_decode_length,
                          tf.logical_not(tf.reduce_all(finished)))

  def body(step, seqs, finished, scores, cache):
    finished |= step >= limits
    logits, cache = decode_step(_previous_tokens(seqs, step), step, cache)
    logits = tf.cast(logits, tf.float32)
    left_out, flags = _exclusions(excluded_id, eos_id, min_length, step)
    if pick is not None and left_out:
      hidden = excluded(tf.range(tf.shape(logits)[-1]), left_out, flags)
      logits += IMPOSSIBLE_LOG_PROB * tf.cast(hidden, logits.dtype)
    if no_repeat_ngram_size:
      logits = _without_repeats(logits, seqs, step, no_repeat_ngram_size)
    if pick is None:
      log_z, best, best_ids = log_normalizer_and_top_k(logits, 1, left_out,
                                                       flags)
      chosen, chosen_logits = best_ids[:, 0], best[:, 0]
    else:
      log_z = tf.reduce_logsumexp(logits, axis=-1)
      chosen = pick(logits, step)
      chosen_logits = tf.gather(logits, chosen, batch_dims=1)
    tokens = tf.where(finished, tf.zeros_like(chosen), chosen)
    token_scores = chosen_logits - log_z
    scores += tf.where(finished, tf.zeros_like(token_scores), token_scores)
    seqs = _write_position(seqs, step, tokens)
    return step + 1, seqs, finished | tf.equal(tokens, eos_id), scores, cache

  _, seqs, _, scores, _ = _loop(
      cond, body, (tf.constant(0), seqs, finished, scores), initial_cache)
  return seqs, scores


def beam_search(decode_step, initial_cache, beam_size, max_decode_length,
                alpha=0.6, eos_id=EOS_ID, return_beams=False,
                max_lengths=None, excluded_id=None, min_length=0,
                no_repeat_ngram_size=0):
  """Beam search with the GNMT length penalty and early termination.

  At each step the `beam_size` best extensions (by log-probability) of the live
  hypotheses form the new beam; those ending in EOS move to the finished set,
  scored log P / length_penalty(length with EOS), and the live set is refilled
  with the best extensions that do not end in EOS (of the best 2 * beam_size,
  which always hold enough). So beam_size=1 with alpha=0 is greedy search.

  A batch element stops at its length limit, or earlier once none of its
  live hypotheses can beat its finished ones: a live hypothesis can at best
  keep its log-probability (adding tokens only lowers it) and reach the
  largest penalty, so its bound is log P / length_penalty(limit) (alpha >= 0).
  The bound is compared with the best finished score or, with `return_beams`,
  with the worst of a full set of `beam_size` finished ones, so that the
  whole n-best list is exact. The loop ends when every element has stopped.

  Args:
    decode_step: callable(ids int32 [batch * beam], step, cache) ->
      (logits [batch * beam, V], cache); hypothesis j of batch element b is row
      b * beam_size + j.
    initial_cache: nest of tensors [batch, ...] (tiled to the beams here).
    beam_size: int, hypotheses kept per batch element.
    max_decode_length: int or int32 scalar tensor, most tokens per output.
    alpha: float >= 0, the length-penalty exponent.
    eos_id: the end-of-sequence id.
    return_beams: return every beam (n-best, best first), not only the best.
    max_lengths: optional int32 [batch], per-element limits.
    excluded_id: None, or a token id never chosen and left out of the
      distribution, as if its logit were -inf (the padding id: cheaper
      than masking every step's logits).
    min_length: EOS is left out the same way at steps < min_length, so
      finished hypotheses hold at least min_length tokens before EOS.
    no_repeat_ngram_size: n > 0: no hypothesis holds an n-gram twice; 0:
      off.
  Returns:
    (ids int32 [batch, max_decode_length], scores float32 [batch]), or with
    return_beams (ids [batch, beam_size, max_decode_length], scores
    [batch, beam_size]). Scores are length-penalised log-probabilities.
    Elements that finished fewer than beam_size hypotheses fill the rest with
    live ones cut at their limit, scored with that length's penalty and
    ranked after the finished ones.
  """
  if alpha < 0:
    raise ValueError(f"alpha={alpha}: the length penalty exponent must be >= 0 "
                     "(the early-termination bound assumes it)")
  k = beam_size
  batch = _batch_size(initial_cache)
  cache = _map_rows(lambda x: tf.repeat(x, k, axis=0), initial_cache)
  seqs = tf.zeros([batch, k, max_decode_length], tf.int32)
  # All beams start identical; only the first may be extended at step 0.
  alive_log_probs = tf.tile(
      tf.concat([[0.0], tf.fill([k - 1], IMPOSSIBLE_LOG_PROB)], 0)[tf.newaxis],
      [batch, 1])
  finished_scores = tf.fill([batch, k], IMPOSSIBLE_LOG_PROB)
  finished_flags = tf.zeros([batch, k], tf.bool)
  limits = _limits(max_lengths, batch, max_decode_length)
  max_penalty = length_penalty(limits, alpha)

  def cond(step, alive_seqs, alive_log_probs, finished_seqs, finished_scores,
           finished_flags, cache):
    best_possible = alive_log_probs[:, 0] / max_penalty
    if return_beams:
      complete = tf.reduce_all(finished_flags, axis=1)
      reference = finished_scores[:, -1]
    else:
      complete = finished_flags[:, 0]
      reference = finished_scores[:, 0]
    done = tf.logical_and(complete, reference >= best_possible) | (
        step >= limits)
    return tf.logical_and(step < max_decode_length,
                          tf.logical_not(tf.reduce_all(done)))

  def body(step, alive_seqs, alive_log_probs, finished_seqs, finished_scores,
           finished_flags, cache):
    old = (alive_seqs, alive_log_probs, finished_seqs, finished_scores,
           finished_flags)
    ids = tf.reshape(_previous_tokens(alive_seqs, step), [-1])
    logits, cache = decode_step(ids, step, cache)
    if no_repeat_ngram_size:
      logits = _without_repeats(
          tf.cast(logits, tf.float32),
          tf.reshape(alive_seqs, [-1, tf.shape(alive_seqs)[-1]]), step,
          no_repeat_ngram_size)
    # 2k candidates: at most k end in EOS (one per beam), so at least k live.
    top_log_probs, top_beams, top_tokens = _best_extensions(
        logits, alive_log_probs, 2 * k,
        *_exclusions(excluded_id, eos_id, min_length, step))
    top_seqs = _write_position(_gather_beams(alive_seqs, top_beams), step,
                               top_tokens)
    is_eos = tf.equal(top_tokens, eos_id)

    # Live set: the k best candidates not ending in EOS.
    _, live = tf.math.top_k(
        tf.where(is_eos, IMPOSSIBLE_LOG_PROB, top_log_probs), k=k)
    alive_seqs = _gather_beams(top_seqs, live)
    alive_log_probs = _gather_beams(top_log_probs, live)
    cache = _gather_cache(cache, _gather_beams(top_beams, live), k)

    # Finished set: EOS candidates within the best k (the beam proper) join
    # the finished ones; ties keep the earlier hypothesis (top_k is stable).
    in_beam = tf.range(2 * k) < k
    new_flags = (is_eos & in_beam[tf.newaxis] &
                 (top_log_probs > IMPOSSIBLE_LOG_PROB / 2))
    new_scores = tf.where(new_flags,
                          top_log_probs / length_penalty(step + 1, alpha),
                          IMPOSSIBLE_LOG_PROB)
    finished_scores, best = tf.math.top_k(
        tf.concat([finished_scores, new_scores], 1), k=k)
    finished_seqs = _gather_beams(tf.concat([finished_seqs, top_seqs], 1),
                                  best)
    finished_flags = _gather_beams(tf.concat([finished_flags, new_flags], 1),
                                   best)
    # Elements past their limit keep their state (their cache rows go on
    # being computed and reordered, unused: shapes stay fixed).
    new = (alive_seqs, alive_log_probs, finished_seqs, finished_scores,
           finished_flags)
    active = step < limits
    kept = tf.nest.map_structure(
        lambda n, o: tf.where(_per_element(active, n.shape.rank), n, o), new,
        old)
    return (step + 1, *kept, cache)

  _, alive_seqs, alive_log_probs, finished_seqs, finished_scores, (
      finished_flags), _ = _loop(
          cond, body, (tf.constant(0), seqs, alive_log_probs, seqs,
                       finished_scores, finished_flags), cache)

  # Finished hypotheses first (they are sorted, flagged ones in front), then
  # live ones to fill the slots of elements that finished fewer than k.
  num_finished = tf.reduce_sum(tf.cast(finished_flags, tf.int32), axis=1)
  slots = tf.range(k)[tf.newaxis]
  take = tf.where(slots < num_finished[:, tf.newaxis], slots,
                  k + slots - num_finished[:, tf.newaxis])
  # Live hypotheses are only returned when cut at their element's limit.
  alive_scores = alive_log_probs / max_penalty[:, tf.newaxis]
  ids = _gather_beams(tf.concat([finished_seqs, alive_seqs], 1), take)
  scores = _gather_beams(tf.concat([finished_scores, alive_scores], 1), take)
  if return_beams:
    return ids, scores
  return ids[:, 0], scores[:, 0]
