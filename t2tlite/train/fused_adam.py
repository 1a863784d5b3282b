"""Keras Adam whose update is TensorFlow's fused Adam kernel.

Keras 3's Adam updates each variable with about eight element-wise ops, each
a pass over the variable's size in memory; TensorFlow's `ResourceApplyAdam`
does the same update in one multithreaded pass. The formula is Keras's own
(the bias correction folded into the rate, epsilon added after the square
root); results differ from Keras's ops by rounding only (a few ulps, from the
kernel's fused arithmetic). The optimizer's variables, their names and so its
checkpoints are Keras's.
"""
import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="t2tlite")
class FusedAdam(keras.optimizers.Adam):
  """`keras.optimizers.Adam` (same arguments and variables) updated by
  `tf.raw_ops.ResourceApplyAdam`. AMSGrad, and a variable that is not a
  TensorFlow resource variable, take Keras's own update."""

  def __init__(self, *args, name="adam", **kwargs):
    # Keras's name, so the optimizer's variables keep their paths.
    super().__init__(*args, name=name, **kwargs)

  def update_step(self, gradient, variable, learning_rate):
    """Updates `variable` (a tf.Variable, or a replica's component under a
    tf.distribute update) and its two moments from `gradient` (same shape)."""
    if self.amsgrad or not hasattr(variable, "handle"):
      return super().update_step(gradient, variable, learning_rate)
    dtype = variable.dtype
    index = self._get_variable_index(variable)
    momentum = self._momentums[index].value
    velocity = self._velocities[index].value
    local_step = tf.cast(self.iterations + 1, dtype)
    beta_1 = tf.cast(self.beta_1, dtype)
    beta_2 = tf.cast(self.beta_2, dtype)
    return tf.raw_ops.ResourceApplyAdam(
        var=variable.handle, m=momentum.handle, v=velocity.handle,
        beta1_power=tf.pow(beta_1, local_step),
        beta2_power=tf.pow(beta_2, local_step),
        lr=tf.cast(learning_rate, dtype), beta1=beta_1, beta2=beta_2,
        epsilon=tf.cast(self.epsilon, dtype), grad=tf.cast(gradient, dtype))
