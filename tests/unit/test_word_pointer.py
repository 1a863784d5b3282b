"""The decoder's word pointer: where words begin, what each decoder position
points at, cached decoding equal to the teacher-forced model, configs and
the hparam's checks."""
import keras
import numpy as np
import pytest
import tensorflow as tf

import t2tlite
from t2tlite import problem as problem_lib
from t2tlite.decode import tree_constraint
from t2tlite.layers.word_pointer import WordPointer
from t2tlite.models import word_pointer_tables
from t2tlite.models.transformer import Transformer

# Input ids: 0 PAD, 1 EOS, 2 UNK; 3-9 begin a word, 10-14 continue one.
WORD_STARTS = [False] * 3 + [True] * 7 + [False] * 5
# Target ids: 0 PAD, 1 EOS, 2 UNK; 3-6 tags (one per word), 7-12 brackets.
WORD_TOKENS = [False] * 3 + [True] * 4 + [False] * 6
TABLES = {"word_starts": WORD_STARTS, "word_tokens": WORD_TOKENS}


def pointer_model(overrides="", seed=1):
  keras.utils.set_random_seed(seed)
  hp = t2tlite.create_hparams("transformer_tiny", overrides)
  return t2tlite.build_model(hp, len(WORD_STARTS),
                             target_vocab_size=len(WORD_TOKENS),
                             word_pointer=TABLES)


def test_word_positions_list_each_words_first_piece_then_eos():
  layer = WordPointer(WORD_STARTS, WORD_TOKENS, 8)
  inputs = tf.constant([[3, 10, 11, 4, 5, 12, 1, 0],
                        [6, 1, 0, 0, 0, 0, 0, 0]])
  positions, last = layer.word_positions(inputs)
  assert positions.numpy()[0, :4].tolist() == [0, 3, 4, 6]  # 3 words, EOS
  assert positions.numpy()[1, :2].tolist() == [0, 1]
  assert last.numpy().tolist() == [3, 1]


def test_each_decoder_position_points_at_the_word_its_next_tag_is_for():
  layer = WordPointer(WORD_STARTS, WORD_TOKENS, 8)
  layer.build()
  inputs = tf.constant([[3, 10, 4, 5, 12, 1]])          # words at 0, 2, 3
  memory = tf.random.normal([1, 6, 8], seed=1)
  # (S (NP tag tag )NP tag )S EOS, shifted right: the inputs of positions.
  decoder_inputs = tf.constant([[0, 7, 8, 3, 4, 9, 5, 10, 1]])
  vectors = layer(decoder_inputs, memory, inputs).numpy()
  projected = layer.project(memory).numpy()
  # Words done before each position: 0 0 0 1 2 2 3 3 3 -> source positions
  # 0 0 0 2 3 3 5 (EOS, past the last word) 5 5.
  for t, source in enumerate([0, 0, 0, 2, 3, 3, 5, 5, 5]):
    np.testing.assert_allclose(vectors[0, t], projected[0, source], atol=1e-6)


def test_a_decoding_step_past_the_last_word_points_at_eos():
  # More tags than source words (an untrained or wrong decoder writes
  # them): each cached step points where the teacher-forced call does.
  layer = WordPointer(WORD_STARTS, WORD_TOKENS, 8)
  layer.build()
  inputs = tf.constant([[3, 10, 4, 1], [5, 1, 0, 0]])   # 2 words, 1 word
  memory = tf.random.normal([2, 4, 8], seed=2)
  decoder_inputs = tf.constant([[0, 3, 4, 5, 6, 3], [0, 7, 3, 4, 5, 6]])
  expected = layer(decoder_inputs, memory, inputs).numpy()
  positions, last = layer.word_positions(inputs)
  projected = layer.project(memory)
  done = layer.words_done(decoder_inputs)
  beams = 2
  for t in range(decoder_inputs.shape[1]):
    vectors = layer.step(tf.repeat(done[:, t], beams), projected, positions,
                         last).numpy()
    np.testing.assert_allclose(vectors[:, 0],
                               np.repeat(expected[:, t], beams, axis=0),
                               atol=1e-6)
  # Past its last word each row points at its EOS (positions 3 and 1).
  np.testing.assert_allclose(expected[:, -1],
                             projected.numpy()[[0, 1], [3, 1]], atol=1e-6)


def test_a_source_without_word_starts_points_at_its_first_position():
  # Only word-continuing pieces and no EOS (a truncated source), or only
  # padding (a batch's filler row): no word to point at but position 0.
  layer = WordPointer(WORD_STARTS, WORD_TOKENS, 8)
  layer.build()
  inputs = tf.constant([[10, 11, 12, 0], [0, 0, 0, 0]])
  positions, last = layer.word_positions(inputs)
  assert last.numpy().tolist() == [0, 0]
  memory = tf.random.normal([2, 4, 8], seed=3)
  first = layer.project(memory).numpy()[:, 0]
  vectors = layer(tf.constant([[0, 3, 4], [0, 7, 3]]), memory,
                  inputs).numpy()
  np.testing.assert_allclose(vectors, np.repeat(first[:, None], 3, axis=1),
                             atol=1e-6)
  step = layer.step(tf.constant([2, 1]), layer.project(memory), positions,
                    last).numpy()
  np.testing.assert_allclose(step[:, 0], first, atol=1e-6)


@pytest.mark.parametrize("growing", [False, True])
def test_cached_decoding_reproduces_full_forward(growing):
  model = pointer_model("norm_position=pre")
  inputs = tf.constant([[3, 10, 4, 5, 1, 0], [6, 11, 1, 0, 0, 0]])
  targets = tf.constant([[7, 8, 3, 4, 9, 5, 10, 1],
                         [7, 6, 10, 1, 0, 0, 0, 0]])
  full = model({"inputs": inputs, "targets": targets}).numpy()
  beams = 3  # rows = batch * beams share each element's memory
  decode_step, prepared = model.prepare_decoding(inputs,
                                                 None if growing else 10)
  cache = tf.nest.map_structure(lambda t: tf.repeat(t, beams, axis=0),
                                model.init_cache(2, None if growing else 10))
  cache["per_batch"] = dict(cache.get("per_batch", {}),
                            memory=prepared["per_batch"]["memory"])
  previous = tf.zeros([2 * beams], tf.int32)
  for step in range(targets.shape[1]):
    logits, cache = decode_step(previous, tf.constant(step), cache)
    np.testing.assert_allclose(logits.numpy(),
                               np.repeat(full[:, step], beams, axis=0),
                               atol=1e-4)
    previous = tf.repeat(targets[:, step], beams)


def test_the_pointer_is_used_and_trained():
  with_pointer = pointer_model()
  keras.utils.set_random_seed(1)
  hp = t2tlite.create_hparams("transformer_tiny")
  without = t2tlite.build_model(hp, len(WORD_STARTS),
                                target_vocab_size=len(WORD_TOKENS))
  assert (with_pointer.count_params() - without.count_params() ==
          hp.d_model * hp.d_model)
  features = {"inputs": tf.constant([[3, 4, 5, 1]]),
              "targets": tf.constant([[7, 3, 4, 5, 10, 1]])}
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(with_pointer(features, training=True) ** 2)
  kernel = with_pointer.word_pointer.kernel
  gradient = tape.gradient(loss, kernel)
  assert float(tf.reduce_max(tf.abs(gradient))) > 0
  # Pointing elsewhere changes the logits after the first tag.
  moved = dict(features, inputs=tf.constant([[3, 10, 4, 5, 1]]))
  assert not np.allclose(with_pointer(features).numpy()[0, 2:],
                         with_pointer(moved).numpy()[0, 2:], atol=1e-4)


def test_config_round_trip_keeps_the_tables():
  model = pointer_model()
  rebuilt = Transformer.from_config(model.get_config())
  assert rebuilt.word_pointer.word_starts == WORD_STARTS
  assert rebuilt.word_pointer.word_tokens == WORD_TOKENS
  layer = model.word_pointer
  again = WordPointer.from_config(layer.get_config())
  assert again.get_config() == layer.get_config()


def test_parsing_tables_mark_word_starts_and_tags():
  tables = tree_constraint.word_pointer_tables(
      ["<pad>", "</s>", "<unk>", "\u2581The", "ory", "\u2581cat"],
      ["<pad>", "</s>", "<unk>", "(S", ")S", "NN", "DT", "(NP", ")NP"])
  assert tables == {
      "word_starts": [False, False, False, True, False, True],
      "word_tokens": [False, False, False, False, False, True, True, False,
                      False]}


def test_word_pointer_needs_a_problem_with_word_tokens():
  hp = t2tlite.create_hparams("transformer_tiny", "word_pointer=true")
  problem = problem_lib.get_problem("algorithmic_reverse")
  with pytest.raises(ValueError, match="word_pointer=true.*algorithmic_rev"):
    word_pointer_tables(hp, problem, None, None)
  assert word_pointer_tables(t2tlite.create_hparams("transformer_tiny"),
                             problem, None, None) is None
