"""Beam search (`BeamSearcher`, `beam_search`) in the one search loop
(`loop.search`: limits, buffers, the stop test, freezing, dropping the
elements that have stopped), with the GNMT length penalty and early
termination. `greedy_search` (`greedy`) is importable from here too.

The step function, cache and drop_finished are `loop`'s: the cache is
tiled to the beams and reordered with them, except its "per_batch"
leaves, shared by an element's beams. Output sequences end with EOS
(included), 0-padded; a hypothesis that reached its length limit without
EOS is returned as it is. What a step may choose comes from
`step_rules.StepRules`; the settings arrive whole (`strategy.Beam`).
"""
import tensorflow as tf

from t2tlite.decode import loop
from t2tlite.decode.greedy import greedy_search  # noqa: F401 (one import)
from t2tlite.decode.loop import gather_beams as _gather_beams
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

  With `drop_finished` (`loop.search`), an element that has stopped leaves
  the search. Its outputs are those it gets staying (nothing it could
  still find may enter its results), its scores too to float32 rounding
  (the rows left are computed in smaller matmuls).

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
  return loop.search(decode_step, initial_cache, BeamSearcher(beam),
                     max_decode_length, rules, max_lengths, drop_finished)


class BeamSearcher(loop.Searcher):
  """Beam search's step (`beam_search`), k = beam.size rows an element.

  Hypotheses: alive_seqs, finished_seqs int32 [elements, k, max_len];
  alive_log_probs, finished_scores float32 [elements, k]; finished_flags
  bool [elements, k]; max_penalty float32 [elements], the penalty at the
  element's limit (its early-termination bound).
  """

  def __init__(self, beam):
    if beam.alpha < 0:
      raise ValueError(f"alpha={beam.alpha}: the length penalty exponent "
                       "must be >= 0 (the early-termination bound assumes "
                       "it)")
    self.beam = beam
    self.rows_per_element = beam.size

  def initial(self, limits, max_decode_length):
    k, batch = self.beam.size, tf.shape(limits)[0]
    seqs = tf.zeros([batch, k, max_decode_length], tf.int32)
    # All beams start identical; only the first may be extended at step 0.
    return {
        "alive_seqs": seqs,
        "alive_log_probs": tf.tile(
            tf.concat([[0.0], tf.fill([k - 1], IMPOSSIBLE_LOG_PROB)],
                      0)[tf.newaxis], [batch, 1]),
        "finished_seqs": seqs,
        "finished_scores": tf.fill([batch, k], IMPOSSIBLE_LOG_PROB),
        "finished_flags": tf.zeros([batch, k], tf.bool),
        "max_penalty": length_penalty(limits, self.beam.alpha)}

  def previous_tokens(self, hypotheses, step):
    return tf.reshape(loop.previous_tokens(hypotheses["alive_seqs"], step),
                      [-1])

  def stopped(self, hypotheses, step):
    """No live hypothesis can beat the finished ones: one at best keeps its
    log-probability and reaches the largest penalty. Compared with the
    best finished score or, with return_beams, the worst of a full set of
    k, so that the whole n-best list is exact."""
    best_possible = (hypotheses["alive_log_probs"][:, 0] /
                     hypotheses["max_penalty"])
    if self.beam.return_beams:
      complete = tf.reduce_all(hypotheses["finished_flags"], axis=1)
      reference = hypotheses["finished_scores"][:, -1]
    else:
      complete = hypotheses["finished_flags"][:, 0]
      reference = hypotheses["finished_scores"][:, 0]
    return tf.logical_and(complete, reference >= best_possible)

  def step(self, logits, hypotheses, step, rules, row_tensors):
    k, alpha = self.beam.size, self.beam.alpha
    old = hypotheses
    alive_seqs, alive_log_probs = old["alive_seqs"], old["alive_log_probs"]
    # 2k candidates: at most k end in EOS (one per beam), so at least k live.
    # The rows' sequences only where a rule reads them (no extra op else).
    rows_seqs = (tf.reshape(alive_seqs, [-1, tf.shape(alive_seqs)[-1]])
                 if rules.no_repeat_ngram_size else None)
    log_probs, tokens = rules.top_candidates(logits, rows_seqs, step, 2 * k)
    top_log_probs, top_beams, top_tokens = _best_extensions(
        log_probs, tokens, alive_log_probs, 2 * k)
    top_seqs = loop.write_position(_gather_beams(alive_seqs, top_beams),
                                   step, top_tokens)
    is_eos = tf.equal(top_tokens, EOS_ID)

    # Live set: the k best candidates not ending in EOS.
    _, live = tf.math.top_k(
        tf.where(is_eos, IMPOSSIBLE_LOG_PROB, top_log_probs), k=k)
    alive_seqs = _gather_beams(top_seqs, live)
    alive_log_probs = _gather_beams(top_log_probs, live)

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
    return {"alive_seqs": alive_seqs, "alive_log_probs": alive_log_probs,
            "finished_seqs": finished_seqs,
            "finished_scores": finished_scores,
            "finished_flags": finished_flags,
            "max_penalty": old["max_penalty"]}, _gather_beams(top_beams, live)

  def finalize(self, hypotheses):
    """Finished hypotheses first (sorted, flagged ones in front), then live
    ones, cut at their element's limit, to fill the slots of elements that
    finished fewer than k."""
    hyps, k = hypotheses, self.beam.size
    num_finished = tf.reduce_sum(tf.cast(hyps["finished_flags"], tf.int32),
                                 axis=1)
    slots = tf.range(k)[tf.newaxis]
    take = tf.where(slots < num_finished[:, tf.newaxis], slots,
                    k + slots - num_finished[:, tf.newaxis])
    alive_scores = (hyps["alive_log_probs"] /
                    hyps["max_penalty"][:, tf.newaxis])
    ids = _gather_beams(
        tf.concat([hyps["finished_seqs"], hyps["alive_seqs"]], 1), take)
    scores = _gather_beams(
        tf.concat([hyps["finished_scores"], alive_scores], 1), take)
    if self.beam.return_beams:
      return ids, scores
    return ids[:, 0], scores[:, 0]
