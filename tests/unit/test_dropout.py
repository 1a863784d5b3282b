"""Dropout from 16-bit random numbers (t2tlite.layers.dropout)."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from t2tlite.layers.dropout import Dropout, dropout_16bit, keep_threshold


@pytest.mark.parametrize("rate, threshold", [
    (0.5, 0), (0.3, -13107), (0.1, -26214), (1 / 65536, -32767)])
def test_keep_threshold(rate, threshold):
  assert keep_threshold(rate) == threshold


@pytest.mark.parametrize("rate", [0.1, 0.3])
def test_keeps_one_minus_rate_scaled_and_zeroes_the_rest(rate):
  x = tf.random.stateless_uniform([1000, 1000], [1, 2], 1.0, 2.0)
  y = dropout_16bit(x, rate, tf.constant([3, 4], tf.int32)).numpy()
  kept = y != 0
  # 1e6 draws: the kept fraction's standard deviation is under 5e-4.
  assert abs(kept.mean() - (1 - rate)) < 0.0025
  np.testing.assert_allclose(y[kept], x.numpy()[kept] / (1 - rate), rtol=1e-6)


@pytest.mark.parametrize("shape", [[3, 5, 7], [1], [2, 3]])
@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_any_shape_odd_sizes_included(shape, dtype):
  x = tf.ones(shape, dtype)
  y = dropout_16bit(x, 0.5, tf.constant([5, 6], tf.int32))
  assert y.shape == x.shape and y.dtype == dtype
  assert set(np.unique(tf.cast(y, tf.float32).numpy())) <= {0.0, 2.0}


def test_the_two_halves_of_each_random_number_decide_different_elements():
  # With one 16-bit half ignored, elements 2i and 2i+1 would always agree.
  y = dropout_16bit(tf.ones([100_000]), 0.5, tf.constant([7, 8], tf.int32))
  pairs = tf.reshape(y, [-1, 2]).numpy() != 0
  agree = (pairs[:, 0] == pairs[:, 1]).mean()
  assert 0.48 < agree < 0.52


def test_layer_seeds_repeat_and_steps_differ():
  x = tf.ones([64, 64])
  masks = [Dropout(0.3, seed=11)(x, training=True) != 0 for _ in range(2)]
  np.testing.assert_array_equal(masks[0], masks[1])
  layer = Dropout(0.3, seed=11)
  first, second = (layer(x, training=True) != 0 for _ in range(2))
  assert not np.array_equal(first, second)


def test_inference_and_rate_zero_return_the_input():
  x = tf.random.normal([4, 6])
  np.testing.assert_array_equal(Dropout(0.3)(x, training=False), x)
  np.testing.assert_array_equal(Dropout(0.0)(x, training=True), x)


def test_gradient_is_the_mask_times_the_scale():
  x = tf.random.normal([32, 32])
  layer = Dropout(0.25, seed=3)
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = layer(x, training=True)
  grad = tape.gradient(y, x).numpy()
  np.testing.assert_allclose(grad, np.where(y.numpy() != 0, 1 / 0.75, 0.0))


def test_compiles_with_xla():
  layer = Dropout(0.3, seed=2)
  step = tf.function(lambda x: layer(x, training=True), jit_compile=True,
                     autograph=False)
  y = step(tf.ones([8, 33])).numpy()
  assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.7)}
  assert 0.5 < (y != 0).mean() < 0.9


def test_config_and_state_match_keras_dropout():
  ours, theirs = Dropout(0.3, seed=5), keras.layers.Dropout(0.3, seed=5)
  assert {k: v for k, v in ours.get_config().items() if k != "name"} == {
      k: v for k, v in theirs.get_config().items() if k != "name"}
  assert [v.shape for v in ours.variables] == [v.shape for v in theirs.variables]
  again = keras.saving.deserialize_keras_object(
      keras.saving.serialize_keras_object(ours))
  assert type(again) is Dropout and again.rate == 0.3


def test_rate_one_drops_everything():
  y = Dropout(1.0, seed=4)(tf.ones([5, 7]), training=True)
  np.testing.assert_array_equal(y, np.zeros([5, 7], np.float32))


def test_noise_shape_makes_one_decision_per_broadcast_slice():
  y = Dropout(0.5, noise_shape=[1, 64], seed=9)(tf.ones([16, 64]),
                                                training=True).numpy()
  # Every row has the same mask: a column is dropped or kept as a whole.
  np.testing.assert_array_equal(y, np.broadcast_to(y[:1], y.shape))
  assert set(np.unique(y)) == {0.0, 2.0}


def test_feed_forward_drops_relu_activations_only_when_training():
  from t2tlite.layers.feed_forward import FeedForward
  keras.utils.set_random_seed(5)
  x = tf.random.stateless_normal([2, 5, 8], seed=[1, 2])
  layer = FeedForward(d_ff=64, relu_dropout=0.5)
  inference = layer(x).numpy()
  assert np.abs(layer(x, training=True).numpy() - inference).max() > 1e-3
  plain = FeedForward(d_ff=64, relu_dropout=0.0)
  np.testing.assert_array_equal(plain(x, training=True), plain(x))
