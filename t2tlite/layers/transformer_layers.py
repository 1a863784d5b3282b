"""Encoder and decoder layers (section 3.1): sublayers wrapped in residual
connection, dropout and layer normalization."""
import keras
import tensorflow as tf

from t2tlite.layers.attention import NEG_INF, MultiHeadAttention
from t2tlite.layers.feed_forward import FeedForward


@keras.saving.register_keras_serializable(package="t2tlite")
class Residual(keras.layers.Layer):
  """Residual connection, dropout and layer norm around one sublayer.

  post (paper): LayerNorm(x + Dropout(Sublayer(x))).
  pre: x + Dropout(Sublayer(LayerNorm(x))) (the stack then ends with a norm).

  Args:
    norm_position: "post" or "pre".
    dropout: P_drop, residual dropout rate (section 5.4).
    layer_norm_epsilon: LayerNorm's epsilon.
  """

  def __init__(self, norm_position="post", dropout=0.1,
               layer_norm_epsilon=1e-6, **kwargs):
    super().__init__(**kwargs)
    self.norm_position = norm_position
    self.dropout_rate = dropout
    self.layer_norm_epsilon = layer_norm_epsilon
    # Named explicitly: checkpoints key variables by their path.
    self.norm = keras.layers.LayerNormalization(
        epsilon=layer_norm_epsilon, name="layer_norm", dtype=self.dtype_policy)
    self.dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

  def build(self, x_shape, sublayer_output_shape=None):
    self.norm.build(x_shape)

  def sublayer_input(self, x):
    """What the sublayer reads: x itself (post-norm) or LayerNorm(x) (pre)."""
    return self.norm(x) if self.norm_position == "pre" else x

  def call(self, x, sublayer_output, training=False):
    """x, sublayer_output: [batch, len, d_model] -> [batch, len, d_model]."""
    y = x + self.dropout(sublayer_output, training=training)
    return y if self.norm_position == "pre" else self.norm(y)

  def get_config(self):
    config = super().get_config()
    config.update(norm_position=self.norm_position, dropout=self.dropout_rate,
                  layer_norm_epsilon=self.layer_norm_epsilon)
    return config


class _StackLayer(keras.layers.Layer):
  """Shared configuration of encoder and decoder layers."""

  def __init__(self, num_heads, d_k, d_v, d_ff, dropout=0.1,
               attention_dropout=0.0, relu_dropout=0.0, norm_position="post",
               layer_norm_epsilon=1e-6, **kwargs):
    super().__init__(**kwargs)
    self.num_heads, self.d_k, self.d_v, self.d_ff = num_heads, d_k, d_v, d_ff
    self.dropout = dropout
    self.attention_dropout = attention_dropout
    self.relu_dropout = relu_dropout
    self.norm_position = norm_position
    self.layer_norm_epsilon = layer_norm_epsilon

  def _attention(self, name):
    return MultiHeadAttention(self.num_heads, self.d_k, self.d_v,
                              self.attention_dropout, name=name,
                              dtype=self.dtype_policy)

  def _residual(self, name):
    return Residual(self.norm_position, self.dropout, self.layer_norm_epsilon,
                    name=name, dtype=self.dtype_policy)

  def _feed_forward(self):
    return FeedForward(self.d_ff, self.relu_dropout, name="feed_forward",
                       dtype=self.dtype_policy)

  def get_config(self):
    config = super().get_config()
    config.update(num_heads=self.num_heads, d_k=self.d_k, d_v=self.d_v,
                  d_ff=self.d_ff, dropout=self.dropout,
                  attention_dropout=self.attention_dropout,
                  relu_dropout=self.relu_dropout,
                  norm_position=self.norm_position,
                  layer_norm_epsilon=self.layer_norm_epsilon)
    return config


@keras.saving.register_keras_serializable(package="t2tlite")
class EncoderLayer(_StackLayer):
  """Self-attention then feed-forward, each in a Residual wrapper.

  Call: x [batch, src_len, d_model], bias float32 [batch, 1, 1, src_len]
  (padding) -> [batch, src_len, d_model] (and the self-attention weights
  [batch, heads, src_len, src_len] when return_attention_weights).
  """

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.self_attention = self._attention("self_attention")
    self.self_attention_residual = self._residual("self_attention_residual")
    self.feed_forward = self._feed_forward()
    self.feed_forward_residual = self._residual("feed_forward_residual")

  def build(self, x_shape):
    for layer in (self.self_attention_residual, self.feed_forward,
                  self.feed_forward_residual):
      layer.build(x_shape)
    self.self_attention.build(x_shape)

  def call(self, x, bias, training=False, return_attention_weights=False):
    h = self.self_attention_residual.sublayer_input(x)
    attended, weights = self.self_attention(
        h, bias=bias, training=training, return_attention_weights=True)
    x = self.self_attention_residual(x, attended, training=training)
    h = self.feed_forward_residual.sublayer_input(x)
    x = self.feed_forward_residual(x, self.feed_forward(h, training=training),
                                   training=training)
    return (x, weights) if return_attention_weights else x


@keras.saving.register_keras_serializable(package="t2tlite")
class DecoderLayer(_StackLayer):
  """Masked self-attention, encoder-decoder attention, feed-forward.

  Call: x [batch, tgt_len, d_model], memory [batch, src_len, d_model],
  self_bias (causal) [1, 1, tgt_len, tgt_len], memory_bias (padding)
  [batch, 1, 1, src_len] -> [batch, tgt_len, d_model] (and a dict of
  "self" and "encdec" attention weights when return_attention_weights).

  `init_cache` and `decode_step` run the same layer one position at a time
  with a key/value cache (growing or fixed-size), for beam search.
  """

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.self_attention = self._attention("self_attention")
    self.self_attention_residual = self._residual("self_attention_residual")
    self.encdec_attention = self._attention("encdec_attention")
    self.encdec_attention_residual = self._residual(
        "encdec_attention_residual")
    self.feed_forward = self._feed_forward()
    self.feed_forward_residual = self._residual("feed_forward_residual")

  def build(self, x_shape, memory_shape=None):
    for layer in (self.self_attention_residual, self.encdec_attention_residual,
                  self.feed_forward, self.feed_forward_residual):
      layer.build(x_shape)
    self.self_attention.build(x_shape)
    self.encdec_attention.build(x_shape, memory_shape or x_shape)

  def call(self, x, memory, self_bias, memory_bias, training=False,
           return_attention_weights=False):
    h = self.self_attention_residual.sublayer_input(x)
    attended, self_weights = self.self_attention(
        h, bias=self_bias, training=training, return_attention_weights=True)
    x = self.self_attention_residual(x, attended, training=training)
    h = self.encdec_attention_residual.sublayer_input(x)
    attended, encdec_weights = self.encdec_attention(
        h, memory, bias=memory_bias, training=training,
        return_attention_weights=True)
    x = self.encdec_attention_residual(x, attended, training=training)
    x = self._feed_forward_block(x, training)
    if return_attention_weights:
      return x, {"self": self_weights, "encdec": encdec_weights}
    return x

  def _feed_forward_block(self, x, training):
    h = self.feed_forward_residual.sublayer_input(x)
    return self.feed_forward_residual(
        x, self.feed_forward(h, training=training), training=training)

  def memory_keys_values(self, memory):
    """The encoder-decoder keys and values, computed once per search.

    Args:
      memory: [batch, src_len, d_model] encoder output.
    Returns:
      (k [batch, heads, src_len, d_k], v [batch, heads, src_len, d_v]).
    """
    return self.encdec_attention.project_memory(
        tf.cast(memory, self.compute_dtype))

  def init_cache(self, batch_size, max_decode_length=None):
    """The per-layer self-attention cache.

    Args:
      batch_size: int or int32 scalar, rows (hypotheses) decoded.
      max_decode_length: None for a cache that grows by one position per
        step (the least memory traffic), or an int for a fixed number of
        positions written in place (static shapes, for XLA).
    Returns:
      dict: "k" [batch_size, heads, positions, d_k] and "v" (positions 0
      for a growing cache, else max_decode_length zeros).
    """
    positions = 0 if max_decode_length is None else max_decode_length
    dtype = self.compute_dtype
    return {
        "k": tf.zeros([batch_size, self.num_heads, positions, self.d_k],
                      dtype),
        "v": tf.zeros([batch_size, self.num_heads, positions, self.d_v],
                      dtype),
    }

  def decode_step(self, x, step, cache, memory_k, memory_v, memory_bias,
                  growing=False):
    """One decoding position.

    Rows are hypotheses: batch * beams of them, the beams of batch element b
    in rows b * beams ... b * beams + beams - 1. They share b's encoder
    keys and values, which are therefore stored once per batch element.

    Args:
      x: [rows, 1, d_model] the input at position `step`.
      step: int32 scalar, the position being decoded.
      cache: this layer's dict from `init_cache` (or the previous step).
      memory_k, memory_v: from `memory_keys_values`, [batch, heads, src_len,
        d_k|d_v].
      memory_bias: float32 [batch, 1, 1, src_len].
      growing: the cache grows (`init_cache` without max_decode_length):
        it holds positions 0 .. step - 1.
    Returns:
      (y [rows, 1, d_model], the updated cache).
    """
    h = self.self_attention_residual.sublayer_input(x)
    q = self.self_attention.project_query(h)
    k_new, v_new = self.self_attention.project_memory(h)
    if growing:
      k = tf.concat([cache["k"], k_new], axis=2)
      v = tf.concat([cache["v"], v_new], axis=2)
      self_bias = None  # every cached position is visible
    else:
      # Write position `step` of the fixed-size cache in place.
      max_len = tf.shape(cache["k"])[2]
      at_step = tf.equal(tf.range(max_len), step)[tf.newaxis, tf.newaxis, :,
                                                  tf.newaxis]
      k = tf.where(at_step, k_new, cache["k"])
      v = tf.where(at_step, v_new, cache["v"])
      visible = tf.range(max_len) <= step
      self_bias = tf.where(visible, 0.0, NEG_INF)[tf.newaxis, tf.newaxis,
                                                   tf.newaxis, :]
    attended, _ = self.self_attention.attend(q, k, v, self_bias)
    x = self.self_attention_residual(x, attended)
    h = self.encdec_attention_residual.sublayer_input(x)
    # A batch element's beams are the query positions of one attention
    # over its memory: [batch, beams, d_model].
    grouped = tf.reshape(h, [tf.shape(memory_k)[0], -1, h.shape[-1]])
    attended, _ = self.encdec_attention.attend(
        self.encdec_attention.project_query(grouped), memory_k, memory_v,
        memory_bias)
    x = self.encdec_attention_residual(
        x, tf.reshape(attended, [-1, 1, attended.shape[-1]]))
    x = self._feed_forward_block(x, training=False)
    return x, dict(cache, k=k, v=v)
