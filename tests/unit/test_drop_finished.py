"""Beam search that drops the batch elements that have stopped
(`drop_finished`, the default of `search.decode` with growing caches):
later steps compute fewer rows, and every output is the one the search
finds keeping them, its score too (to float32 rounding)."""
import numpy as np
import pytest
import tensorflow as tf

from t2tlite.decode import beam_search as searches
from t2tlite.decode.prefix import ForcedPrefix
from t2tlite.decode.step_rules import StepRules
from t2tlite.decode.strategy import Beam
from t2tlite.ids import PAD_ID

from outputs_differ import assert_outputs_differ

# Lengths 4, 6, 1, 5 and 2 (EOS included).
INPUTS = tf.constant([[5, 6, 7, 1, 0, 0], [8, 9, 10, 11, 12, 1],
                      [1, 0, 0, 0, 0, 0], [14, 15, 16, 17, 1, 0],
                      [18, 1, 0, 0, 0, 0]], tf.int32)
EXTRA = 4


def _search(model, inputs, beam, rules, drop_finished, rows_seen=None):
  """beam_search over the model's growing cache; rows_seen (a list):
  each step's row count is appended (eager only)."""
  step, cache = model.prepare_decoding(inputs, None)
  lengths = tf.reduce_sum(tf.cast(inputs != PAD_ID, tf.int32), axis=1)

  def counted_step(ids, position, cache):
    if rows_seen is not None:
      rows_seen.append(int(tf.shape(ids)[0]))
    return step(ids, position, cache)

  return searches.beam_search(counted_step, cache, beam,
                              tf.shape(inputs)[1] + EXTRA, rules,
                              max_lengths=lengths + EXTRA,
                              drop_finished=drop_finished)


def _rules(prefix=None, min_length=0, no_repeats=0):
  forced = None if prefix is None else ForcedPrefix(tf.constant(prefix))
  return StepRules(min_length, no_repeats, PAD_ID, forced)


RULES = {
    "plain": _rules(),
    "min_length and no repeats": _rules(min_length=3, no_repeats=2),
    # No-repeat too: its normalizer for the forced tokens is made only at
    # steps that force a row, a branch in a loop whose rows change.
    "prefixes and no repeats": _rules(
        prefix=[[7, 8], [0, 0], [9, 0], [0, 0], [10, 11]], no_repeats=2),
}


# Each rule set once, and each way of returning: the rules change a step's
# logits, return_beams only what is gathered once the search ends.
@pytest.mark.parametrize("rules,return_beams", [
    ("plain", False), ("min_length and no repeats", True),
    ("prefixes and no repeats", True)])
def test_outputs_and_scores_are_those_of_the_search_that_keeps_them(
    tiny_model, rules, return_beams):
  beam = Beam(size=3, alpha=0.6, return_beams=return_beams)

  @tf.function(autograph=False)
  def both(inputs):
    return (_search(tiny_model, inputs, beam, RULES[rules], False),
            _search(tiny_model, inputs, beam, RULES[rules], True))

  (kept_ids, kept_scores), (dropped_ids, dropped_scores) = both(INPUTS)
  assert_outputs_differ(kept_ids.numpy().tolist())
  np.testing.assert_array_equal(dropped_ids, kept_ids)
  # Rows computed in a smaller batch may round their last bit otherwise
  # (the matmul kernels block by row count), as in any other batch.
  np.testing.assert_allclose(dropped_scores, kept_scores, rtol=1e-6)
  assert np.count_nonzero(kept_ids) > INPUTS.shape[0]


def test_elements_leave_as_they_stop(tiny_model):
  # The untrained model does not choose EOS: each element runs to its own
  # limit (its length + 4: 8, 10, 5, 9, 6) and leaves at that step.
  beam = Beam(size=2, alpha=0.6, return_beams=False)
  kept_rows, dropped_rows = [], []
  kept = _search(tiny_model, INPUTS, beam, RULES["plain"], False, kept_rows)
  dropped = _search(tiny_model, INPUTS, beam, RULES["plain"], True,
                    dropped_rows)
  np.testing.assert_array_equal(dropped[0], kept[0])
  assert kept_rows == [10] * 10
  assert dropped_rows == [10] * 5 + [8, 6, 6, 4, 2]
  # Each output ran to its own limit.
  lengths = np.count_nonzero(INPUTS, axis=1) + EXTRA
  np.testing.assert_array_equal(np.count_nonzero(dropped[0], axis=1),
                                lengths)


def test_an_element_that_finishes_early_leaves_with_its_result():
  # A hand-set model: element 0 finishes at step 1 with certainty (its
  # bound cannot be beaten), element 1 never chooses EOS.
  logits = tf.math.log(tf.constant([[0.05, 0.9, 0.05], [0.0, 0.0, 1.0]]))
  rows_seen = []

  def step(ids, position, cache):
    rows_seen.append(int(tf.shape(ids)[0]))
    return tf.gather(logits, cache["which"]), cache

  cache = {"which": tf.constant([0, 1])}
  beam = Beam(size=2, alpha=0.0, return_beams=True)
  results = [searches.beam_search(step, cache, beam, 6, StepRules(
      0, 0, None, None), drop_finished=drop) for drop in (False, True)]
  np.testing.assert_array_equal(results[1][0], results[0][0])
  np.testing.assert_array_equal(results[1][1], results[0][1])
  np.testing.assert_array_equal(results[1][0][0, 0], [1, 0, 0, 0, 0, 0])
  np.testing.assert_array_equal(results[1][0][1, 0], [2] * 6)
  # Kept: 6 steps of 4 rows. Dropped: element 0 leaves once its second
  # hypothesis has finished (step 2), so steps 2-5 compute 2 rows.
  assert rows_seen[:6] == [4] * 6
  assert rows_seen[6:] == [4, 4, 2, 2, 2, 2]
