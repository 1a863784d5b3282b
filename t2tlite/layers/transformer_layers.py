"""Encoder and decoder layers (section 3.1): sublayers wrapped in residual
connection, dropout and layer normalization."""
import keras
import tensorflow as tf

from t2tlite.layers.attention import MultiHeadAttention
from t2tlite.layers.dropout import Dropout
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
    self.dropout = Dropout(dropout, dtype=self.dtype_policy)

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
  """What encoder and decoder layers share: the sizes of section 3 and the
  way their sublayers are made.

  Args:
    num_heads, d_k, d_v: attention heads and their key/value sizes.
    d_ff: inner size of the feed-forward sublayer.
    dropout: residual dropout (P_drop).
    attention_dropout, relu_dropout: dropout inside the sublayers.
    norm_position: "post" (paper) or "pre".
    layer_norm_epsilon: LayerNorm's epsilon.
  """

  def __init__(self, num_heads, d_k, d_v, d_ff, dropout=0.1,
               attention_dropout=0.0, relu_dropout=0.0, norm_position="post",
               layer_norm_epsilon=1e-6, **kwargs):
    super().__init__(**kwargs)
    self.num_heads, self.d_k, self.d_v, self.d_ff = num_heads, d_k, d_v, d_ff
    self.dropout_rate = dropout
    self.attention_dropout = attention_dropout
    self.relu_dropout = relu_dropout
    self.norm_position = norm_position
    self.layer_norm_epsilon = layer_norm_epsilon

  def _attention(self, name):
    return MultiHeadAttention(self.num_heads, self.d_k, self.d_v,
                              self.attention_dropout, name=name,
                              dtype=self.dtype_policy)

  def _residual(self, name):
    return Residual(self.norm_position, self.dropout_rate,
                    self.layer_norm_epsilon, name=name,
                    dtype=self.dtype_policy)

  def _feed_forward(self):
    return FeedForward(self.d_ff, self.relu_dropout, name="feed_forward",
                       dtype=self.dtype_policy)

  def _feed_forward_block(self, x, training, search_weights=None):
    h = self.feed_forward_residual.sublayer_input(x)
    if search_weights is None:
      out = self.feed_forward(h, training=training)
    else:
      # A search step calls the layer's `call` itself: Keras' __call__
      # would cast every float32 tensor of the search's weights (the int8
      # scales among them) to a mixed policy's compute dtype at every
      # step. h is in the compute dtype already.
      out = self.feed_forward.call(h, search_weights=search_weights)
    return self.feed_forward_residual(x, out, training=training)

  def get_config(self):
    config = super().get_config()
    config.update(num_heads=self.num_heads, d_k=self.d_k, d_v=self.d_v,
                  d_ff=self.d_ff, dropout=self.dropout_rate,
                  attention_dropout=self.attention_dropout,
                  relu_dropout=self.relu_dropout,
                  norm_position=self.norm_position,
                  layer_norm_epsilon=self.layer_norm_epsilon)
    return config


@keras.saving.register_keras_serializable(package="t2tlite")
class EncoderLayer(_StackLayer):
  """Self-attention then feed-forward, each in a Residual wrapper.

  Call: x [batch, src_len, d_model], bias float32 [batch, 1, 1, src_len]
  (padding) -> (y [batch, src_len, d_model], the self-attention weights
  float32 [batch, heads, src_len, src_len]).
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

  def call(self, x, bias, training=False):
    h = self.self_attention_residual.sublayer_input(x)
    attended, weights = self.self_attention(h, bias=bias, training=training)
    x = self.self_attention_residual(x, attended, training=training)
    return self._feed_forward_block(x, training), weights

  def call_search(self, x, bias, search_weights):
    """`call` (inference) with the maps multiplied by the search's kernels
    (`SearchWeights`: int8 ones for an int8 search's encoder)."""
    h = self.self_attention_residual.sublayer_input(x)
    attended, weights = self.self_attention.attend_self(h, bias,
                                                        search_weights)
    x = self.self_attention_residual(x, attended)
    return self._feed_forward_block(x, False, search_weights), weights


@keras.saving.register_keras_serializable(package="t2tlite")
class DecoderLayer(_StackLayer):
  """Masked self-attention, encoder-decoder attention, feed-forward.

  `call` runs teacher-forced (all positions at once, causal self_bias);
  `call_cached` runs one position of a search, with a self-attention cache
  (`init_cache`) and the encoder keys/values computed once
  (`memory_keys_values`). Each returns one shape of result.
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

  def call(self, x, memory, self_bias=None, memory_bias=None, training=False):
    """Teacher-forced: every position at once.

    Args:
      x: [batch, tgt_len, d_model].
      memory: the encoder output [batch, src_len, d_model].
      self_bias: float32 [1, 1, tgt_len, tgt_len] causal mask, or None.
      memory_bias: float32 [batch, 1, 1, src_len] (padding), or None.
    Returns:
      (y [batch, tgt_len, d_model], {"self": float32 [batch, heads,
      tgt_len, tgt_len], "encdec": float32 [batch, heads, tgt_len,
      src_len]}).
    """
    h = self.self_attention_residual.sublayer_input(x)
    attended, self_weights = self.self_attention(h, bias=self_bias,
                                                 training=training)
    x = self.self_attention_residual(x, attended, training=training)
    h = self.encdec_attention_residual.sublayer_input(x)
    attended, encdec_weights = self.encdec_attention(
        h, memory, bias=memory_bias, training=training)
    x = self.encdec_attention_residual(x, attended, training=training)
    x = self._feed_forward_block(x, training)
    return x, {"self": self_weights, "encdec": encdec_weights}

  def call_cached(self, x, memory_keys_values, cache, self_bias=None,
                  memory_bias=None, step=None, search_weights=None):
    """One position of a search (inference: no dropout).

    Args:
      x: [rows, 1, d_model].
      memory_keys_values: the encoder keys and values from
        `memory_keys_values` ([batch, ...], batch dividing rows: a batch
        element's beams are consecutive rows and share them).
      cache: this layer's dict from `init_cache` (or the previous step):
        the self-attention keys and values of earlier positions.
      self_bias: with a per-batch growing cache, which cached positions
        each beam sees (`MultiHeadAttention.attend_cached`); else None.
      memory_bias: float32 [batch, 1, 1, src_len] (padding).
      step: int32 scalar, the position of x in a fixed-size cache; None for
        a growing cache.
      search_weights: None, or the search's `SearchWeights`.
    Returns:
      (y [rows, 1, d_model], {"self": ..., "encdec": ...} float32 attention
      weights, the updated cache).
    """
    h = self.self_attention_residual.sublayer_input(x)
    attended, self_weights, new_cache = self.self_attention.attend_cached(
        h, cache, self_bias, step, search_weights)
    x = self.self_attention_residual(x, attended)
    h = self.encdec_attention_residual.sublayer_input(x)
    attended, encdec_weights = self.encdec_attention.attend_to_keys_values(
        h, memory_keys_values, memory_bias, search_weights)
    x = self.encdec_attention_residual(x, attended)
    x = self._feed_forward_block(x, False, search_weights)
    return x, {"self": self_weights, "encdec": encdec_weights}, new_cache

  def memory_keys_values(self, memory, search_weights=None):
    """The encoder-decoder keys and values, computed once per search.

    Args:
      memory: [batch, src_len, d_model] encoder output.
    Returns:
      (k [batch, heads, src_len, d_k], v [batch, heads, src_len, d_v]).
    """
    return self.encdec_attention.project_memory(
        tf.cast(memory, self.compute_dtype), search_weights)

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
        "k": tf.zeros([batch_size, self.num_heads, positions, self.d_k], dtype),
        "v": tf.zeros([batch_size, self.num_heads, positions, self.d_v], dtype),
    }
