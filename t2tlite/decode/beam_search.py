"""Beam search and greedy search over a fixed-size decoding cache.

Both searches take a generic one-step function

    decode_step(ids int32 [n], step int32 scalar, cache)
        -> (logits float [n, V], cache)

and its initial cache (a nest of tensors whose first dimension is the batch),
so they work for the Transformer (`model.prepare_decoding(inputs)`) and
for hand-written test functions alike. Beam search tiles every cache leaf
to the beams and reorders it with them, except those under a dict key
"per_batch" (at any depth): a step function that keeps state per batch
element, shared by its beams, keeps it there (the Transformer's encoded
inputs and growing self-attention caches). At step 0 `ids` is 0 (the start
symbol); at step i > 0 it is the token chosen at position i - 1.

Beam search can drop the batch elements that have stopped (`drop_finished`,
what `search.decode` asks in graph mode): their rows leave the cache, the
"per_batch" leaves by element, the others by row, so a step function must
hold everything it reads per element or row in its cache.

Everything runs in `tf.while_loop`s with TensorFlow core ops only
(sequences live in [.., max_decode_length] buffers written in place), so the
searches can be put in a SavedModel. A cache leaf may grow along a dimension
that is empty (size 0) in the initial cache, e.g. keys and values appended
one position per step; with a cache of fixed shapes the searches also
compile with XLA (`tf.function(jit_compile=True)`).

Output sequences end with EOS (included) and are padded with 0 after it; a
hypothesis that reached its length limit without EOS is returned as it is.

What a step may choose (exclusions, min_length, no-repeat n-grams, target
prefixes) and the log-normalizer come from one place, `step_rules.StepRules`,
which both searches call; their settings arrive whole (`strategy.Beam`,
`StepRules`), never as defaults of their own.

Lengths: `max_decode_length` (int or int32 scalar; static under XLA) sizes
the buffers; optional `max_lengths` int32 [batch] (each <= max_decode_length)
limits each batch element on its own, so that an output does not depend on
which other inputs share its batch.
"""
import tensorflow as tf

from t2tlite.decode.step_rules import IMPOSSIBLE_LOG_PROB
from t2tlite.ids import EOS_ID


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


def _loop(cond, body, loop_vars, batch_varies=False):
  """tf.while_loop over `loop_vars` (a nest) that lets tensors grow along
  their initially empty dimensions (cache leaves: keys and values appended
  one position per step) and, with batch_varies, change their first
  dimension (a search dropping elements)."""
  def invariant(x):
    dims = [None if size == 0 else size for size in x.shape.as_list()]
    if batch_varies and dims:
      dims[0] = None
    return tf.TensorShape(dims)

  return tf.while_loop(cond, body, loop_vars,
                       shape_invariants=tf.nest.map_structure(invariant,
                                                              loop_vars))


def _per_element(flags, rank):
  """bool [batch] reshaped to [batch, 1, ...] of the given rank."""
  return tf.reshape(flags, [-1] + [1] * (rank - 1))


def _gather_beams(x, indices):
  """x [batch, k, ...], indices int32 [batch, k'] -> [batch, k', ...]."""
  return tf.gather(x, indices, batch_dims=1)


PER_BATCH = "per_batch"


def _map_rows(fn, cache, per_batch=None):
  """fn applied to every cache leaf but those under a PER_BATCH key, which
  are left as they are or, given per_batch, mapped by it.
  (tf.nest has no public map with paths, so the nest is walked here.)"""
  if isinstance(cache, dict):
    return {key: (_per_batch_leaves(per_batch, value) if key == PER_BATCH
                  else _map_rows(fn, value, per_batch))
            for key, value in cache.items()}
  if isinstance(cache, (list, tuple)):
    return type(cache)(_map_rows(fn, value, per_batch) for value in cache)
  return fn(cache)


def _per_batch_leaves(fn, value):
  return value if fn is None else tf.nest.map_structure(fn, value)


def _gather_cache(cache, indices, beam_size):
  """Reorders cache leaves [batch * beam, ...] by indices [batch, beam]."""
  batch = tf.shape(indices)[0]
  flat = tf.reshape(indices + beam_size * tf.range(batch)[:, tf.newaxis], [-1])
  return _map_rows(lambda x: tf.gather(x, flat), cache)


def _best_extensions(log_probs, tokens, alive_log_probs, n):
  """The n most probable one-token extensions of the live hypotheses.

  A beam's own n best tokens hold every one of the n best extensions that go
  through it, so only k * n candidates are ranked, not k * V.

  Args:
    log_probs, tokens: float32 and int32 [batch * k, per_beam], each
      hypothesis' best next tokens (`StepRules.top_candidates`),
      hypothesis j of batch element b in row b * k + j.
    alive_log_probs: float32 [batch, k] (k static).
    n: int, extensions kept.
  Returns:
    (log_probs float32 [batch, n] in descending order, beams int32 [batch, n],
    tokens int32 [batch, n]). Ties go to the lower beam, then to the lower
    token: the order of a top_k over all k * V extensions.
  """
  batch, k = tf.shape(alive_log_probs)[0], alive_log_probs.shape[1]
  per_beam = tokens.shape[-1]
  scores = alive_log_probs[:, :, tf.newaxis] + tf.reshape(
      log_probs, [batch, k, per_beam])
  best_scores, best = tf.math.top_k(
      tf.reshape(scores, [batch, k * per_beam]), k=n)
  tokens = tf.gather(tf.reshape(tokens, [batch, k * per_beam]), best,
                     batch_dims=1)
  return best_scores, best // per_beam, tokens


def greedy_search(decode_step, initial_cache, max_decode_length, rules,
                  max_lengths=None, pick=None):
  """Picks the most probable token at every step until EOS (or, with
  `pick`, the token `pick` chooses: sampling).

  Args:
    decode_step: callable(ids int32 [batch], step, cache) -> (logits [batch, V],
      cache).
    initial_cache: nest of tensors [batch, ...].
    max_decode_length: int or int32 scalar tensor, most tokens per output.
    rules: a `step_rules.StepRules` over the batch's rows (exclusions,
      min_length, no-repeat n-grams, prefixes; `step_rules.NO_RULES`).
    max_lengths: None, or int32 [batch] per-element limits.
    pick: None (the most probable token), or callable(logits float32
      [batch, V], step int32 scalar) -> int32 [batch] the tokens written
      (`t2tlite.decode.sampling`).
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
    if pick is None:
      log_probs, tokens = rules.top_candidates(logits, seqs, step, 1)
      token_scores, chosen = log_probs[:, 0], tokens[:, 0]
    else:
      token_scores, chosen = rules.picked(logits, seqs, step, pick)
    tokens = tf.where(finished, tf.zeros_like(chosen), chosen)
    scores += tf.where(finished, tf.zeros_like(token_scores), token_scores)
    seqs = _write_position(seqs, step, tokens)
    return step + 1, seqs, finished | tf.equal(tokens, EOS_ID), scores, cache

  _, seqs, _, scores, _ = _loop(
      cond, body, (tf.constant(0), seqs, finished, scores, initial_cache))
  return seqs, scores


def beam_search(decode_step, initial_cache, beam, max_decode_length, rules,
                max_lengths=None, drop_finished=False):
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

  With `drop_finished`, an element that has stopped leaves the search: its
  hypotheses are set aside and its rows of the cache are dropped, so later
  steps compute only the elements still searching (as CTranslate2 does); a
  batch then costs about the sum of its outputs' lengths rather than its
  longest one times its size. Its outputs are those it gets staying
  (nothing it could still find may enter its results), its scores too to
  float32 rounding (the rows left are computed in smaller matmuls). The
  shapes change during the loop: not under XLA.

  Args:
    decode_step: callable(ids int32 [batch * beam], step, cache) ->
      (logits [batch * beam, V], cache); hypothesis j of batch element b is row
      b * beam_size + j. With drop_finished, everything it holds per batch
      element or row must be in the cache (the batch shrinks).
    initial_cache: nest of tensors [batch, ...] (tiled to the beams here).
    beam: a `strategy.Beam`: size (hypotheses kept per batch element),
      alpha (the length-penalty exponent, >= 0) and return_beams (every
      beam, n-best and best first, not only the best).
    max_decode_length: int or int32 scalar tensor, most tokens per output.
    rules: a `step_rules.StepRules` over the batch's rows (tiled to the
      beams here; `step_rules.NO_RULES`).
    max_lengths: None, or int32 [batch] per-element limits.
    drop_finished: bool (Python): drop the elements that have stopped.
  Returns:
    (ids int32 [batch, max_decode_length], scores float32 [batch]), or with
    return_beams (ids [batch, beam_size, max_decode_length], scores
    [batch, beam_size]). Scores are length-penalised log-probabilities.
    Elements that finished fewer than beam_size hypotheses fill the rest with
    live ones cut at their limit, scored with that length's penalty and
    ranked after the finished ones.
  """
  alpha, return_beams = beam.alpha, beam.return_beams
  if alpha < 0:
    raise ValueError(f"alpha={alpha}: the length penalty exponent must be >= 0 "
                     "(the early-termination bound assumes it)")
  k = beam.size
  batch = _batch_size(initial_cache)
  seqs = tf.zeros([batch, k, max_decode_length], tf.int32)
  limits = _limits(max_lengths, batch, max_decode_length)
  max_penalty = length_penalty(limits, alpha)
  # All beams start identical; only the first may be extended at step 0.
  hypotheses = {
      "alive_seqs": seqs,
      "alive_log_probs": tf.tile(
          tf.concat([[0.0], tf.fill([k - 1], IMPOSSIBLE_LOG_PROB)],
                    0)[tf.newaxis], [batch, 1]),
      "finished_seqs": seqs,
      "finished_scores": tf.fill([batch, k], IMPOSSIBLE_LOG_PROB),
      "finished_flags": tf.zeros([batch, k], tf.bool)}
  # What the loop carries of each element: its hypotheses, its rows (the
  # cache and the rules' row tensors, tiled to the beams), its limit, its
  # penalty bound and its index in the batch.
  rows = {"cache": _map_rows(lambda x: tf.repeat(x, k, axis=0),
                             initial_cache),
          "rules": rules.repeated(k).row_tensors()}
  state = {"hypotheses": hypotheses, "rows": rows,
           "elements": {"limit": limits, "max_penalty": max_penalty,
                        "index": tf.range(batch)}}
  if drop_finished:
    # The hypotheses of the elements that have left, by batch index.
    state["results"] = hypotheses

  def stopped(state, step):
    """bool [elements]: the elements that have stopped searching."""
    hyps, own = state["hypotheses"], state["elements"]
    best_possible = hyps["alive_log_probs"][:, 0] / own["max_penalty"]
    if return_beams:
      complete = tf.reduce_all(hyps["finished_flags"], axis=1)
      reference = hyps["finished_scores"][:, -1]
    else:
      complete = hyps["finished_flags"][:, 0]
      reference = hyps["finished_scores"][:, 0]
    return tf.logical_and(complete, reference >= best_possible) | (
        step >= own["limit"])

  def searching(reduce):
    """A loop condition: a step is left and not `reduce` (tf.reduce_all:
    some element still searches; tf.reduce_any: every element does)."""
    return lambda step, state: tf.logical_and(
        step < max_decode_length,
        tf.logical_not(reduce(stopped(state, step))))

  def body(step, state):
    old = state["hypotheses"]
    alive_seqs, alive_log_probs = old["alive_seqs"], old["alive_log_probs"]
    step_rules = rules.with_row_tensors(state["rows"]["rules"])
    ids = tf.reshape(_previous_tokens(alive_seqs, step), [-1])
    logits, cache = decode_step(ids, step, state["rows"]["cache"])
    # 2k candidates: at most k end in EOS (one per beam), so at least k live.
    # The rows' sequences only where a rule reads them (no extra op else).
    rows_seqs = (tf.reshape(alive_seqs, [-1, tf.shape(alive_seqs)[-1]])
                 if step_rules.no_repeat_ngram_size else None)
    log_probs, tokens = step_rules.top_candidates(logits, rows_seqs, step,
                                                  2 * k)
    top_log_probs, top_beams, top_tokens = _best_extensions(
        log_probs, tokens, alive_log_probs, 2 * k)
    top_seqs = _write_position(_gather_beams(alive_seqs, top_beams), step,
                               top_tokens)
    is_eos = tf.equal(top_tokens, EOS_ID)

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
        tf.concat([old["finished_scores"], new_scores], 1), k=k)
    finished_seqs = _gather_beams(
        tf.concat([old["finished_seqs"], top_seqs], 1), best)
    finished_flags = _gather_beams(
        tf.concat([old["finished_flags"], new_flags], 1), best)
    new = {"alive_seqs": alive_seqs, "alive_log_probs": alive_log_probs,
           "finished_seqs": finished_seqs, "finished_scores": finished_scores,
           "finished_flags": finished_flags}
    if not drop_finished:
      # Elements past their limit keep their state (their cache rows go on
      # being computed and reordered, unused: shapes stay fixed). Dropped,
      # they have left before (`searching`).
      active = step < state["elements"]["limit"]
      new = tf.nest.map_structure(
          lambda n, o: tf.where(_per_element(active, n.shape.rank), n, o),
          new, old)
    rows = dict(state["rows"], cache=cache)
    return step + 1, dict(state, hypotheses=new, rows=rows)

  if drop_finished:
    # Phases: the stopped elements leave, then the others search until one
    # of them stops. The inner loop's steps cost what they cost without
    # dropping (no branch at every step).
    def phase(step, state):
      done = stopped(state, step)  # none at step 0, mostly
      state = tf.cond(tf.reduce_any(done),
                      lambda: _without_elements(state, done, k),
                      lambda: state)
      return _loop(searching(tf.reduce_any), body, (step, state),
                   batch_varies=True)

    _, state = _loop(searching(tf.reduce_all), phase,
                     (tf.constant(0), state), batch_varies=True)
  else:
    _, state = _loop(searching(tf.reduce_all), body,
                     (tf.constant(0), state))
  hyps = state["hypotheses"]
  if drop_finished:
    hyps = _set_aside(state["results"], state["elements"]["index"], hyps)

  # Finished hypotheses first (they are sorted, flagged ones in front), then
  # live ones to fill the slots of elements that finished fewer than k.
  num_finished = tf.reduce_sum(tf.cast(hyps["finished_flags"], tf.int32),
                               axis=1)
  slots = tf.range(k)[tf.newaxis]
  take = tf.where(slots < num_finished[:, tf.newaxis], slots,
                  k + slots - num_finished[:, tf.newaxis])
  # Live hypotheses are only returned when cut at their element's limit.
  alive_scores = hyps["alive_log_probs"] / max_penalty[:, tf.newaxis]
  ids = _gather_beams(
      tf.concat([hyps["finished_seqs"], hyps["alive_seqs"]], 1), take)
  scores = _gather_beams(
      tf.concat([hyps["finished_scores"], alive_scores], 1), take)
  if return_beams:
    return ids, scores
  return ids[:, 0], scores[:, 0]


def _set_aside(results, index, hypotheses):
  """`results` (hypotheses [batch, ...]) with rows `index` int32
  [elements] replaced by `hypotheses` [elements, ...]."""
  return tf.nest.map_structure(
      lambda all_, some: tf.tensor_scatter_nd_update(
          all_, index[:, tf.newaxis], some), results, hypotheses)


def _without_elements(state, done, k):
  """The loop state with the elements `done` (bool [elements]) set aside
  in state["results"] and their hypotheses, rows and cache dropped."""
  kept = tf.cast(tf.reshape(tf.where(~done), [-1]), tf.int32)
  kept_rows = tf.reshape(kept[:, tf.newaxis] * k + tf.range(k), [-1])
  results = _set_aside(state["results"], state["elements"]["index"],
                       state["hypotheses"])

  def take(indices):
    return lambda x: tf.gather(x, indices)

  return {
      "hypotheses": tf.nest.map_structure(take(kept), state["hypotheses"]),
      "elements": tf.nest.map_structure(take(kept), state["elements"]),
      "rows": {"cache": _map_rows(take(kept_rows), state["rows"]["cache"],
                                  per_batch=take(kept)),
               "rules": tf.nest.map_structure(take(kept_rows),
                                              state["rows"]["rules"])},
      "results": results}
