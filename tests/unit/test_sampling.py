"""Sampling (decode hparams sampling_temperature, top_k, top_p, epsilon,
sampling_seed, num_samples): its limits equal greedy search, a seed fixes
the samples whatever shares the batch, and bad settings fail with one
line. (Constrained sampling: test_tree_constraint.py.)"""
import numpy as np
import pytest
import tensorflow as tf

from t2tlite.data.vocab import EOS_ID
from decode_helpers import decode_ids
from t2tlite.decode.settings import DecodeHParams
from t2tlite.decode import strategy
from t2tlite.decode.sampling import row_keys, uniforms

from outputs_differ import assert_outputs_differ

INPUTS = tf.constant([[5, 9, 12, 7, EOS_ID, 0, 0],
                      [3, 4, EOS_ID, 0, 0, 0, 0],
                      [8, 8, 30, 31, 32, 17, EOS_ID]])


def Sampler(temperature, top_k=0, top_p=1.0, seed=0, num_samples=1):
  """Sampling decode hparams."""
  return {"sampling_temperature": temperature, "top_k": top_k,
          "top_p": top_p, "sampling_seed": seed, "num_samples": num_samples}


def decode(model, inputs=INPUTS, sampler=None, **kwargs):
  result = decode_ids(model, inputs, beam_size=1, extra_length=6,
                      **(sampler or {}), **kwargs)
  return result["outputs"].numpy(), result["scores"].numpy()


@pytest.fixture(scope="module")
def greedy(tiny_model):
  return decode(tiny_model)


@pytest.mark.parametrize("sampler", [
    Sampler(temperature=1e-6, seed=1),          # temperature -> 0
    Sampler(temperature=1.0, top_k=1, seed=2),
    Sampler(temperature=1.5, top_p=1e-6, seed=3),  # only the best token
], ids=["temperature_to_0", "top_k_1", "top_p_tiny"])
def test_limits_of_sampling_equal_greedy_search(tiny_model, greedy, sampler):
  outputs, scores = decode(tiny_model, sampler=sampler)
  assert_outputs_differ(greedy[0].tolist())
  np.testing.assert_array_equal(outputs, greedy[0])
  # Scores are the model's log-probabilities of the output, as greedy's.
  np.testing.assert_allclose(scores, greedy[1], rtol=1e-5)


def test_a_seed_fixes_the_samples_whatever_shares_the_batch(tiny_model,
                                                            greedy):
  sampler = Sampler(temperature=1.0, seed=11, num_samples=4)
  outputs, scores = decode(tiny_model, sampler=sampler)
  assert outputs.shape[:2] == (3, 4) and scores.shape == (3, 4)
  again, _ = decode(tiny_model, sampler=sampler)
  np.testing.assert_array_equal(outputs, again)
  # Row 1 alone (less padding), and among other rows in another order, over
  # two concurrent searches: the same samples.
  alone, _ = decode(tiny_model, inputs=INPUTS[1:2, :3], sampler=sampler)
  np.testing.assert_array_equal(alone[0], outputs[1, :, :alone.shape[-1]])
  assert not outputs[1, :, alone.shape[-1]:].any()
  shuffled, _ = decode(tiny_model, inputs=tf.gather(INPUTS, [2, 1, 0]),
                       sampler=sampler, concurrent_searches=2)
  np.testing.assert_array_equal(shuffled[::-1], outputs)
  # An untrained model's distribution is flat: samples differ from each
  # other, from greedy, and under another seed.
  assert len({tuple(s) for s in outputs.reshape(12, -1)}) > 6
  assert not np.array_equal(outputs[:, 0], greedy[0])
  other, _ = decode(tiny_model, sampler=Sampler(1.0, seed=12, num_samples=4))
  assert not np.array_equal(other, outputs)


def sample_tokens(logits, u, temperature, top_k=0, top_p=1.0, epsilon=0.0):
  """The tokens sampling (epsilon sampling where epsilon > 0) draws from
  logits [rows, V] at u [rows]."""
  if epsilon:
    return strategy.EpsilonSample(temperature, top_k, top_p, 0, 1,
                                  epsilon).draw(logits, u)
  return strategy.Sample(temperature, top_k, top_p, 0, 1).draw(logits, u)


def test_sample_tokens_follows_the_filtered_distribution():
  logits = tf.math.log(tf.constant([[0.1, 0.2, 0.3, 0.4]] * 4000))
  u = tf.random.stateless_uniform([4000], [1, 2])
  counts = np.bincount(sample_tokens(logits, u, 1.0).numpy(), minlength=4)
  np.testing.assert_allclose(counts / 4000, [0.1, 0.2, 0.3, 0.4], atol=0.03)
  # top_k=2: tokens 3 and 2 only, renormalized (4/7, 3/7).
  counts = np.bincount(sample_tokens(logits, u, 1.0, top_k=2).numpy(),
                       minlength=4)
  np.testing.assert_allclose(counts / 4000, [0, 0, 3 / 7, 4 / 7], atol=0.03)
  # top_p=0.65: 0.4 + 0.3 reach it, 0.2 is not needed.
  counts = np.bincount(sample_tokens(logits, u, 1.0, top_p=0.65).numpy(),
                       minlength=4)
  np.testing.assert_allclose(counts / 4000, [0, 0, 3 / 7, 4 / 7], atol=0.03)
  # Two tokens of exactly 0.5: the first alone reaches top_p=0.5.
  even = tf.constant([[0.0, 0.0, -1e9, -1e9]] * 200)
  assert not sample_tokens(even, u[:200], 1.0, top_p=0.5).numpy().any()
  assert sample_tokens(even, u[:200], 1.0, top_p=0.51).numpy().any()


def test_sample_tokens_divides_the_logits_by_the_temperature():
  logits = tf.math.log(tf.constant([[0.1, 0.2, 0.3, 0.4]] * 4000))
  u = tf.random.stateless_uniform([4000], [3, 4])
  # Temperature 0.5 squares the probabilities: 1, 4, 9, 16 out of 30.
  counts = np.bincount(sample_tokens(logits, u, 0.5).numpy(), minlength=4)
  np.testing.assert_allclose(counts / 4000, np.array([1, 4, 9, 16]) / 30,
                             atol=0.03)


def test_row_keys_ignore_padding_but_not_the_sample_seed_or_order():
  padded = tf.constant([[5, 9, EOS_ID, 0, 0]] * 2)
  keys = row_keys(padded, tf.constant([0, 1]), 7).numpy()
  assert keys[0] == row_keys(padded[:1, :3], tf.constant([0]), 7).numpy()[0]
  assert keys[0] != keys[1]
  assert keys[0] != row_keys(padded[:1], tf.constant([0]), 8).numpy()[0]
  reordered = tf.constant([[9, 5, EOS_ID]])
  assert keys[0] != row_keys(reordered, tf.constant([0]), 7).numpy()[0]


def test_the_largest_hash_is_still_below_one(monkeypatch):
  """(2**24 - 1 + 0.5) / 2**24 rounds to 1 in float32: it is held below."""
  from t2tlite.decode import sampling
  monkeypatch.setattr(sampling, "_combine", lambda keys, step: tf.fill(
      tf.shape(keys), tf.constant(0xFFFFFFFF, tf.int64)))
  u = uniforms(tf.constant([0, 1], tf.int64), 0).numpy()
  assert np.all((u > 0.99999) & (u < 1)), u


def test_uniforms_spread_evenly_over_zero_to_one():
  u = uniforms(tf.range(20000, dtype=tf.int64), 3).numpy()
  assert np.all((u > 0) & (u < 1))
  # Each tenth of (0, 1) holds a tenth of them.
  counts = np.bincount((u * 10).astype(int), minlength=10)
  np.testing.assert_allclose(counts / 20000, [0.1] * 10, atol=0.01)
  # Another step, other numbers.
  assert np.mean(u == uniforms(tf.range(20000, dtype=tf.int64),
                               4).numpy()) < 0.01


@pytest.mark.parametrize("text, message", [
    ("sampling_temperature=-1", "sampling_temperature must be > 0"),
    ("top_k=5", "top_k=5 samples: it needs sampling_temperature > 0"),
    ("sampling_temperature=1,top_p=0", r"top_p must be in \(0, 1\], got 0"),
    ("sampling_temperature=1,top_p=1.5", r"top_p must be in \(0, 1\]"),
    ("sampling_temperature=1,num_samples=0", "num_samples must be >= 1"),
    ("sampling_temperature=1,return_beams=true", "ask for num_samples"),
    ("epsilon=0.02", "epsilon=0.02 samples: it needs sampling_temperature"),
    ("sampling_temperature=1,epsilon=1", r"epsilon must be in \[0, 1\), got 1"),
    ("sampling_temperature=1,epsilon=-0.1", r"epsilon must be in \[0, 1\)"),
])
def test_bad_sampling_hparams_fail_with_one_line(text, message):
  with pytest.raises(ValueError, match=message) as error:
    DecodeHParams.parse(text)
  assert "\n" not in str(error.value)


def test_epsilon_drops_the_tokens_under_it_and_keeps_the_best():
  logits = tf.math.log(tf.constant([[0.01, 0.19, 0.3, 0.5]] * 4000))
  u = tf.random.stateless_uniform([4000], [1, 2])
  # epsilon=0.02 (Hewitt et al., 2022): token 0 (0.01) is never drawn,
  # the others renormalized.
  counts = np.bincount(sample_tokens(logits, u, 1.0, epsilon=0.02).numpy(),
                       minlength=4)
  assert counts[0] == 0
  np.testing.assert_allclose(counts / 4000, [0, 0.19 / 0.99, 0.3 / 0.99,
                                             0.5 / 0.99], atol=0.03)
  # Over every token's probability: the most probable one stays.
  assert set(sample_tokens(logits, u, 1.0, epsilon=0.9).numpy()) == {3}
  # Under every token's probability: the draws of plain sampling.
  np.testing.assert_array_equal(
      sample_tokens(logits, u, 1.0, epsilon=1e-3).numpy(),
      sample_tokens(logits, u, 1.0).numpy())


def test_epsilon_above_every_tokens_probability_is_greedy(tiny_model,
                                                          greedy):
  outputs, scores = decode(tiny_model, sampler=dict(
      Sampler(temperature=1.0, seed=5), epsilon=0.99))
  np.testing.assert_array_equal(outputs, greedy[0])
  np.testing.assert_allclose(scores, greedy[1], rtol=1e-5)
