"""Block top-k (t2tlite/decode/vocab_top_k.py) against tf.math.top_k, and
a search step's k best candidates (`StepRules.top_candidates`)."""
import numpy as np
import pytest
import tensorflow as tf

from t2tlite.decode.prefix import ForcedPrefix
from t2tlite.decode.step_rules import StepRules, without_repeats
from t2tlite.decode.vocab_top_k import block_size, log_normalizer_and_top_k


def reference(logits, k):
  values, ids = tf.math.top_k(logits, k=k)
  return tf.reduce_logsumexp(logits, axis=-1), values, ids


@pytest.mark.parametrize("vocab,k", [(37000, 8), (8000, 1), (600, 5)])
def test_same_winners_as_top_k_with_ties_and_masks(vocab, k):
  assert block_size(vocab, k) is not None  # the block path is exercised
  rng = np.random.RandomState(vocab + k)
  # Values rounded to bfloat16 collide often, so ties are everywhere; some
  # tokens are masked as decoding masks them.
  logits = tf.cast(tf.cast(rng.randn(6, vocab) * 4, tf.bfloat16), tf.float32)
  logits = tf.tensor_scatter_nd_update(
      logits, [[0, 0], [1, 3], [2, vocab - 1]], [-np.inf, -1e7, -np.inf])
  # A row whose best values are one repeated number across blocks.
  logits = tf.tensor_scatter_nd_update(
      logits, [[3, i] for i in range(0, vocab, vocab // 7)],
      [50.0] * len(range(0, vocab, vocab // 7)))
  log_z, values, ids = log_normalizer_and_top_k(logits, k)
  ref_log_z, ref_values, ref_ids = reference(logits, k)
  np.testing.assert_array_equal(ids.numpy(), ref_ids.numpy())
  np.testing.assert_array_equal(values.numpy(), ref_values.numpy())
  np.testing.assert_allclose(log_z.numpy(), ref_log_z.numpy(), rtol=1e-6)


def test_vocabulary_without_a_useful_divisor_uses_plain_top_k():
  assert block_size(10007, 8) is None  # a prime
  logits = tf.random.stateless_normal([3, 10007], seed=[1, 2])
  log_z, values, ids = log_normalizer_and_top_k(logits, 8)
  ref_log_z, ref_values, ref_ids = reference(logits, 8)
  np.testing.assert_array_equal(ids.numpy(), ref_ids.numpy())
  np.testing.assert_allclose(log_z.numpy(), ref_log_z.numpy(), rtol=1e-6)


def test_same_under_xla():
  logits = tf.random.stateless_normal([4, 37000], seed=[3, 4]) * 3
  compiled = tf.function(lambda x: log_normalizer_and_top_k(x, 8),
                         jit_compile=True, autograph=False)(logits)
  plain = log_normalizer_and_top_k(logits, 8)
  np.testing.assert_array_equal(compiled[2].numpy(), plain[2].numpy())
  np.testing.assert_allclose(compiled[0].numpy(), plain[0].numpy(),
                             rtol=1e-6)


def test_ties_go_to_the_lower_id_across_blocks():
  # Block size 10 here: the tie for 5th place is between id 21 (block 2)
  # and id 501 (block 50, the block with the largest maximum).
  assert block_size(600, 5) == 10
  logits = np.full([1, 600], -100.0, np.float32)
  for token, value in {500: 10, 501: 3, 20: 5, 21: 3, 30: 4, 40: 3.5}.items():
    logits[0, token] = value
  _, values, ids = log_normalizer_and_top_k(tf.constant(logits), 5)
  np.testing.assert_array_equal(ids.numpy(), [[500, 20, 30, 40, 21]])
  np.testing.assert_array_equal(values.numpy(), [[10, 5, 4, 3.5, 3]])


@pytest.mark.parametrize("vocab", [37000, 10007])  # blocks, plain top_k
@pytest.mark.parametrize("share", [None, 0.3, 0.99])
def test_an_excluded_token_is_as_if_its_logit_were_minus_infinity(
    vocab, share):
  rng = np.random.RandomState(7)
  logits = rng.randn(5, vocab).astype(np.float32) * 3
  if share is not None:
    # The excluded token holds `share` of every row's probability, so it
    # is every row's best: its share is taken out of the normalizer (0.3),
    # or the normalizer is summed without it (0.99, where 1 - share has
    # few bits left).
    others = np.log(np.exp(logits[:, 1:].astype(np.float64)).sum(axis=1))
    logits[:, 0] = others + np.log(share / (1 - share))
  log_z, values, ids = log_normalizer_and_top_k(tf.constant(logits), 6,
                                                excluded_ids=[0])
  masked = logits.copy()
  masked[:, 0] = -np.inf
  ref_log_z, ref_values, ref_ids = reference(tf.constant(masked), 6)
  np.testing.assert_array_equal(ids.numpy(), ref_ids.numpy())
  np.testing.assert_array_equal(values.numpy(), ref_values.numpy())
  np.testing.assert_allclose(log_z.numpy(), ref_log_z.numpy(), rtol=1e-6)


def test_a_row_of_minus_infinity_has_a_normalizer_of_minus_infinity():
  logits = tf.constant([[-np.inf] * 600, [0.0] * 600])
  log_z, _, _ = log_normalizer_and_top_k(logits, 4)
  assert log_z.numpy()[0] == -np.inf
  np.testing.assert_allclose(log_z.numpy()[1], np.log(600.0), rtol=1e-6)


@pytest.mark.parametrize("excluding", [[True, False], [True, True],
                                       [False, False]])
def test_excluded_tokens_are_left_out_as_their_flags_say(excluding):
  # Tokens 0 and 1 (PAD and EOS) are rows' best and second best.
  rng = np.random.RandomState(11)
  logits = rng.randn(4, 8000).astype(np.float32)
  logits[:, 0], logits[:, 1] = 6.0, 5.0
  log_z, values, ids = log_normalizer_and_top_k(
      tf.constant(logits), 4, excluded_ids=(0, 1),
      excluding=tf.constant(excluding))
  masked = logits.copy()
  masked[:, [i for i, left_out in enumerate(excluding) if left_out]] = -np.inf
  ref_log_z, ref_values, ref_ids = reference(tf.constant(masked), 4)
  np.testing.assert_array_equal(ids.numpy(), ref_ids.numpy())
  np.testing.assert_array_equal(values.numpy(), ref_values.numpy())
  np.testing.assert_allclose(log_z.numpy(), ref_log_z.numpy(), rtol=1e-6)


def test_asking_more_candidates_than_allowed_tokens_gives_the_allowed_ones():
  # A beam wider than a small vocabulary: of 6 ids PAD is never a
  # candidate and EOS not before min_length, so a step has 4 to give.
  rules = StepRules(min_length=2, no_repeat_ngram_size=0, excluded_id=0,
                    prefix=None)
  logits = np.array([[3.0, 2.0, 0.5, -1.0, 1.0, 0.0],
                     [0.0, 4.0, 1.0, 2.0, -2.0, 3.0]], np.float32)
  log_probs, tokens = rules.top_candidates(tf.constant(logits), None,
                                           tf.constant(0), 8)
  allowed = logits[:, 2:]
  order = np.argsort(-allowed, axis=-1)
  np.testing.assert_array_equal(tokens.numpy(), order + 2)
  expected = allowed - np.log(np.exp(allowed).sum(-1, keepdims=True))
  np.testing.assert_allclose(log_probs.numpy(),
                             np.take_along_axis(expected, order, -1),
                             rtol=1e-6, atol=1e-6)


def test_no_repeat_ngrams_change_only_the_banned_tokens():
  # After 5 6 5 the bigram 5 6 would come again: 6 alone is banned; the
  # other logits, the padding id's among them, are left as they were.
  logits = np.array([[3.0, 2.0, 1.0, 0.5, -0.25, 4.0, 1.5]], np.float32)
  out = without_repeats(tf.constant(logits), tf.constant([[5, 6, 5, 0]]),
                        tf.constant(3), 2)
  expected = logits.copy()
  expected[0, 6] = -1e7
  np.testing.assert_array_equal(out.numpy(), expected)


def test_a_forced_token_is_scored_even_where_it_repeats_an_ngram():
  """A prefix is written whatever no_repeat_ngram_size bans, with the
  model's log-probability of its token: not an impossible one, nor one
  normalized without the banned tokens (which can exceed 0)."""
  rules = StepRules(min_length=0, no_repeat_ngram_size=1, excluded_id=None,
                    prefix=ForcedPrefix(tf.constant([[5, 5]])))
  logits = tf.math.log(tf.constant([[0.05, 0.05, 0.1, 0.1, 0.1, 0.6]]))
  seqs = tf.constant([[5, 0, 0]])
  first, tokens = rules.top_candidates(logits, seqs, tf.constant(0), 1)
  assert tokens.numpy().tolist() == [[5]]
  np.testing.assert_allclose(first.numpy(), [[np.log(0.6)]], rtol=1e-6)
  # Step 1 writes 5 again, the unigram 5 already written.
  second, tokens = rules.top_candidates(logits, seqs, tf.constant(1), 1)
  assert tokens.numpy().tolist() == [[5]]
  np.testing.assert_allclose(second.numpy(), [[np.log(0.6)]], rtol=1e-6)


def test_a_step_forcing_some_rows_normalizes_theirs_with_every_token():
  """Prefixes of two lengths under no-repeat: at the step where only the
  longer one still forces, its banned token is scored against the whole
  vocabulary, while the other row chooses as it would without a prefix;
  past both prefixes no row is forced."""
  rules = StepRules(min_length=0, no_repeat_ngram_size=1, excluded_id=None,
                    prefix=ForcedPrefix(tf.constant([[5, 5], [5, 0]])))
  logits = tf.math.log(tf.constant([[0.05, 0.05, 0.1, 0.1, 0.1, 0.6]] * 2))
  seqs = tf.constant([[5, 0, 0], [5, 0, 0]])
  scores, tokens = rules.top_candidates(logits, seqs, tf.constant(1), 1)
  # Row 1 may not repeat 5: its best is a 0.1 token of the 0.4 left.
  assert tokens.numpy().tolist() == [[5], [2]]
  np.testing.assert_allclose(scores.numpy(),
                             [[np.log(0.6)], [np.log(0.1 / 0.4)]], rtol=1e-6)
  _, tokens = rules.top_candidates(logits, tf.constant([[5, 5, 0]] * 2),
                                   tf.constant(2), 1)
  assert tokens.numpy().tolist() == [[2], [2]]
