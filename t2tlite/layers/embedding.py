"""Shared token embedding / pre-softmax projection (section 3.4) and positional
encodings (section 3.5)."""
import math

import keras
import tensorflow as tf

from t2tlite.layers import int8
from t2tlite.layers.linear import multiply, position_wise, read_weight
from t2tlite.layers.search_weights import FloatKernel, LaidOutKernel


@keras.saving.register_keras_serializable(package="t2tlite")
class SharedEmbedding(keras.layers.Layer):
  """One [vocab, d_model] matrix for encoder input, decoder input and the
  pre-softmax projection.

  Lookups are multiplied by sqrt(d_model). The matrix is initialised with
  standard deviation d_model**-0.5 (tensor2tensor's choice), so scaled lookups
  have unit variance, of the same order as the positional encodings.

  Args:
    vocab_size: number of ids (0 is padding).
    d_model: embedding size.
  """

  def __init__(self, vocab_size, d_model, **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.d_model = d_model

  def build(self, input_shape=None):
    self.embeddings = self.add_weight(
        name="embeddings", shape=(self.vocab_size, self.d_model),
        initializer=keras.initializers.RandomNormal(stddev=self.d_model**-0.5))

  def call(self, ids, search_weights=None):
    """int [batch, len] -> [batch, len, d_model] (scaled by sqrt(d_model)).

    search_weights: None, or the search's `SearchWeights`.
    """
    table = read_weight(self.embeddings, self.compute_dtype, search_weights)
    return tf.gather(table, ids) * tf.cast(math.sqrt(self.d_model),
                                           self.compute_dtype)

  def logits(self, x, search_weights=None):
    """[batch, len, d_model] -> float32 [batch, len, vocab].

    search_weights: None, or the search's `SearchWeights`; when they hold
    a variant of the output kernel (`output_kernels`, `int8_output_kernels`)
    the product is by that variant (`linear.multiply`).
    """
    kernel = None
    if search_weights is not None:
      kernel = search_weights.output_kernel(self.embeddings)
    if kernel is not None:
      return tf.cast(multiply(x, kernel), tf.float32)
    table = read_weight(self.embeddings, self.compute_dtype, search_weights)
    return tf.cast(position_wise(x, table, transpose_kernel=True), tf.float32)

  def output_kernels(self, values):
    """The tied output projection laid out for each decoding step, made once
    per search (BUILD_NOTES.md, "Decoding layouts"). float32: the table
    transposed, [d_model, vocab], a `FloatKernel` for a 2-D matmul without
    a transpose, the layout oneDNN runs fastest on AVX2 and AVX-512 alike.
    bfloat16: the table as it is, [1, vocab, d_model], a `LaidOutKernel`
    for a one-batch matmul with transpose_b, which oneDNN ran faster than
    the 2-D forms on a Zen 5, with the same results there.

    Args:
      values: {variable.path: weight in the compute dtype}, holding the
        table (`SearchWeights.values`).
    Returns:
      {the table's path: its variant}, for `SearchWeights.output_kernels`.
    """
    path = self.embeddings.path
    table = values[path]
    if table.dtype == tf.float32:
      return {path: FloatKernel(tf.transpose(table))}
    return {path: LaidOutKernel(table[tf.newaxis])}

  def int8_output_kernels(self, weights_first=False):
    """The output kernel ([d_model, vocab]) quantized for `int8.matmul` in
    the `weights_first` layout, which `logits` then uses.

    Returns:
      {the table's path: an `Int8Kernel` or `Int8WeightsFirstKernel`}, for
      `SearchWeights.output_kernels`.
    """
    return {self.embeddings.path: int8.quantize_kernel(
        self.embeddings, weights_first, transposed=True)}

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size, d_model=self.d_model)
    return config


@keras.saving.register_keras_serializable(package="t2tlite")
class PositionEncoding(keras.layers.Layer):
  """Adds positional encodings: fixed sinusoids or a learned table.

  Args:
    kind: "sinusoid" (paper) or "learned" (Table 3 row (E)).
    max_length: longest position a learned table covers. Sinusoids extrapolate:
      their table is computed for any length.
  Call: x [batch, len, d_model], optional int32 scalar `start` (the position of
  x[:, 0], for one-step decoding) -> x + PE[start : start + len].
  """

  def __init__(self, kind="sinusoid", max_length=256, **kwargs):
    super().__init__(**kwargs)
    if kind not in ("sinusoid", "learned"):
      raise ValueError(f"position encoding {kind!r}: expected sinusoid or "
                       "learned")
    self.kind = kind
    self.max_length = max_length

  def build(self, input_shape):
    d_model = input_shape[-1]
    if self.kind == "learned":
      self.table = self.add_weight(
          name="position_embeddings", shape=(self.max_length, d_model),
          initializer=keras.initializers.RandomNormal(stddev=d_model**-0.5))
    self.d_model = d_model

  def encodings(self, start, length):
    """float32 [length, d_model] encodings for positions start to
    start + length - 1."""
    # start + range(length), not range(start, ...): XLA needs Range's
    # arguments to be compile-time constants, and `start` is a loop variable.
    positions = start + tf.range(length)
    if self.kind == "learned":
      return tf.gather(tf.convert_to_tensor(self.table), positions)
    angles = (tf.cast(positions, tf.float32)[:, None] /
              tf.pow(10000.0, tf.range(0, self.d_model, 2, dtype=tf.float32) /
                     self.d_model)[None, :])
    # Interleave: [..., 2i] = sin, [..., 2i + 1] = cos.
    interleaved = tf.stack([tf.sin(angles), tf.cos(angles)], axis=-1)
    return tf.reshape(interleaved, [length, -1])[:, :self.d_model]

  def call(self, x, start=0):
    length = tf.shape(x)[1]
    return x + tf.cast(self.encodings(start, length), x.dtype)[tf.newaxis]

  def get_config(self):
    config = super().get_config()
    config.update(kind=self.kind, max_length=self.max_length)
    return config
