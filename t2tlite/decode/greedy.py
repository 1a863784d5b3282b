"""Greedy search, one row per element: at each step a token a row, the
most probable (`GreedySearcher`) or another choice (`next_token`
overridden: sampling), in `loop.search`.

    ids, scores = greedy_search(step, cache, length, rules)
"""
import tensorflow as tf

from t2tlite.decode import loop
from t2tlite.ids import EOS_ID


class GreedySearcher(loop.Searcher):
  """The most probable token at every step until EOS.

  Hypotheses: {"seqs": int32 [elements, max_len], "finished": bool
  [elements] (EOS written), "scores": float32 [elements], the sum of the
  chosen tokens' log-probabilities}.
  """

  def next_token(self, rules, logits, seqs, step, row_tensors):
    """(log_probs float32 [rows], tokens int32 [rows]): the token of each
    row, the rules applied (`StepRules.next_tokens`)."""
    log_probs, tokens = rules.top_candidates(logits, seqs, step, 1)
    return log_probs[:, 0], tokens[:, 0]

  def initial(self, limits, max_decode_length):
    batch = tf.shape(limits)[0]
    return {"seqs": tf.zeros([batch, max_decode_length], tf.int32),
            "finished": tf.zeros([batch], tf.bool),
            "scores": tf.zeros([batch], tf.float32)}

  def previous_tokens(self, hypotheses, step):
    return loop.previous_tokens(hypotheses["seqs"], step)

  def step(self, logits, hypotheses, step, rules, row_tensors):
    seqs = hypotheses["seqs"]
    token_scores, tokens = self.next_token(rules, logits, seqs, step,
                                           row_tensors)
    return {"seqs": loop.write_position(seqs, step, tokens),
            "finished": hypotheses["finished"] | tf.equal(tokens, EOS_ID),
            "scores": hypotheses["scores"] + token_scores}, None

  def stopped(self, hypotheses, step):
    return hypotheses["finished"]

  def finalize(self, hypotheses):
    return hypotheses["seqs"], hypotheses["scores"]


def greedy_search(decode_step, initial_cache, max_decode_length, rules,
                  max_lengths=None):
  """Picks the most probable token at every step until EOS.

  Args:
    decode_step: callable(ids int32 [batch], step, cache) -> (logits
      [batch, V], cache) (`loop`).
    initial_cache: nest of tensors [batch, ...].
    max_decode_length: int or int32 scalar tensor, most tokens per output.
    rules: a `step_rules.StepRules` over the batch's rows (exclusions,
      min_length, no-repeat n-grams, prefixes; `step_rules.NO_RULES`).
    max_lengths: None, or int32 [batch] per-element limits.
  Returns:
    (ids int32 [batch, max_decode_length], scores float32 [batch]: the sum
    of the chosen tokens' log-probabilities).
  """
  return loop.search(decode_step, initial_cache, GreedySearcher(),
                     max_decode_length, rules, max_lengths)
