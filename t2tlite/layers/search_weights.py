"""The weights one search reads (`Transformer.search_weights`): every model
weight in the compute dtype, and the variants of some kernels that a search
multiplies by instead, all made once, before its loop.

A NamedTuple of dicts keyed by variable path (`variable.path`), so that
tf.nest, tf.function, tf.while_loop and tf.cond take it as they take a
structure of tensors.
"""
import typing


class SearchWeights(typing.NamedTuple):
  """A search's weights, each field {variable.path: weight}.

  values: every model weight in the layer's compute dtype: a tensor (a
    read, or a cast under mixed precision), or the tf.Variable itself where
    it is kept (weights made once, `search.fixed_search_weights`).
  decoding_kernels: float32 searches: each [d_in, d_out] decoder kernel
    laid out [1, d_out, d_in] (`linear.decoding_kernels`).
  int8_kernels: int8 searches: each [d_in, d_out] decoder kernel quantized
    (`int8.quantize_kernel`'s dict of tensors; `linear.int8_kernels`).
  output_kernels: float searches: the tied output projection's kernel,
    [d_model, vocab] in float32 and [1, vocab, d_model] in 16 bits, under
    the path of its [vocab, d_model] embedding table
    (`SharedEmbedding.output_kernels`).
  int8_output_kernels: int8 searches: that kernel quantized, under the
    table's path (`SharedEmbedding.int8_output_kernels`).
  """
  values: dict
  decoding_kernels: dict
  int8_kernels: dict
  output_kernels: dict
  int8_output_kernels: dict

  @classmethod
  def of(cls, values, **variants):
    """`values` and the variant fields named in `variants`; the others
    empty."""
    fields = {name: {} for name in cls._fields[1:]}
    fields.update(variants)
    return cls(values, **fields)

  @property
  def int8(self):
    """Whether these are an int8 search's weights (a Python bool)."""
    return bool(self.int8_kernels) or bool(self.int8_output_kernels)

  def read(self, variable):
    """`variable` in the compute dtype."""
    return self.values[variable.path]

  def decoding_kernel(self, variable):
    """[1, d_out, d_in] of a [d_in, d_out] `variable`, or None."""
    return self.decoding_kernels.get(variable.path)

  def int8_kernel(self, variable):
    """A [d_in, d_out] `variable` quantized, or None."""
    return self.int8_kernels.get(variable.path)

  def output_kernel(self, table):
    """The output kernel of a [vocab, d_model] embedding `table`, or
    None."""
    return self.output_kernels.get(table.path)

  def int8_output_kernel(self, table):
    """That output kernel quantized, or None."""
    return self.int8_output_kernels.get(table.path)
