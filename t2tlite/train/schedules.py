"""The learning-rate schedule of eq. (3) and the paper's Adam optimizer."""
import keras
import tensorflow as tf

from t2tlite.train.fused_adam import FusedAdam


def noam_learning_rate(step_num, d_model, warmup_steps, scale=1.0):
  """Eq. (3): scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).

  Args:
    step_num: 1-based training step (float or int tensor / number).
  """
  step = tf.cast(step_num, tf.float32)
  return (scale * d_model**-0.5 *
          tf.minimum(tf.math.rsqrt(step), step * warmup_steps**-1.5))


def cooldown_factor(step_num, train_steps, cooldown_steps):
  """1 until the last `cooldown_steps` of `train_steps`, then linearly down:
  (train_steps - step + 1) / cooldown_steps, so the last update keeps
  1 / cooldown_steps of the rate. 1 throughout when cooldown_steps <= 0.
  Each argument may be a number or a tensor."""
  cooldown = tf.cast(cooldown_steps, tf.float32)
  left = tf.cast(train_steps, tf.float32) - tf.cast(step_num, tf.float32) + 1
  some = tf.maximum(cooldown, 1.0)  # no division by zero in the unused branch
  return tf.where(cooldown > 0,
                  tf.clip_by_value(left / some, 1.0 / some, 1.0), 1.0)


@keras.saving.register_keras_serializable(package="t2tlite")
class NoamSchedule(keras.optimizers.schedules.LearningRateSchedule):
  """Eq. (3) as a Keras schedule, with an optional linear cool-down to the
  end of training (`cooldown_factor`; off by default, as in the paper).

  Keras passes the optimizer's 0-based `iterations`; the k-th update (k from 1)
  uses lrate(k), so the first update already has a non-zero rate.
  """

  def __init__(self, d_model, warmup_steps, scale=1.0, train_steps=0,
               cooldown_steps=0):
    self.d_model = d_model
    self.warmup_steps = warmup_steps
    self.scale = scale
    self.train_steps = train_steps
    self.cooldown_steps = cooldown_steps
    # The same two numbers, read by the traced rate: a time-budgeted run
    # moves its cool-down (set_length) without tracing its training step
    # again, which took seconds at each re-estimate of its plan.
    self._length = tf.Variable([float(train_steps), float(cooldown_steps)],
                               trainable=False, name="noam_run_length")

  def set_length(self, train_steps, cooldown_steps):
    """Moves the cool-down to the last `cooldown_steps` of `train_steps`."""
    self.train_steps, self.cooldown_steps = train_steps, cooldown_steps
    self._length.assign([float(train_steps), float(cooldown_steps)])

  def __call__(self, step):
    step_num = tf.cast(step, tf.float32) + 1.0
    return (noam_learning_rate(step_num, self.d_model, self.warmup_steps,
                               self.scale) *
            cooldown_factor(step_num, self._length[0], self._length[1]))

  def get_config(self):
    return {"d_model": self.d_model, "warmup_steps": self.warmup_steps,
            "scale": self.scale, "train_steps": self.train_steps,
            "cooldown_steps": self.cooldown_steps}


def build_optimizer(hp):
  """Adam(beta1, beta2, epsilon) with the eq. (3) schedule, from `hp`; the
  cool-down covers at most the whole run (train_steps). The update is
  TensorFlow's fused kernel (fused_adam.py)."""
  return FusedAdam(
      learning_rate=NoamSchedule(hp.d_model, hp.warmup_steps,
                                 hp.learning_rate_scale, hp.train_steps,
                                 min(hp.learning_rate_cooldown_steps,
                                     hp.train_steps)),
      beta_1=hp.adam_beta1, beta_2=hp.adam_beta2, epsilon=hp.adam_epsilon)


def set_train_steps(optimizer, train_steps, cooldown_steps):
  """Moves the cool-down of `build_optimizer`'s schedule to end at
  `train_steps` (a time-budgeted run fixes its length after its first
  steps). A tf.function that computes the rate reads the new length
  without being traced again."""
  schedule = optimizer._learning_rate  # Keras keeps the schedule there
  if not isinstance(schedule, NoamSchedule):
    raise TypeError(f"expected build_optimizer's NoamSchedule, got "
                    f"{type(schedule).__name__}")
  schedule.set_length(train_steps, min(cooldown_steps, train_steps))
