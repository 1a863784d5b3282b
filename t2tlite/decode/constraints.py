"""Constrained decoding: a state machine over target ids that says, at every
step, which tokens may come next.

A problem supplies a `DecodeConstraint` (`Problem.decode_constraint`); greedy
and beam search then never choose a token the constraint forbids. The state
is a nest of tensors whose first dimension is the batch, so it lives in the
search's cache: beam search tiles it to the beams and reorders it with them,
and everything stays TensorFlow ops (it exports in a SavedModel and compiles
with XLA when its shapes are fixed).

    class NoRepeats(DecodeConstraint):      # a token never follows itself
      def initial_state(self, inputs, max_lengths):
        return tf.zeros_like(max_lengths)   # the previous token, 0 at start
      def advance(self, state, tokens):
        return tf.where(tokens == PAD_ID, state, tokens)
      def allowed(self, state, step, vocab_size):
        return tf.one_hot(state, vocab_size) == 0

Masked logits are set to IMPOSSIBLE_LOG_PROB, so the search renormalizes over
the allowed tokens (scores are log-probabilities of the constrained model).
A row for which nothing is allowed may only end (EOS): a constraint that
cannot be met within the length limit gives a short output, never a token
it forbids.
"""
import tensorflow as tf

from t2tlite.decode.step_rules import IMPOSSIBLE_LOG_PROB
from t2tlite.ids import EOS_ID


class DecodeConstraint:
  """Which target ids may come next, given the prefix (as a fixed-size
  state). Subclasses implement the three methods; all take and return
  tensors, batch first."""

  def initial_state(self, inputs, max_lengths):
    """The state before the first output token.

    Args:
      inputs: int32 [batch, src_len] source ids ending with EOS, 0-padded.
      max_lengths: int32 [batch], each output's length limit in tokens
        (EOS included): position max_lengths - 1 is the last one written.
    Returns:
      A nest of tensors, each with batch as its first dimension.
    """
    raise NotImplementedError

  def advance(self, state, tokens):
    """The state after `tokens` int32 [rows] were written. PAD (0) is the
    start symbol (and what a finished row is fed): it must leave the state
    unchanged."""
    raise NotImplementedError

  def allowed(self, state, step, vocab_size):
    """bool [rows, vocab_size]: the tokens that may be written at position
    `step` (int32 scalar)."""
    raise NotImplementedError


def constrain(decode_step, initial_cache, constraint, inputs, max_lengths):
  """Wraps a search's step function so that it obeys `constraint`.

  Args:
    decode_step: callable(ids int32 [rows], step, cache) -> (logits
      [rows, V], cache), as beam_search and greedy_search take it.
    initial_cache: its initial cache, [batch, ...] leaves.
    constraint: a DecodeConstraint.
    inputs: int32 [batch, src_len] the source ids.
    max_lengths: int32 [batch] output length limits.
  Returns:
    (decode_step, initial_cache) to give the search instead: the cache is
    {"model": the model's cache, "constraint": the constraint's state}.
  """

  def step(ids, position, cache):
    state = constraint.advance(cache["constraint"], ids)
    logits, model_cache = decode_step(ids, position, cache["model"])
    vocab_size = tf.shape(logits)[-1]
    allowed = constraint.allowed(state, position, vocab_size)
    stuck = tf.logical_not(tf.reduce_any(allowed, axis=-1, keepdims=True))
    allowed |= stuck & tf.equal(tf.range(vocab_size), EOS_ID)[tf.newaxis]
    logits = tf.where(allowed, logits,
                      tf.constant(IMPOSSIBLE_LOG_PROB, logits.dtype))
    return logits, {"model": model_cache, "constraint": state}

  state = constraint.initial_state(inputs, tf.cast(max_lengths, tf.int32))
  return step, {"model": initial_cache, "constraint": state}
