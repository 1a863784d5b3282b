"""int8 matmuls for decoding, through oneDNN's u8 x s8 inner product.

TensorFlow's CPU builds reach that kernel (VNNI where the CPU has it, AVX2's
u8 x s8 multiply-add otherwise) through `QuantizedMatMulWithBiasAndDequantize`.
A search with `int8=True` (`Transformer.search_weights`) quantizes, once per
search (or once for all searches of a decoder or an export:
`search.fixed_search_weights`), every 2-D kernel of the decoder layers and
the output projection:

- weights per output column, scaled to [-1, 1] and rounded to int8;
- activations per row at each product, 63 * x / max|x| rounded, shifted
  by 64 into 1..127 (u8, as the kernel takes them; `quantize_rows`).
  Without VNNI, AVX2 sums pairs of u8 x s8 products in int16, and 8-bit
  activations overflow it (2 * 255 * 127 > 32767); 7 bits never do, so
  every CPU computes the same products.

The kernel scales its int32 sums back to float32; a bias of minus 64 times
the kernel's column sums removes the shift, and the result is multiplied by
the row and column scales.

On CPUs with VNNI the weights go first instead (`weights_first`): oneDNN
copies its second operand into a blocked layout at every call, which for
the output projection's 37,000 x 512 kernel costs more than the product.
As the first operand the kernel stays in place: it is stored transposed
and shifted by 128 into u8 (1..255), the activations are rounded to 63
steps each side of zero (s8, no shift) and transposed, a bias of minus 128
times each row's sum removes the weights' shift, and the [d_out, rows]
result is transposed back. The integer sums are those of the other form;
without VNNI this form is slower (AVX2's kernel for it), so it is used
only with VNNI: the caller says which (`weights_first`; t2tlite.precision.
int8_support decides it for a machine). Accuracy and speed by machine:
BUILD_NOTES.md, "int8 decoding".

Weights made once for all searches (`search.fixed_search_weights`: a
Decoder's, not an export's, which keeps to core ops) take neither road:
they are `Int8HeldKernel`s, multiplied by oneDNN's fused int8 matmul
(`_QuantizedMatMul`, `held_product`), which copies a constant kernel into
its blocked layout at its first product and keeps it. The activations go
first, as in the first form (so no [d_out, rows] result to transpose back,
and 7-bit activations on every CPU), and the kernel applies the column
scales itself.

The kernels compute only on TensorFlow's oneDNN path (see
`precision.int8_support`); `kernel_works` checks that in a graph.
"""
import tensorflow as tf
# The fused int8 matmul (`_QuantizedMatMul`) has no Python wrapper
# (tf.raw_ops leaves out ops whose names start with "_"): it is added to
# the graph through TensorFlow's own op-building helper.
from tensorflow.python.framework import func_graph
from tensorflow.python.framework import op_def_library
from tensorflow.python.framework import op_def_registry

from t2tlite.layers.search_weights import (Int8HeldKernel, Int8Kernel,
                                           Int8WeightsFirstKernel)

ACTIVATION_BITS = 7  # see above
_TINY = 1e-12  # an all-zero row or column keeps its zeros


def quantize_kernel(kernel, weights_first=False, transposed=False):
  """Quantizes a [d_in, d_out] kernel per output column.

  Args:
    kernel: float [d_in, d_out], or [d_out, d_in] with `transposed` (a
      tied embedding table: no transpose for the weights-first layout).
    weights_first: lay it out as the product's first operand (see above:
      faster with VNNI, slower without).
  Returns:
    an `Int8WeightsFirstKernel` with weights_first, else an `Int8Kernel`.
  """
  # Work on [d_out, d_in] (rows = output columns) for the weights-first
  # layout, on [d_in, d_out] for the other.
  if transposed != weights_first:
    kernel = tf.transpose(kernel)
  kernel = tf.cast(kernel, tf.float32)
  d_in_axis = 1 if weights_first else 0
  scales = tf.maximum(tf.reduce_max(tf.abs(kernel), axis=d_in_axis), _TINY)
  per_column = scales[:, tf.newaxis] if weights_first else scales
  quantized = tf.cast(tf.round(kernel / per_column * 127.0), tf.int8)
  if weights_first:
    # uint8, not quint8: Keras layers, which pass the search's weights on,
    # know no quantized dtypes. Bitcast at the product.
    shifted = tf.cast(quantized, tf.int32) + 128
    return Int8WeightsFirstKernel(tf.cast(shifted, tf.uint8), scales)
  return Int8Kernel(quantized,
                    tf.reduce_sum(tf.cast(quantized, tf.float32),
                                  axis=0) / 127.0,
                    scales)


def concatenated(kernels):
  """One quantized kernel for several of the same d_in, side by side along
  d_out: [d_in, sum of d_out], for maps that read the same input (a
  layer's queries, keys and values). Each column keeps its own scale, so
  the product's columns are those of the separate products, bit for bit,
  for one quantization of the input and one product instead of several.

  Args:
    kernels: `quantize_kernel` results of one layout.
  Returns:
    an `Int8Kernel` or `Int8WeightsFirstKernel` like them.
  """
  if isinstance(kernels[0], Int8WeightsFirstKernel):
    return Int8WeightsFirstKernel(
        tf.concat([k.weights_first for k in kernels], axis=0),
        tf.concat([k.scales for k in kernels], axis=0))
  return Int8Kernel(tf.concat([k.kernel for k in kernels], axis=1),
                    tf.concat([k.column_sums for k in kernels], axis=0),
                    tf.concat([k.scales for k in kernels], axis=0))


def rounded_scales(quantized, dtype):
  """`quantized` with its float32 scales (and column sums) rounded to
  `dtype` and back: what its product computes with when a mixed policy's
  Keras call casts them (`Transformer.search_weights` keeps that for the
  feed-forward maps, once, instead of at every step)."""
  def rounded(x):
    return tf.cast(tf.cast(x, dtype), tf.float32)

  if isinstance(quantized, Int8WeightsFirstKernel):
    return Int8WeightsFirstKernel(quantized.weights_first,
                                  rounded(quantized.scales))
  return type(quantized)(quantized.kernel, rounded(quantized.column_sums),
                         rounded(quantized.scales))


def held_kernels_available():
  """Whether this TensorFlow build has the fused int8 matmul that
  `held_product` adds to a graph (x86 builds with oneDNN have it)."""
  return op_def_registry.get("_QuantizedMatMul") is not None


def held(quantized):
  """`quantized` (an `Int8Kernel`) as an `Int8HeldKernel`: only for
  weights that never change while a graph multiplying by them lives."""
  return Int8HeldKernel(*quantized)


def quantize_rows(x, bits=ACTIVATION_BITS):
  """Quantizes activations per row, symmetrically, shifted into u8.

  Args:
    x: float [rows, d_in].
    bits: 7 (the default: safe without VNNI, see above) or 8.
  Returns:
    (quint8 [rows, d_in]: round(x / row max * steps) + steps + 1, with
    steps = 2**(bits - 1) - 1; float32 [rows, 1]: the row maxima).
  """
  steps = 2**(bits - 1) - 1
  x32 = tf.cast(x, tf.float32)
  row_scales = tf.maximum(tf.reduce_max(tf.abs(x32), axis=1, keepdims=True),
                          _TINY)
  # Rounded by truncation: x * steps / row max + steps + 1.5 is positive.
  shifted = tf.cast(x32 * (steps / row_scales) + (steps + 1.5), tf.uint8)
  return tf.bitcast(shifted, tf.quint8), row_scales


def normalized_product(shifted, quantized, bits=ACTIVATION_BITS):
  """The u8 x s8 kernel: (x / row max) @ (kernel / column max), float32
  [rows, d_out], from `quantize_rows`'s first result and an `Int8Kernel`.
  """
  steps = 2**(bits - 1) - 1
  # In its SCALED mode the kernel multiplies the int32 sums by
  # max_a / 255 * max_b / 127: max_a = 255 / steps undoes the activations'
  # scaling and max_b = 1 the weights'; the bias removes the shift.
  return tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
      a=shifted, b=tf.bitcast(quantized.kernel, tf.qint8),
      bias=-tf.cast(quantized.column_sums, tf.float32) * (
          (steps + 1) / steps),
      min_a=0.0, max_a=255.0 / steps, min_b=-1.0, max_b=1.0,
      min_freezed_output=-1.0, max_freezed_output=1.0, Toutput=tf.float32,
      input_quant_mode="SCALED")


def held_product(shifted, quantized, bits=ACTIVATION_BITS):
  """(x / row max) @ kernel, float32 [rows, d_out], from `quantize_rows`'s
  first result and an `Int8HeldKernel`, by oneDNN's fused int8 matmul
  with the kernel marked constant: its blocked copy is made at the first
  product and kept by the op for every later one.

  The same integer sums as `normalized_product`; the op scales them by
  1 / steps (min_a, max_a: the activations' scaling) and by each column's
  maximum / 127 (min_b, max_b per column), so the column scales need no
  multiply of their own, then adds the bias, which removes the 64 shift.
  """
  if _passed_as_argument(quantized.kernel):
    raise ValueError(
        "an Int8HeldKernel is an argument of this tf.function: oneDNN would "
        "keep the first call's kernel for every later call; capture it "
        "instead (a closure), or pass an Int8Kernel")
  steps = 2**(bits - 1) - 1
  scales = tf.cast(quantized.scales, tf.float32)
  bias = (-(steps + 1) / steps) * tf.cast(quantized.column_sums,
                                          tf.float32) * scales
  # The op's inputs in order: activations, kernel, bias, the activations'
  # range, the kernel's range per column.
  _, _, op, _ = op_def_library._apply_op_helper(
      "_QuantizedMatMul", name="HeldInt8MatMul",
      device_inputs=[shifted, tf.bitcast(quantized.kernel, tf.qint8), bias,
                     tf.constant(0.0), tf.constant(255.0 / steps),
                     -scales, scales],
      host_inputs=[], T1=tf.quint8, T2=tf.qint8, Tbias=tf.float32,
      Tout=tf.float32, U=tf.float32, Tdevice_outputs=[tf.float32],
      Thost_outputs=[], transpose_a=False, transpose_b=False,
      is_weight_const=True, is_bias_const=True,
      fused_ops=["BiasAdd", "Dequantize"], input_quant_mode="SCALED",
      output_quant_mode="SCALED", leakyrelu_alpha=0.2)
  return op.outputs[0]


def _passed_as_argument(tensor):
  """Whether `tensor` enters the tf.function being traced (or one it is
  traced inside) as an argument, which each call may change, rather than
  as a captured tensor or a value made in the graph."""
  while isinstance(getattr(tensor, "graph", None), func_graph.FuncGraph):
    graph = tensor.graph
    outer = {id(inner): outer for outer, inner in graph.captures}
    if id(tensor) not in outer:
      return any(tensor is argument for argument in graph.inputs)
    tensor = outer[id(tensor)]  # captured: where it comes from
  return False


def weights_first_product(x, quantized, bits=ACTIVATION_BITS):
  """(x / row max) @ (kernel / column max) with the kernel as the u8 x s8
  kernel's first operand (an `Int8WeightsFirstKernel`).

  Args:
    x: float [rows, d_in].
  Returns:
    (float32 [rows, d_out], float32 [rows, 1]: the row maxima).
  """
  transposed, row_scales = _columns_product(x, quantized, bits)
  return tf.transpose(transposed), row_scales


def _columns_product(x, quantized, bits):
  """The weights-first product of x [rows, d_in]: (float32 [d_out, rows]
  normalized as `weights_first_product`'s, float32 [rows, 1] the row
  maxima). rows must not be 0: oneDNN makes no product of zero columns
  (a search never asks one: `search.decode` gives an empty block a
  stand-in row)."""
  rounded, row_scales = _rounded(tf.cast(x, tf.float32), axis=1, bits=bits)
  # Transposed in int8, a quarter of the bytes of float32.
  activations = tf.transpose(tf.cast(rounded, tf.int8))
  return _product(activations, rounded, 1, quantized, bits), row_scales


def _rounded(x32, axis, bits):
  """x32's values over their maxima along `axis` (one activation vector
  each), rounded to +-steps: (int32 like x32, float32 maxima with `axis`
  kept). The other layout's values (`quantize_rows`), unshifted: truncated
  straight to int32 (they are positive before the shift is taken off)."""
  steps = 2**(bits - 1) - 1
  scales = tf.maximum(tf.reduce_max(tf.abs(x32), axis=axis, keepdims=True),
                      _TINY)
  rounded = tf.cast(x32 * (steps / scales) + (steps + 1.5),
                    tf.int32) - (steps + 1)
  return rounded, scales


def _product(activations, rounded, axis, quantized, bits):
  """The weights-first kernel's product: quantized's [d_out, d_in] by the
  int8 activations [d_in, columns] (`rounded` summed along `axis` gives
  each column's sum): float32 [d_out, columns]."""
  steps = 2**(bits - 1) - 1
  # SCALED mode: the int32 sums times max_a / 255 * max_b / 127, here
  # 1 / 127 (the weights' 127 + 128 steps) times 1 / steps (the
  # activations'); the bias, per column of the [d_out, rows] result, is
  # minus the weights' shift times each row's sum.
  bias = tf.cast(tf.reduce_sum(rounded, axis=axis), tf.float32) * (
      -128.0 / (127.0 * steps))
  return tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
      a=tf.bitcast(quantized.weights_first, tf.quint8),
      b=tf.bitcast(activations, tf.qint8), bias=bias,
      min_a=0.0, max_a=255.0 / 127.0, min_b=-127.0 / steps,
      max_b=127.0 / steps, min_freezed_output=-1.0, max_freezed_output=1.0,
      Toutput=tf.float32, input_quant_mode="SCALED")


def weights_first_feed_forward(x, w1, b1, w2, b2, bits=ACTIVATION_BITS):
  """relu(x @ w1 + b1) @ w2 + b2 with `Int8WeightsFirstKernel`s, the hidden
  activations kept as the first product lays them out, [d_ff, rows]: the
  second product reads them there, so neither the float32 hidden layer
  nor its int8 values are transposed. Each value is computed as
  `matmul` computes it, in the same order.

  Args:
    x: float [rows, d_model]; b1: [d_ff] and b2: [d_model] in x's dtype.
  Returns:
    [rows, d_model] in x's dtype.
  """
  transposed, row_scales = _columns_product(x, w1, bits)
  hidden = tf.nn.relu(tf.cast(
      transposed * tf.transpose(row_scales) *
      tf.cast(w1.scales, tf.float32)[:, tf.newaxis], x.dtype) +
                      b1[:, tf.newaxis])  # [d_ff, rows]
  rounded, column_scales = _rounded(tf.cast(hidden, tf.float32), axis=0,
                                    bits=bits)
  out = _product(tf.cast(rounded, tf.int8), rounded, 0, w2, bits)
  out = (tf.transpose(out) * tf.transpose(column_scales) *
         tf.cast(w2.scales, tf.float32))
  return tf.cast(out, x.dtype) + b2


def matmul(x, quantized, bits=ACTIVATION_BITS):
  """x @ kernel with the kernel from `quantize_kernel` (either layout) or
  `held`.

  Args:
    x: float [rows, d_in]; rows > 0 for an `Int8WeightsFirstKernel`
      (oneDNN makes no product of zero columns).
    quantized: `quantize_kernel`'s result for a [d_in, d_out] kernel (an
      `Int8Kernel` or an `Int8WeightsFirstKernel`), or an `Int8HeldKernel`.
    bits: the activations' (`quantize_rows`).
  Returns:
    [rows, d_out] in x's dtype.
  """
  if isinstance(quantized, Int8HeldKernel):
    if not tf.executing_eagerly():
      shifted, row_scales = quantize_rows(x, bits)
      return tf.cast(held_product(shifted, quantized, bits) * row_scales,
                     x.dtype)
    # Eagerly there is no graph to hold it: the same product, laid out
    # at this call.
    quantized = Int8Kernel(*quantized)
  if isinstance(quantized, Int8WeightsFirstKernel):
    normalized, row_scales = weights_first_product(x, quantized, bits)
  else:
    shifted, row_scales = quantize_rows(x, bits)
    normalized = normalized_product(shifted, quantized, bits)
  # The scales are float32 as made, but under a mixed policy Keras casts
  # every float tensor a layer's call receives (the search's weights among
  # them) to the compute dtype.
  scales = tf.cast(quantized.scales, tf.float32)
  return tf.cast(normalized * row_scales * scales, x.dtype)


def kernel_works():
  """Whether the u8 x s8 kernel computes in this process: a bool scalar,
  computed in the graph at each call (a few small ops), so that a SavedModel
  can choose its search where it is served (TF Serving runs no Python).

  TensorFlow's own kernel for `QuantizedMatMulWithBiasAndDequantize` is a
  no-op; oneDNN's replaces it only where TensorFlow's oneDNN path is on. The
  no-op leaves its output unset, an error for whatever reads it, so the
  probe runs as a tf.data map over one element: `ignore_errors` drops the
  element on that error, and the count of elements left says whether the
  kernel ran.
  """
  def probe(element):
    # Inputs made from the element, so that no graph optimization folds
    # the product at export time.
    ones = tf.cast(element + 1, tf.uint8)
    a = tf.bitcast(tf.fill([1, 4], ones), tf.quint8)
    b = tf.bitcast(tf.fill([4, 2], tf.cast(ones, tf.int8)), tf.qint8)
    product = tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
        a=a, b=b, bias=tf.zeros([2]), min_a=0.0, max_a=255.0, min_b=-127.0,
        max_b=127.0, min_freezed_output=-1.0, max_freezed_output=1.0,
        Toutput=tf.float32, input_quant_mode="SCALED")
    return tf.reduce_sum(product)  # reads it (its size is known statically)

  probes = tf.data.Dataset.from_tensors(tf.constant(0)).map(probe)
  left = probes.ignore_errors().reduce(tf.constant(0),
                                       lambda count, _: count + 1)
  return tf.equal(left, 1)
