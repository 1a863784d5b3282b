"""Dropout that decides two elements with each 32-bit random number.

keras.layers.Dropout (through tf.nn.experimental.stateless_dropout) draws one
32-bit Philox output per element, in the input's dtype, and compares it with
the rate. A keep/drop decision needs far fewer bits: here each 32-bit output
is split into two 16-bit numbers, so the generator does half the work. The
rate is rounded to a multiple of 2**-16 (at most 7.7e-6 off); Keras's
bfloat16 uniform numbers, with 8 significant bits, round it more coarsely.
"""
import keras
import tensorflow as tf

_LEVELS = 1 << 16  # values of a 16-bit random number


def keep_threshold(rate):
  """The int16 value at or above which an element is kept.

  A uniform 16-bit pattern read as int16 is uniform over [-32768, 32767], so
  keeping values >= -32768 + round(rate * 2**16) keeps 1 - rate of them.
  """
  return round(rate * _LEVELS) - _LEVELS // 2


def dropout_16bit(inputs, rate, seed):
  """inputs: any shape, floating; rate: float in (0, 1); seed: int32 [2].

  Returns inputs * 1 / (1 - rate) where kept, 0 elsewhere (same shape/dtype).
  """
  size = tf.size(inputs)
  bits = tf.random.stateless_uniform([(size + 1) // 2], seed, minval=None,
                                     maxval=None, dtype=tf.uint32)
  # [n, 2] int16 -> [2n] -> the first `size` (the whole tensor, so no copy,
  # when size is even).
  numbers = tf.reshape(tf.bitcast(bits, tf.int16), [-1])[:size]
  keep = tf.reshape(numbers, tf.shape(inputs)) >= keep_threshold(rate)
  scaled = inputs * tf.cast(1.0 / (1.0 - rate), inputs.dtype)
  return tf.where(keep, scaled, tf.zeros([], inputs.dtype))


@keras.saving.register_keras_serializable(package="t2tlite")
class Dropout(keras.layers.Dropout):
  """keras.layers.Dropout with 16-bit random numbers (see the module).

  Same constructor, config, seed state and variable names as Keras's layer,
  so checkpoints of either restore into the other. A `noise_shape` falls back
  to Keras's implementation.
  """

  def call(self, inputs, training=False):
    """inputs: any shape -> the same shape; dropout only when training."""
    if not training or self.rate == 0:
      return inputs
    if self.noise_shape is not None or self.rate >= 1:
      return super().call(inputs, training=training)
    seed = self.seed_generator.next()
    # Stateless ops want int32 seeds; the generator's state is int64.
    seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
    return dropout_16bit(inputs, self.rate, seed)
