"""Scaled dot-product and multi-head attention (paper section 3.2).

Attention biases are additive float32 tensors broadcastable to
[batch, heads, query_len, key_len]: 0 where attending is allowed and a large
negative number where it is not (padding, future positions).
"""
import keras
import tensorflow as tf

from t2tlite.layers.linear import position_wise
from t2tlite.layers.weights import cast_weight

# Large enough that exp() underflows to exactly 0 in float32, small enough to
# stay finite when added to float32 scores.
NEG_INF = -1e9


def padding_bias(ids, pad_id=0):
  """Bias hiding padded keys.

  Args:
    ids: int [batch, key_len] token ids.
  Returns:
    float32 [batch, 1, 1, key_len].
  """
  is_pad = tf.cast(tf.equal(ids, pad_id), tf.float32)
  return (is_pad * NEG_INF)[:, tf.newaxis, tf.newaxis, :]


def causal_bias(length):
  """Bias hiding future positions: query i may see keys 0..i.

  Returns:
    float32 [1, 1, length, length].
  """
  allowed = tf.linalg.band_part(tf.ones([length, length]), -1, 0)
  return ((1.0 - allowed) * NEG_INF)[tf.newaxis, tf.newaxis]


def scaled_dot_product_attention(q, k, v, bias, dropout, training):
  """softmax(q k^T / sqrt(d_k) + bias) v, eq. (1).

  Args:
    q: [batch, heads, q_len, d_k]; k: [batch, heads, k_len, d_k];
    v: [batch, heads, k_len, d_v]; bias: float32 broadcastable to
    [batch, heads, q_len, k_len] or None; dropout: a keras Dropout layer
    applied to the weights.
  Returns:
    (outputs [batch, heads, q_len, d_v], weights float32
    [batch, heads, q_len, k_len]).
  """
  d_k = tf.cast(tf.shape(q)[-1], q.dtype)
  scores = tf.matmul(q * tf.math.rsqrt(d_k), k, transpose_b=True)
  # Softmax in float32: bf16/fp16 scores lose the -1e9 mask and precision.
  scores = tf.cast(scores, tf.float32)
  if bias is not None:
    # Keras autocasts float call arguments, so a bias may arrive in fp16
    # (where -1e9 became -inf) or bf16: bring it back to a finite float32.
    scores += tf.maximum(tf.cast(bias, tf.float32), NEG_INF)
  weights = tf.nn.softmax(scores, axis=-1)
  dropped = dropout(weights, training=training)
  return tf.matmul(tf.cast(dropped, v.dtype), v), weights


@keras.saving.register_keras_serializable(package="t2tlite")
class MultiHeadAttention(keras.layers.Layer):
  """Multi-head attention with separate per-head key and value sizes.

  MultiHead(Q, K, V) = Concat(head_1..head_h) W^O,
  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V). The projections have no bias
  (as in tensor2tensor; the paper lists only the matrices).

  Args:
    num_heads: h.
    d_k: query/key size per head.
    d_v: value size per head.
    attention_dropout: dropout rate on the attention weights.
  """

  def __init__(self, num_heads, d_k, d_v, attention_dropout=0.0, **kwargs):
    super().__init__(**kwargs)
    self.num_heads = num_heads
    self.d_k = d_k
    self.d_v = d_v
    self.attention_dropout = attention_dropout
    # float32: it drops the float32 attention weights.
    self.weights_dropout = keras.layers.Dropout(attention_dropout,
                                                dtype="float32")

  def build(self, query_shape, memory_shape=None):
    d_query = query_shape[-1]
    d_memory = (memory_shape or query_shape)[-1]
    init = keras.initializers.GlorotUniform()
    h = self.num_heads
    self.w_q = self.add_weight(name="w_q", shape=(d_query, h * self.d_k),
                               initializer=init)
    self.w_k = self.add_weight(name="w_k", shape=(d_memory, h * self.d_k),
                               initializer=init)
    self.w_v = self.add_weight(name="w_v", shape=(d_memory, h * self.d_v),
                               initializer=init)
    self.w_o = self.add_weight(name="w_o", shape=(h * self.d_v, d_query),
                               initializer=init)

  def _kernel(self, variable):
    # Explicit cast: the cached-decoding methods run outside __call__, where
    # Keras does not autocast variables to the compute dtype.
    return cast_weight(variable, self.compute_dtype)

  def _split_heads(self, x, depth):
    """[batch, len, heads * depth] -> [batch, heads, len, depth]."""
    batch, length = tf.shape(x)[0], tf.shape(x)[1]
    x = tf.reshape(x, [batch, length, self.num_heads, depth])
    return tf.transpose(x, [0, 2, 1, 3])

  def _merge_heads(self, x):
    """[batch, heads, len, d_v] -> [batch, len, heads * d_v]."""
    batch, length = tf.shape(x)[0], tf.shape(x)[2]
    x = tf.transpose(x, [0, 2, 1, 3])
    return tf.reshape(x, [batch, length, self.num_heads * self.d_v])

  def project_query(self, query):
    """[batch, q_len, d_model] -> [batch, heads, q_len, d_k]."""
    return self._split_heads(position_wise(query, self._kernel(self.w_q)),
                             self.d_k)

  def project_memory(self, memory):
    """Keys and values of `memory` [batch, k_len, d_model].

    Returns:
      (k [batch, heads, k_len, d_k], v [batch, heads, k_len, d_v]).
    """
    k = self._split_heads(position_wise(memory, self._kernel(self.w_k)),
                          self.d_k)
    v = self._split_heads(position_wise(memory, self._kernel(self.w_v)),
                          self.d_v)
    return k, v

  def attend(self, q, k, v, bias, training=False):
    """Attention over projected heads, then the output projection.

    Args:
      q: [batch, heads, q_len, d_k]; k, v: [batch, heads, k_len, d_k|d_v];
      bias: float32 broadcastable to [batch, heads, q_len, k_len] or None.
    Returns:
      (outputs [batch, q_len, d_model], weights float32
      [batch, heads, q_len, k_len]).
    """
    heads, weights = scaled_dot_product_attention(
        q, k, v, bias, self.weights_dropout, training)
    return (position_wise(self._merge_heads(heads), self._kernel(self.w_o)),
            weights)

  def call(self, query, memory=None, bias=None, training=False,
           return_attention_weights=False):
    """Attends from `query` [batch, q_len, d_model] over `memory`
    [batch, k_len, d_model] (self-attention when memory is None).

    Returns:
      [batch, q_len, d_model], and the float32 weights
      [batch, heads, q_len, k_len] when return_attention_weights.
    """
    memory = query if memory is None else memory
    k, v = self.project_memory(memory)
    outputs, weights = self.attend(self.project_query(query), k, v, bias,
                                   training)
    return (outputs, weights) if return_attention_weights else outputs

  def get_config(self):
    config = super().get_config()
    config.update(num_heads=self.num_heads, d_k=self.d_k, d_v=self.d_v,
                  attention_dropout=self.attention_dropout)
    return config
