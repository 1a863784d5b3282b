"""Scaled dot-product and multi-head attention (paper section 3.2).

Attention biases are additive float32 tensors broadcastable to
[batch, heads, query_len, key_len]: 0 where attending is allowed and
MASK_BIAS where it is not (padding, future positions).
"""
import keras
import tensorflow as tf

from t2tlite.ids import PAD_ID
from t2tlite.layers.dropout import Dropout
from t2tlite.layers import shapes
from t2tlite.layers.linear import linear, multiply

# The bias of a hidden key. Large enough that exp() underflows to exactly 0
# in float32 next to any real score, small enough to stay finite when added
# to float32 scores (the search's scores use their own, smaller value:
# step_rules.IMPOSSIBLE_LOG_PROB).
MASK_BIAS = -1e9


def padding_bias(ids, pad_id=PAD_ID):
  """Bias hiding padded keys.

  Args:
    ids: int [batch, key_len] token ids.
  Returns:
    float32 [batch, 1, 1, key_len].
  """
  is_pad = tf.cast(tf.equal(ids, pad_id), tf.float32)
  return (is_pad * MASK_BIAS)[:, tf.newaxis, tf.newaxis, :]


def causal_bias(length):
  """Bias hiding future positions: query i may see keys 0..i.

  Returns:
    float32 [1, 1, length, length].
  """
  allowed = tf.linalg.band_part(tf.ones([length, length]), -1, 0)
  return ((1.0 - allowed) * MASK_BIAS)[tf.newaxis, tf.newaxis]


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
  # A constant where d_k is known (graph optimization folds the rsqrt):
  # no Shape, slice and cast at every step of a search.
  d_k = tf.cast(q.shape[-1] or tf.shape(q)[-1], q.dtype)
  scores = tf.matmul(q * tf.math.rsqrt(d_k), k, transpose_b=True)
  # Softmax in float32: bf16/fp16 scores lose the -1e9 mask and precision.
  scores = tf.cast(scores, tf.float32)
  if bias is not None:
    # Keras autocasts float call arguments, so a bias may arrive in fp16
    # (where -1e9 became -inf) or bf16: bring it back to a finite float32.
    scores += tf.maximum(tf.cast(bias, tf.float32), MASK_BIAS)
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
    self.weights_dropout = Dropout(attention_dropout, dtype="float32")

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

  def _split_heads(self, x, depth):
    """[batch, len, heads * depth] -> [batch, heads, len, depth]."""
    x = shapes.reshape(x, [shapes.dim(x, 0), shapes.dim(x, 1),
                           self.num_heads, depth])
    return tf.transpose(x, [0, 2, 1, 3])

  def _merge_heads(self, x):
    """[batch, heads, len, d_v] -> rows [batch * len, heads * d_v]."""
    x = tf.transpose(x, [0, 2, 1, 3])
    return tf.reshape(x, [-1, self.num_heads * self.d_v])

  def _project(self, x, variable, depth, search_weights, groups=None):
    """x [rows, len, d] mapped by `variable` into heads [rows, heads, len,
    depth], or with `groups` into [groups, heads, rows * len / groups,
    depth] (consecutive rows as positions of one group; x may then be
    [rows * len, d])."""
    return self._heads(linear(x, variable, self.compute_dtype,
                              search_weights), depth, groups)

  def _heads(self, y, depth, groups=None):
    """A map's output [rows, len, heads * depth] as `_project` gives it."""
    if groups is not None:  # one reshape into [groups, -1, heads, depth]
      y = tf.reshape(y, [groups, -1, self.num_heads, depth])
      return tf.transpose(y, [0, 2, 1, 3])
    return self._split_heads(y, depth)

  def input_maps(self):
    """(w_q, w_k, w_v): the kernels that read a self-attention's input, which
    a search may multiply by in one product (`SearchWeights.
    fused_kernel`)."""
    return (self.w_q, self.w_k, self.w_v)

  def _project_query_keys_values(self, query, search_weights, groups):
    """The queries, keys and values of `query` [rows, len, d_model] as
    `_project` gives them: one product where the search's weights hold
    one kernel for the three maps (int8), else three."""
    fused = (None if search_weights is None else
             search_weights.fused_kernel(self.input_maps()))
    if fused is None:
      q = self._project(query, self.w_q, self.d_k, search_weights, groups)
      return (q, *self.project_memory(query, search_weights, groups))
    h = self.num_heads
    qkv = tf.split(multiply(query, fused),
                   [h * self.d_k, h * self.d_k, h * self.d_v], axis=-1)
    return tuple(self._heads(y, depth, groups) for y, depth in
                 zip(qkv, (self.d_k, self.d_k, self.d_v)))

  def project_memory(self, memory, search_weights=None, groups=None):
    """Keys and values of `memory` [batch, k_len, d_model].

    Returns:
      (k [batch, heads, k_len, d_k], v [batch, heads, k_len, d_v]); with
      `groups`, grouped as `_project` does.
    """
    return (self._project(memory, self.w_k, self.d_k, search_weights, groups),
            self._project(memory, self.w_v, self.d_v, search_weights, groups))

  def call(self, query, memory=None, bias=None, training=False):
    """Attends from `query` over itself or over `memory`.

    Args:
      query: [rows, q_len, d_model].
      memory: None (self-attention) or [rows, k_len, d_model].
      bias: float32 broadcastable to [rows, heads, q_len, k_len], or None.
    Returns:
      (outputs [rows, q_len, d_model], float32 weights
      [rows, heads, q_len, k_len]).
    """
    q = self._project(query, self.w_q, self.d_k, None)
    k, v = self.project_memory(query if memory is None else memory)
    return self._attend(q, k, v, bias, training, None)

  def attend_self(self, query, bias, search_weights):
    """Self-attention of `query` as an encoder layer of a search computes
    it: the maps multiplied by the search's kernels (for int8 one product
    for the queries, keys and values, `SearchWeights.fused_kernel`).

    Args:
      query: [batch, len, d_model].
      bias: float32 broadcastable to [batch, heads, len, len], or None.
      search_weights: the search's `SearchWeights`.
    Returns:
      (outputs [batch, len, d_model], float32 weights
      [batch, heads, len, len]).
    """
    q, k, v = self._project_query_keys_values(query, search_weights, None)
    return self._attend(q, k, v, bias, False, search_weights)

  def attend_to_keys_values(self, query, keys_values, bias=None,
                            search_weights=None):
    """Attends from `query` over keys and values computed once per search
    (`project_memory`).

    Args:
      query: [rows, q_len, d_model].
      keys_values: (k [batch, heads, k_len, d_k], v [batch, heads, k_len,
        d_v]), `batch` dividing `rows`: the rows of one batch element (its
        beams) are consecutive and attend to its keys as query positions of
        one attention, so beams share one copy of the keys and values.
      bias: float32 broadcastable to [batch, heads, q_len * rows / batch,
        k_len], or None.
      search_weights: None, or the search's `SearchWeights`.
    Returns:
      (outputs [rows, q_len, d_model], float32 weights
      [batch, heads, q_len * rows / batch, k_len]).
    """
    k, v = keys_values
    # The maps multiply the queries as rows [rows * q_len, d_model] (2-D
    # products in every precision), grouped by batch element between them.
    rows = shapes.reshape(query, [-1, query.shape[-1]])
    q = self._project(rows, self.w_q, self.d_k, search_weights,
                      groups=tf.shape(k)[0])
    outputs, weights = self._attend(
        q, k, v, bias, False, search_weights,
        [shapes.dim(query, 0), shapes.dim(query, 1)])
    return outputs, weights

  def attend_cached(self, query, cache, bias=None, step=None,
                    search_weights=None):
    """Self-attention of one position with the keys and values of the
    earlier ones.

    Args:
      query: [rows, 1, d_model].
      cache: {"k": [rows, heads, positions, d_k], "v": [rows, heads,
        positions, d_v]}, the keys and values of the earlier positions. The
        query's own are appended (step None: a growing cache), or written at
        position `step` of a fixed-size cache whose later positions are then
        hidden (static shapes, for XLA). A growing cache may also hold
        `batch` rows for rows = batch * beams queries: {"k": [batch, heads,
        positions * beams, d_k], ...}, position-major. Then a batch
        element's beams attend as query positions of one attention, append
        their keys and values side by side, and `bias` says which cached
        positions belong to each beam's hypothesis, so a search never
        reorders the cache (`Transformer.decode_step`).
      bias: float32, see `cache`; None for a fixed-size or row cache.
      step: int32 scalar, the position written in a fixed-size cache; None
        for a growing one.
      search_weights: None, or the search's `SearchWeights`.
    Returns:
      (outputs [rows, 1, d_model], float32 weights [groups, heads,
      rows / groups, positions + 1] (groups: the cache's rows), the updated
      cache).
    """
    # A per-batch cache groups the rows after the projections, which keep
    # the [rows, 1, d_model] inputs (and so the kernels) of a row cache.
    groups = tf.shape(cache["k"])[0] if step is None else None
    q, k, v = self._project_query_keys_values(query, search_weights,
                                              groups)
    k, v, bias = self._with_cache(cache, step, k, v, bias)
    length = shapes.dim(query, 1)
    if self.compute_dtype != "float32" and not (search_weights is not None
                                                and search_weights.int8):
      # [rows, len, d_model] with len unknown statically (-1): a bfloat16
      # step multiplies the later maps' [rows, len, d] as 2-D products,
      # not as batch matmuls of [rows, 1, d] (another summing order:
      # `linear.position_wise`; the recorded bfloat16 outputs are those).
      length = -1
    outputs, weights = self._attend(
        q, k, v, bias, False, search_weights, [shapes.dim(query, 0), length])
    return outputs, weights, dict(cache, k=k, v=v)

  def _attend(self, q, k, v, bias, training, search_weights, leading=None):
    """Heads q, k, v -> (outputs [*leading, d_model], float32 weights).

    leading: the outputs' leading axes as `shapes.reshape` takes them: the
    query's [rows, q_len] (grouped queries go back to their rows); None:
    q's [batch, q_len].

    The output projection multiplies rows [rows * q_len, heads * d_v]: a
    2-D product in every precision (a bfloat16 batch matmul of [rows, 1,
    d] sums in another order; `linear.position_wise`).
    """
    heads, weights = scaled_dot_product_attention(
        q, k, v, bias, self.weights_dropout, training)
    outputs = linear(self._merge_heads(heads), self.w_o, self.compute_dtype,
                     search_weights)
    if leading is None:
      leading = [shapes.dim(q, 0), shapes.dim(q, 2)]
    outputs = shapes.reshape(outputs, leading + [outputs.shape[-1]])
    return outputs, weights

  @staticmethod
  def _with_cache(cache, step, k_new, v_new, bias):
    """Keys and values of every position so far, and the bias hiding the
    ones not written yet (for a growing cache, which holds no others, the
    `bias` given: the beams' lineage, or None)."""
    if step is None:
      return (tf.concat([cache["k"], k_new], axis=2),
              tf.concat([cache["v"], v_new], axis=2), bias)
    max_len = tf.shape(cache["k"])[2]
    positions = tf.range(max_len)
    at_step = tf.equal(positions, step)[tf.newaxis, tf.newaxis, :,
                                        tf.newaxis]
    visible = positions <= step
    bias = tf.where(visible, 0.0, MASK_BIAS)[tf.newaxis, tf.newaxis,
                                              tf.newaxis, :]
    return (tf.where(at_step, k_new, cache["k"]),
            tf.where(at_step, v_new, cache["v"]), bias)

  def get_config(self):
    config = super().get_config()
    config.update(num_heads=self.num_heads, d_k=self.d_k, d_v=self.d_v,
                  attention_dropout=self.attention_dropout)
    return config
