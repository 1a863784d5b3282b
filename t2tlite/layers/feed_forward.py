"""Position-wise feed-forward network, eq. (2): max(0, x W1 + b1) W2 + b2."""
import keras
import tensorflow as tf

from t2tlite.layers.dropout import Dropout
from t2tlite.layers import int8, shapes
from t2tlite.layers.linear import linear, read_weight, with_leading_axes
from t2tlite.layers.search_weights import Int8WeightsFirstKernel


@keras.saving.register_keras_serializable(package="t2tlite")
class FeedForward(keras.layers.Layer):
  """Two linear maps with a ReLU between, applied to each position.

  Args:
    d_ff: inner size.
    relu_dropout: dropout on the ReLU activations.
  Call: [batch, len, d_model] -> [batch, len, d_model]; optional
  search_weights (linear.read_weight); with weights-first int8 kernels the
  two maps run as one chain (`int8.weights_first_feed_forward`).
  """

  def __init__(self, d_ff, relu_dropout=0.0, **kwargs):
    super().__init__(**kwargs)
    self.d_ff = d_ff
    self.relu_dropout = relu_dropout
    self.dropout = Dropout(relu_dropout, dtype=self.dtype_policy)

  def build(self, input_shape):
    d_model = input_shape[-1]
    init = keras.initializers.GlorotUniform()
    self.w1 = self.add_weight(name="w1", shape=(d_model, self.d_ff),
                              initializer=init)
    self.b1 = self.add_weight(name="b1", shape=(self.d_ff,),
                              initializer="zeros")
    self.w2 = self.add_weight(name="w2", shape=(self.d_ff, d_model),
                              initializer=init)
    self.b2 = self.add_weight(name="b2", shape=(d_model,), initializer="zeros")

  def call(self, x, training=False, search_weights=None):
    dtype = self.compute_dtype

    def bias(variable):
      return read_weight(variable, dtype, search_weights)

    if search_weights is not None:
      w1, w2 = (search_weights.kernel(w) for w in (self.w1, self.w2))
      if all(isinstance(w, Int8WeightsFirstKernel) for w in (w1, w2)):
        out = int8.weights_first_feed_forward(
            shapes.reshape(x, [-1, x.shape[-1]]), w1, bias(self.b1), w2,
            bias(self.b2))
        return with_leading_axes(out, x, out.shape[-1])
    hidden = tf.nn.relu(linear(x, self.w1, dtype, search_weights) +
                        bias(self.b1))
    hidden = self.dropout(hidden, training=training)
    return linear(hidden, self.w2, dtype, search_weights) + bias(self.b2)

  def get_config(self):
    config = super().get_config()
    config.update(d_ff=self.d_ff, relu_dropout=self.relu_dropout)
    return config
