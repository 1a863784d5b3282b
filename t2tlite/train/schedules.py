"""The learning-rate schedule of eq. (3) and the paper's Adam optimizer."""
import keras
import tensorflow as tf


def noam_learning_rate(step_num, d_model, warmup_steps, scale=1.0):
  """Eq. (3): scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).

  Args:
    step_num: 1-based training step (float or int tensor / number).
  """
  step = tf.cast(step_num, tf.float32)
  return (scale * d_model**-0.5 *
          tf.minimum(tf.math.rsqrt(step), step * warmup_steps**-1.5))


@keras.saving.register_keras_serializable(package="t2tlite")
class NoamSchedule(keras.optimizers.schedules.LearningRateSchedule):
  """Eq. (3) as a Keras schedule.

  Keras passes the optimizer's 0-based `iterations`; the k-th update (k from 1)
  uses lrate(k), so the first update already has a non-zero rate.
  """

  def __init__(self, d_model, warmup_steps, scale=1.0):
    self.d_model = d_model
    self.warmup_steps = warmup_steps
    self.scale = scale

  def __call__(self, step):
    return noam_learning_rate(tf.cast(step, tf.float32) + 1.0, self.d_model,
                              self.warmup_steps, self.scale)

  def get_config(self):
    return {"d_model": self.d_model, "warmup_steps": self.warmup_steps,
            "scale": self.scale}


def build_optimizer(hp):
  """Adam(beta1, beta2, epsilon) with the eq. (3) schedule, from `hp`."""
  return keras.optimizers.Adam(
      learning_rate=NoamSchedule(hp.d_model, hp.warmup_steps,
                                 hp.learning_rate_scale),
      beta_1=hp.adam_beta1, beta_2=hp.adam_beta2, epsilon=hp.adam_epsilon)
