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

The kernel computes only on TensorFlow's oneDNN path (see
`precision.int8_support`); `kernel_works` checks that in a graph.
"""
import tensorflow as tf

from t2tlite.layers.search_weights import Int8Kernel, Int8WeightsFirstKernel

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


def weights_first_product(x, quantized, bits=ACTIVATION_BITS):
  """(x / row max) @ (kernel / column max) with the kernel as the u8 x s8
  kernel's first operand (an `Int8WeightsFirstKernel`).

  Args:
    x: float [rows, d_in].
  Returns:
    (float32 [rows, d_out], float32 [rows, 1]: the row maxima).
  """
  steps = 2**(bits - 1) - 1
  # oneDNN makes no product of zero columns (an empty batch, or the empty
  # block of a concurrent search over fewer rows than searches): one zero
  # row more, dropped from the result (a slice of its first axis, no copy).
  x = tf.pad(x, [[0, 1], [0, 0]])
  shifted, row_scales = quantize_rows(x, bits)  # the other layout's values
  rounded = tf.cast(tf.bitcast(shifted, tf.uint8), tf.int32) - (steps + 1)
  activations = tf.bitcast(tf.cast(tf.transpose(rounded), tf.int8),
                           tf.qint8)
  # SCALED mode: the int32 sums times max_a / 255 * max_b / 127, here
  # 1 / 127 (the weights' 127 + 128 steps) times 1 / steps (the
  # activations'); the bias, per column of the [d_out, rows] result, is
  # minus the weights' shift times each row's sum.
  bias = tf.cast(tf.reduce_sum(rounded, axis=1), tf.float32) * (
      -128.0 / (127.0 * steps))
  transposed = tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
      a=tf.bitcast(quantized.weights_first, tf.quint8), b=activations,
      bias=bias,
      min_a=0.0, max_a=255.0 / 127.0, min_b=-127.0 / steps,
      max_b=127.0 / steps, min_freezed_output=-1.0, max_freezed_output=1.0,
      Toutput=tf.float32, input_quant_mode="SCALED")
  return tf.transpose(transposed)[:-1], row_scales[:-1]


def matmul(x, quantized, bits=ACTIVATION_BITS):
  """x @ kernel with the kernel from `quantize_kernel` (either layout).

  Args:
    x: float [rows, d_in].
    quantized: `quantize_kernel`'s result for a [d_in, d_out] kernel (an
      `Int8Kernel` or an `Int8WeightsFirstKernel`).
    bits: the activations' (`quantize_rows`).
  Returns:
    [rows, d_out] in x's dtype.
  """
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
