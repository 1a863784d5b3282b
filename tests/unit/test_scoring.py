"""Scoring pairs (t2tlite.decode.scoring): a pair's score is the
log-probability the searches computed for the same output, and batching
keeps input order."""
import numpy as np
import tensorflow as tf

from t2tlite.data.vocab import EOS_ID, PAD_ID
from t2tlite.decode.beam_search import length_penalty
from decode_helpers import decode_ids
from t2tlite.decode.scoring import Scorer, token_log_probs

INPUTS = tf.constant([[5, 9, 12, 7, EOS_ID, 0, 0],
                      [3, 4, EOS_ID, 0, 0, 0, 0],
                      [8, 8, 30, 31, 32, 17, EOS_ID]])


def rows_of(ids):
  """int [n, len] outputs -> lists of ids up to EOS (included)."""
  rows = []
  for row in np.asarray(ids).tolist():
    rows.append(row[:row.index(EOS_ID) + 1] if EOS_ID in row else
                [t for t in row if t != PAD_ID])
  return rows


def test_scores_equal_the_searches_own_log_probabilities(tiny_model):
  # Greedy: the sum of the chosen tokens' log-probabilities.
  greedy = decode_ids(tiny_model, INPUTS, beam_size=1, extra_length=6)
  scores = token_log_probs(tiny_model, INPUTS, greedy["outputs"])
  np.testing.assert_allclose(tf.reduce_sum(scores, 1), greedy["scores"],
                             rtol=1e-4, atol=1e-4)
  # Beam search, every beam: its score times its length penalty.
  beams = decode_ids(tiny_model, INPUTS, beam_size=3, alpha=0.6,
                     extra_length=6, return_beams=True)
  outputs = tf.reshape(beams["outputs"], [9, -1])
  inputs = tf.repeat(INPUTS, 3, axis=0)
  totals = tf.reduce_sum(token_log_probs(tiny_model, inputs, outputs), 1)
  lengths = [len(r) for r in rows_of(outputs)]
  unpenalized = tf.reshape(beams["scores"], [9]) * length_penalty(
      tf.constant(lengths), 0.6)
  np.testing.assert_allclose(totals, unpenalized, rtol=1e-4, atol=1e-4)


def test_batches_keep_input_order(tiny_model):
  scorer = Scorer(tiny_model, vocab=None)
  sources = rows_of(INPUTS)
  targets = rows_of(decode_ids(tiny_model, INPUTS, beam_size=1,
                               extra_length=6)["outputs"])
  sources, targets = sources + sources[::-1], targets + targets[::-1]
  together = scorer.score_ids(sources, targets, batch_size=64)
  in_twos = scorer.score_ids(sources, targets, batch_size=2)
  for a, b, target in zip(together, in_twos, targets):
    assert len(a.tokens) == len(target)
    np.testing.assert_allclose(a.tokens, b.tokens, rtol=1e-5, atol=1e-6)
    assert a.total == sum(a.tokens)
    assert a.normalized == a.total / len(target)
  np.testing.assert_allclose([s.total for s in together[:3]],
                             [s.total for s in together[3:]][::-1],
                             rtol=1e-5)
