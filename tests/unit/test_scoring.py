"""Scoring pairs (t2tlite.decode.scoring): a pair's score is the
log-probability the searches computed for the same output, batching keeps
input order, and the export's score signature scores as the Scorer."""
import numpy as np
import pytest
import tensorflow as tf

from t2tlite import run_decoding
from t2tlite.data.vocab import EOS_ID, PAD_ID
from t2tlite.decode.beam_search import length_penalty
from decode_helpers import decode_ids
from t2tlite.decode.scoring import Scorer, token_log_probs
from t2tlite.export import serving_module

from run_folder import needs_multi30k
from shared_run import shared_run_folder

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


@pytest.fixture(scope="module")
def two_vocab_run(tmp_path_factory):
  """A run whose targets have a vocabulary of their own (English inputs,
  German targets)."""
  return run_decoding.load_run(
      shared_run_folder(tmp_path_factory, separate_target_vocab=True))


@needs_multi30k
def test_pairs_are_encoded_by_their_own_vocabularies_with_eos(two_vocab_run):
  run = two_vocab_run
  scorer = Scorer(run.model, run.vocab, run.target_vocab)
  target = "Ein Hund rennt durch den Schnee."
  # The two vocabularies cut this line differently.
  assert run.target_vocab.encode_text(target) != run.vocab.encode_text(target)
  sources, targets = scorer.encode(["A dog runs."], [target])
  pieces = run.target_vocab.encode_text(target, add_eos=False)
  assert targets == [pieces + [EOS_ID]]
  assert sources == [run.vocab.encode_text("A dog runs.", add_eos=False) +
                     [EOS_ID]]


@needs_multi30k
def test_score_signature_truncates_targets_as_inputs(two_vocab_run):
  """score_text (the export's score signature) keeps max_input_length - 1
  target pieces, then EOS, and scores them as the Scorer scores those."""
  run = two_vocab_run
  sources = ["A dog runs through the snow.", "Two men."]
  targets = ["Ein Hund rennt durch den Schnee.", ""]
  result = serving_module.score_text(
      run.model, run.vocab, run.target_vocab, 4, tf.constant(sources),
      tf.constant(targets))
  source_ids = [run.vocab.encode_text(s, add_eos=False)[:3] + [EOS_ID]
                for s in sources]
  target_ids = [run.target_vocab.encode_text(t, add_eos=False)[:3] + [EOS_ID]
                for t in targets]
  assert target_ids[1] == [EOS_ID]
  assert len(target_ids[0]) == 4
  assert result["lengths"].numpy().tolist() == [4, 1]
  expected = Scorer(run.model, run.vocab, run.target_vocab).score_ids(
      source_ids, target_ids)
  np.testing.assert_allclose(result["scores"], [s.total for s in expected],
                             rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(result["normalized_scores"],
                             [s.total / len(t) for s, t in
                              zip(expected, target_ids)],
                             rtol=1e-4, atol=1e-5)
