"""The weights one search reads (`Transformer.search_weights`): every model
weight in the compute dtype, and for some kernels a variant that a search
multiplies by instead, all made once, before its loop.

Each variant is its own type, saying what the kernel is:

    FloatKernel             [d_in, d_out] in the compute dtype, multiplied
                            as stored (`linear.position_wise`)
    LaidOutKernel           [1, d_out, d_in]: a one-batch matmul with
                            transpose_b (`linear.laid_out_product`)
    Int8Kernel              int8 [d_in, d_out], multiplied in int8
    Int8WeightsFirstKernel  uint8 [d_out, d_in], the int8 product's first
                            operand (`t2tlite.layers.int8`)
    Int8HeldKernel          an Int8Kernel that never changes, which oneDNN
                            lays out once and keeps (weights made once)

`linear.multiply` multiplies by any of them. An ensemble's weights are an
`EnsembleWeights`, one `SearchWeights` per member.

All are NamedTuples (of dicts of them), so that tf.nest, tf.function,
tf.while_loop, tf.cond and a Keras layer's call take them as they take a
structure of tensors (under a mixed policy Keras casts the float tensors of
a layer call's arguments, these among them: recorded outputs depend on it).
"""
import typing


class FloatKernel(typing.NamedTuple):
  """A [d_in, d_out] kernel multiplied as it is stored."""
  kernel: typing.Any


class LaidOutKernel(typing.NamedTuple):
  """A [d_in, d_out] kernel stored [1, d_out, d_in], for a one-batch matmul
  with transpose_b (BUILD_NOTES.md, "Decoding layouts")."""
  kernel: typing.Any


class Int8Kernel(typing.NamedTuple):
  """A [d_in, d_out] kernel quantized per output column
  (`int8.quantize_kernel`).

  kernel: int8 [d_in, d_out], kernel / column max, times 127.
  column_sums: float32 [d_out], its columns summed, divided by 127.
  scales: float32 [d_out], the column maxima.
  """
  kernel: typing.Any
  column_sums: typing.Any
  scales: typing.Any


class Int8WeightsFirstKernel(typing.NamedTuple):
  """A [d_in, d_out] kernel quantized per output column, laid out as the
  int8 product's first operand (`int8.quantize_kernel(...,
  weights_first=True)`: fast with VNNI).

  weights_first: uint8 [d_out, d_in], the transposed int8 kernel plus 128.
  scales: float32 [d_out], the column maxima.
  """
  weights_first: typing.Any
  scales: typing.Any


class Int8HeldKernel(typing.NamedTuple):
  """An `Int8Kernel` whose values stay the same for as long as any graph
  that multiplies by it lives: a search's weights made once
  (`search.fixed_search_weights`), captured by a Decoder's graph (an
  export keeps core ops only). oneDNN copies it into its own layout at the
  graph's first product and keeps that copy (`int8.held_product`), where
  an `Int8Kernel` is copied at every product. Never a tf.function argument
  that a later call changes: that call would multiply by the first one's
  copy.

  kernel, column_sums, scales: as `Int8Kernel`'s.
  """
  kernel: typing.Any
  column_sums: typing.Any
  scales: typing.Any


INT8_KERNELS = (Int8Kernel, Int8WeightsFirstKernel, Int8HeldKernel)


class SearchWeights(typing.NamedTuple):
  """A model's weights as one search reads them.

  values: {variable.path: every model weight in the layer's compute dtype}:
    a tensor (a read, or a cast under mixed precision), or the tf.Variable
    itself where it is kept (weights made once,
    `search.fixed_search_weights`).
  kernels: {variable.path: the variant of a [d_in, d_out] decoder kernel}
    (`linear.decoding_kernels`, `linear.int8_kernels`); a kernel without
    one is multiplied as its value (`kernel`). Also {`fused_key`: one
    variant for several kernels of one input} (`fused_kernel`).
  output_kernels: {the [vocab, d_model] embedding table's path: the
    variant of the tied output projection's [d_model, vocab] kernel}
    (`SharedEmbedding.output_kernels`, `SharedEmbedding.
    int8_output_kernels`).
  """
  values: dict
  kernels: dict
  output_kernels: dict

  @property
  def int8(self):
    """Whether these are an int8 search's weights (a Python bool)."""
    return any(isinstance(kernel, INT8_KERNELS) for kernel in
               (*self.kernels.values(), *self.output_kernels.values()))

  def read(self, variable):
    """`variable` in the compute dtype."""
    return self.values[variable.path]

  def kernel(self, variable):
    """The variant a search multiplies a [d_in, d_out] `variable` by: its
    own, else its value as a `FloatKernel`."""
    return self.kernels.get(variable.path) or FloatKernel(
        self.values[variable.path])

  def fused_kernel(self, variables):
    """The one kernel that multiplies by several [d_in, d_out] `variables`
    at once (their outputs side by side), or None (`fused_key`)."""
    return self.kernels.get(fused_key(variables))

  def output_kernel(self, table):
    """The variant of the output kernel of a [vocab, d_model] embedding
    `table`, or None (the table is multiplied transposed)."""
    return self.output_kernels.get(table.path)

  def held(self):
    """These weights with each `Int8Kernel` an `Int8HeldKernel`: only for
    weights that never change (`search.fixed_search_weights`)."""
    def hold(kernels):
      return {key: Int8HeldKernel(*kernel) if type(kernel) is Int8Kernel
              else kernel for key, kernel in kernels.items()}

    return self._replace(kernels=hold(self.kernels),
                         output_kernels=hold(self.output_kernels))


def fused_key(variables):
  """The `SearchWeights.kernels` key of the kernel that multiplies by all
  of `variables` in one product (`int8.concatenated`)."""
  return "+".join(variable.path for variable in variables)


class EnsembleWeights(typing.NamedTuple):
  """An ensemble's search weights: `members`, a tuple of each model's
  `SearchWeights`, in the ensemble's order."""
  members: tuple

  @property
  def int8(self):
    """Whether these are an int8 search's weights (every member's)."""
    return all(weights.int8 for weights in self.members)

  def held(self):
    """Each member's `SearchWeights.held`."""
    return EnsembleWeights(tuple(weights.held() for weights in self.members))
