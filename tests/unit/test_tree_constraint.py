"""The tree constraint: on random logits, every greedy and beam output is a
well-formed tree with one tag per input word, also when the length limit
leaves no room to spare; and the generic constraint hook of the searches."""
import numpy as np
import pytest
import tensorflow as tf

import t2tlite.problems  # noqa: F401  (registers the built-in problems)
from t2tlite.data import trees
from t2tlite.data.tree_graph import bracketed_trees
from t2tlite.data.vocab import EOS_ID, PAD_ID
from t2tlite.decode import constraints
from search_calls import beam_search, greedy_search, sample_search
from t2tlite.decode.step_rules import IMPOSSIBLE_LOG_PROB
from decode_helpers import decode_ids
from t2tlite.decode import sampling
from t2tlite.decode.strategy import Sample
from t2tlite.decode.tree_constraint import (CLOSE, END, OPEN, OTHER, TAG,
                                            TreeConstraint, classify_targets,
                                            word_starts)
from t2tlite.hparams_lib import HParams
from t2tlite.models import build_model
from t2tlite.problem import get_problem

from tree_pieces import (B, INPUT_PIECES, TARGET_PIECES, as_text, check_trees,
                         random_inputs, random_step)


def test_classification_of_tree_symbols():
  kinds, labels, closing = classify_targets(TARGET_PIECES)
  assert kinds[:4] == [OTHER, END, OTHER, TAG]
  assert kinds[4:6] == [OPEN, CLOSE] and labels[4] == labels[5]
  assert closing[labels[4]] == 5
  assert kinds[-1] == OTHER  # (FRAG cannot be closed


def test_words_are_counted_in_subword_and_word_vocabularies():
  assert word_starts(INPUT_PIECES)[:4] == [False, False, False, True]
  whole = ["<pad>", "</s>", "<unk>", B + "the", B + "cat"]
  assert word_starts(whole) == [False, False, True, True, True]


@pytest.mark.parametrize("beam_size", [1, 4])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_logits_give_trees_over_the_words(beam_size, seed):
  rng = np.random.default_rng(seed)
  inputs, words = random_inputs(rng, batch=6, max_len=12)
  constraint = TreeConstraint(TARGET_PIECES, INPUT_PIECES)
  assert constraint.count_words(inputs).numpy().tolist() == words
  for room in (0, 3, 40):  # tokens beyond the shortest tree's words + 3
    limits = tf.constant(words) + 3 + room
    length = int(tf.reduce_max(limits))
    step, cache = constraints.constrain(
        random_step(len(TARGET_PIECES), seed),
        {"rows": tf.zeros([len(words), 1])}, constraint, inputs, limits)
    if beam_size == 1:
      outputs, scores = greedy_search(step, cache, length, max_lengths=limits)
    else:
      outputs, scores = beam_search(step, cache, beam_size, length,
                                    alpha=0.3, max_lengths=limits)
    check_trees(outputs, words)
    assert np.all(scores.numpy() > IMPOSSIBLE_LOG_PROB / 2)
    lengths = np.argmax(np.asarray(outputs) == EOS_ID, axis=1) + 1
    assert np.all(lengths <= limits.numpy())
    if room == 0:  # the only trees that fit: (X w w ... )X
      assert np.all(lengths == limits.numpy())


def test_beam_returns_only_trees_in_every_beam():
  rng = np.random.default_rng(7)
  inputs, words = random_inputs(rng, batch=3, max_len=8)
  limits = tf.constant(words) + 20
  step, cache = constraints.constrain(
      random_step(len(TARGET_PIECES), 7), {"rows": tf.zeros([3, 1])},
      TreeConstraint(TARGET_PIECES, INPUT_PIECES), inputs, limits)
  outputs, _ = beam_search(step, cache, 5, int(tf.reduce_max(limits)),
                           alpha=0.3, return_beams=True,
                           max_lengths=limits)
  for beams, n in zip(np.asarray(outputs), words):
    check_trees(beams, [n] * len(beams))


def test_no_room_for_a_tree_gives_an_empty_output():
  inputs = tf.constant([[3, 4, 7, EOS_ID]])  # three words
  step, cache = constraints.constrain(
      random_step(len(TARGET_PIECES), 1), {"rows": tf.zeros([1, 1])},
      TreeConstraint(TARGET_PIECES, INPUT_PIECES), inputs, tf.constant([5]))
  outputs, _ = greedy_search(step, cache, 5)
  assert list(outputs.numpy()[0]) == [EOS_ID, 0, 0, 0, 0]


@pytest.mark.parametrize("beam_size", [1, 3])
def test_untrained_transformer_outputs_trees(beam_size):
  hp = HParams(num_layers=1, d_model=16, d_ff=32, num_heads=2, dropout=0.0,
               max_length=64)
  tf.keras.utils.set_random_seed(3)
  model = build_model(hp, len(TARGET_PIECES))
  inputs, words = random_inputs(np.random.default_rng(3), batch=5, max_len=9)
  constraint = TreeConstraint(TARGET_PIECES, INPUT_PIECES)
  for extra_length in (2, 30):  # 2: inputs + 2 >= words + 3, exactly
    result = decode_ids(model, inputs, beam_size=beam_size, alpha=0.3,
                        extra_length=extra_length, constraint=constraint)
    check_trees(result["outputs"], words)


@pytest.mark.parametrize("top_p", [1.0, 0.9])
def test_sampled_outputs_are_trees(top_p):
  # Temperature 2 flattens the distribution: forbidden tokens would be
  # drawn often if the constraint did not remove them.
  inputs, words = random_inputs(np.random.default_rng(5), batch=6,
                                max_len=10)
  constraint = TreeConstraint(TARGET_PIECES, INPUT_PIECES)
  sample = Sample(temperature=2.0, top_k=0, top_p=top_p, seed=4,
                  num_samples=3)
  rows, keys = sampling.expand(sample, inputs)
  limits = tf.repeat(tf.constant(words) + 10, 3)
  step, cache = constraints.constrain(
      random_step(len(TARGET_PIECES), 4), {"rows": tf.zeros([18, 1])},
      constraint, rows, limits)
  outputs, scores = sample_search(step, cache, int(tf.reduce_max(limits)),
                                  sample, keys, max_lengths=limits)
  check_trees(outputs, np.repeat(words, 3))
  assert np.all(scores.numpy() > IMPOSSIBLE_LOG_PROB / 2)
  assert len({tuple(row) for row in outputs.numpy()}) > 6, "samples differ"


class NoRepeats(constraints.DecodeConstraint):
  """A token never follows itself (the constraints module's example)."""

  def initial_state(self, inputs, max_lengths):
    return tf.zeros_like(max_lengths)

  def advance(self, state, tokens):
    return tf.where(tokens == PAD_ID, state, tokens)

  def allowed(self, state, step, vocab_size):
    return tf.one_hot(state, vocab_size) == 0


def test_a_generic_constraint_is_obeyed_by_both_searches():
  # Logits that always prefer token 5: unconstrained, 5 5 5 ...
  def step(ids, position, cache):
    return tf.one_hot(tf.fill(tf.shape(ids), 5), 8) * 10.0, cache

  inputs = tf.constant([[3, 4, EOS_ID], [5, EOS_ID, 0]])
  limits = tf.constant([6, 6])
  for beam_size in (1, 2):
    wrapped, cache = constraints.constrain(
        step, {"rows": tf.zeros([2, 1])}, NoRepeats(), inputs, limits)
    if beam_size == 1:
      outputs, _ = greedy_search(wrapped, cache, 6, max_lengths=limits)
    else:
      outputs, _ = beam_search(wrapped, cache, 2, 6, max_lengths=limits)
    for row in outputs.numpy():
      assert row[0] == 5
      assert all(a != b for a, b in zip(row[:-1], row[1:]) if a)


def test_bracketed_trees_in_graph_match_python():
  # Rows 5 and 6: more tags than words (the words of another row must not
  # fill them).
  linearized = ["(S (NP XX XX )NP (VP XX )VP XX )S", "(S XX )S", "",
                "(S (NP XX )NP )S", "(S XX )S", "(S XX XX )S",
                "(S XX XX XX )S"]
  sentences = ["The f(x) sat .", "Hi", "two words", "cut off here", "  ",
               "Hi", "a b"]
  got = bracketed_trees(tf.constant(linearized),
                        tf.constant(sentences)).numpy()
  got = [t.decode() for t in got]
  assert got[0] == "(S (NP (XX The) (XX f-LRB-x-RRB-)) (VP (XX sat)) (XX .))"
  assert got[1] == "(S (XX Hi))"
  assert got[2] == "(TOP (XX two) (XX words))"
  assert got[3] == "(S (NP (XX cut)) (XX off) (XX here))"
  assert got[4] == ""
  assert got[5:] == ["(S (XX Hi))", "(S (XX a) (XX b))"]
  parsing = get_problem("parsing_wsj")
  shown = [0, 1, 3, 5, 6]
  for text, sentence, tree in zip([linearized[i] for i in shown],
                                  [sentences[i] for i in shown],
                                  [got[i] for i in shown]):
    assert parsing.postprocess(text, sentence) == tree
    assert next(trees.parse_trees(tree)).words() == [
        trees.escape_word(w) for w in sentence.split()]


def test_opening_brackets_in_a_row_are_bounded():
  # Logits that always prefer opening a bracket: the constraint must still
  # give trees, never opening more than the limit in a row.
  kinds, _, _ = classify_targets(TARGET_PIECES)
  opener = tf.constant([8.0 if k == OPEN else 0.0 for k in kinds])

  def step(ids, position, cache):
    return tf.tile(opener[tf.newaxis], [tf.shape(ids)[0], 1]), cache

  inputs, words = random_inputs(np.random.default_rng(5), batch=4, max_len=10)
  limits = tf.constant(words) + 60
  for beam_size in (1, 3):
    wrapped, cache = constraints.constrain(
        step, {"rows": tf.zeros([4, 1])},
        TreeConstraint(TARGET_PIECES, INPUT_PIECES, max_opens_in_a_row=3),
        inputs, limits)
    if beam_size == 1:
      outputs, _ = greedy_search(wrapped, cache, int(tf.reduce_max(limits)),
                                 max_lengths=limits)
    else:
      outputs, _ = beam_search(wrapped, cache, beam_size,
                               int(tf.reduce_max(limits)), max_lengths=limits)
    check_trees(outputs, words)
    for row in outputs.numpy():
      text = as_text(row)
      runs = "".join("o" if t.startswith("(") else "." for t in text.split())
      assert "oooo" not in runs and "ooo" in runs, text


def test_a_word_restarts_the_count_of_opens_in_a_row():
  constraint = TreeConstraint(TARGET_PIECES, INPUT_PIECES,
                              max_opens_in_a_row=2)
  ids = {piece.lstrip(B): i for i, piece in enumerate(TARGET_PIECES)}
  state = constraint.initial_state(tf.constant([[3, 4, 7, EOS_ID]]),
                                   tf.constant([40]))
  may_open = []
  for step, symbol in enumerate(["(S", "(NP", "XX", "(VP", "XX", ")VP",
                                 "(PP", "(ADJP"]):
    state = constraint.advance(state, tf.constant([ids[symbol]]))
    allowed = constraint.allowed(state, step + 1, len(TARGET_PIECES))
    may_open.append(bool(allowed[0, ids["(NP"]]))
  assert may_open == [True, False, True, True, True, True, True, False]


def test_constrained_search_compiles_with_xla():
  hp = HParams(num_layers=1, d_model=16, d_ff=32, num_heads=2, dropout=0.0,
               max_length=64)
  model = build_model(hp, len(TARGET_PIECES))
  inputs, words = random_inputs(np.random.default_rng(3), batch=5, max_len=9)
  constraint = TreeConstraint(TARGET_PIECES, INPUT_PIECES)

  def search(x, static_shapes):
    return decode_ids(model, x, beam_size=3, alpha=0.3, extra_length=10,
                      static_shapes=static_shapes, constraint=constraint)

  compiled = tf.function(lambda x: search(x, True), jit_compile=True,
                         autograph=False)
  outputs = compiled(inputs)["outputs"]
  check_trees(outputs, words)
  np.testing.assert_array_equal(outputs, search(inputs, False)["outputs"])
