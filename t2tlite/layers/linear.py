"""Weights as a layer computes with them, and the same linear map at every
position.

`tf.matmul` of a [batch, len, d_in] tensor and a [d_in, d_out] kernel is a
broadcasting batch matmul (BatchMatMulV2). Its kernel gradient is a
per-example product summed over the batch afterwards, [batch, d_in, d_out] of
intermediate memory; and oneDNN's batch-matmul kernels for such shapes are
far slower than its 2-D GEMM on AVX2-only CPUs (several times for a decoding
step's [rows, 1, d_in] inputs; BUILD_NOTES.md, Decoding layouts). Folding
batch and length into one axis makes every position-wise map, forward and
backward, training and decoding, a single 2-D GEMM, except one case below.

Where oneDNN is held to AVX2 (and in every export) a float32 search goes
one step further (`decoding_kernels`, `SettledDecode.laid_out_kernels`):
its decoder layers multiply by kernels stored [d_out, d_in]
(`LaidOutKernel`) in a batch matmul of one [1, rows, d_in] batch with
transpose_b, which oneDNN's AVX2 jit GEMM runs 1.2-1.9x faster than the
2-D GEMM with a [d_in, d_out] kernel for a step's shapes
(bench/matmul_shapes.py at f5a3704). Where it may use AVX-512 the 2-D GEMM
of the kernel as stored is faster (decode_base float32 1.12x on a Zen 4;
BUILD_NOTES.md, Decoding layouts).

An int8 search (`int8_kernels`) multiplies the same maps in int8
instead (`t2tlite.layers.int8`). `multiply` takes any kernel variant
(`t2tlite.layers.search_weights`).
"""
import tensorflow as tf

from t2tlite.layers import int8, shapes
from t2tlite.layers.search_weights import (FloatKernel, Int8HeldKernel,
                                           Int8Kernel,
                                           Int8WeightsFirstKernel,
                                           LaidOutKernel, fused_key)


def read_weight(variable, dtype, search_weights=None):
  """`variable` as a `dtype` tensor.

  Under mixed precision every use of a float32 variable casts it; a decoding
  loop would do that at every step. A search therefore casts each weight once,
  before its loop, into its `SearchWeights` (`Transformer.search_weights`),
  and the layers read that copy.

  Args:
    variable: a Keras variable.
    dtype: the layer's compute dtype.
    search_weights: None, or a `SearchWeights` holding `variable`.
  """
  if search_weights is not None:
    return search_weights.read(variable)
  return tf.cast(variable, dtype)


def decoding_kernels(values, layers):
  """The decoding layout of each 2-D kernel of `layers`: [1, d_out, d_in],
  for `linear`, where the search lays them out
  (`SettledDecode.laid_out_kernels`). float32 only: a bfloat16 search
  keeps the layout of t2tlite's recorded bfloat16 results (see
  `position_wise`). Made once per search, before its loop.

  Args:
    values: {variable.path: weight in the compute dtype}
      (`SearchWeights.values`).
    layers: Keras layers whose 2-D weights are kernels of `linear`.
  Returns:
    {variable.path: `LaidOutKernel` of float32 [1, d_out, d_in]}, for
    `SearchWeights.kernels`.
  """
  kernels = {}
  for layer in layers:
    for variable in layer.weights:
      kernel = values[variable.path]
      if kernel.shape.rank == 2 and kernel.dtype == tf.float32:
        kernels[variable.path] = LaidOutKernel(
            tf.transpose(kernel)[tf.newaxis])
  return kernels


def int8_kernels(layers, weights_first=False, fused=()):
  """Each 2-D kernel of `layers` quantized for `int8.matmul`
  (`int8.quantize_kernel`), which `linear` then uses. Made once per search,
  before its loop.

  Args:
    layers: Keras layers whose 2-D weights are kernels of `linear`.
    weights_first: the int8 layout (`int8.quantize_kernel`).
    fused: tuples of kernel variables that read the same input, each
      quantized as one kernel instead (`int8.concatenated`): a search
      multiplies by that one only (`SearchWeights.fused_kernel`), so its
      members are not kept beside it.
  Returns:
    {variable.path (or `fused_key`): an `Int8Kernel` or
    `Int8WeightsFirstKernel`}, for `SearchWeights.kernels`.
  """
  kernels = {variable.path: int8.quantize_kernel(variable, weights_first)
             for layer in layers for variable in layer.weights
             if len(variable.shape) == 2}
  for variables in fused:
    kernels[fused_key(variables)] = int8.concatenated(
        [kernels.pop(variable.path) for variable in variables])
  return kernels


def linear(x, variable, dtype, search_weights=None):
  """x @ variable over the last axis, multiplied by the variant the search's
  weights hold for it (`SearchWeights.kernel`), if any.

  Args:
    x: [..., d_in].
    variable: a [d_in, d_out] Keras variable.
    dtype: the layer's compute dtype.
    search_weights: None, or the search's `SearchWeights`.
  Returns:
    [..., d_out], in x's dtype.
  """
  if search_weights is None:
    return position_wise(x, read_weight(variable, dtype))
  return multiply(x, search_weights.kernel(variable))


def multiply(x, kernel):
  """x @ a kernel variant of `t2tlite.layers.search_weights`, over the last
  axis.

  Args:
    x: [..., d_in].
    kernel: a `FloatKernel`, `LaidOutKernel`, `Int8Kernel`,
      `Int8WeightsFirstKernel` or `Int8HeldKernel` of a [d_in, d_out]
      kernel.
  Returns:
    [..., d_out], in x's dtype.
  """
  if isinstance(kernel, FloatKernel):
    return position_wise(x, kernel.kernel)
  if isinstance(kernel, LaidOutKernel):
    _, d_out, d_in = kernel.kernel.shape
    flat = tf.matmul(tf.reshape(x, [1, -1, d_in]), kernel.kernel,
                     transpose_b=True)
    return with_leading_axes(flat, x, d_out)
  if isinstance(kernel, Int8WeightsFirstKernel):
    d_out, d_in = kernel.weights_first.shape
  elif isinstance(kernel, (Int8Kernel, Int8HeldKernel)):
    d_in, d_out = kernel.kernel.shape
  else:
    raise TypeError(f"not a kernel variant: {type(kernel).__name__}")
  flat = int8.matmul(tf.reshape(x, [-1, d_in]), kernel)
  return with_leading_axes(flat, x, d_out)


def position_wise(x, kernel, transpose_kernel=False):
  """x @ kernel over the last axis.

  Args:
    x: [..., d_in].
    kernel: [d_in, d_out], or [d_out, d_in] with transpose_kernel.
  Returns:
    [..., d_out], in x's dtype.
  """
  if x.dtype != tf.float32 and x.shape.rank == 3 and x.shape[1] == 1:
    # A mixed-precision search step. oneDNN's bf16 batch matmul and 2-D GEMM
    # sum in different orders (results differ by one bf16 ulp for
    # d_in = 2048, equally accurate), and a flipped near-tie changes which
    # hypotheses a beam keeps: the batch matmul keeps bf16 searches giving
    # the ids of t2tlite's recorded bf16 decoding results. bf16 matmuls are
    # fast only on CPUs with AVX-512 BF16 or AMX, where this kernel is too.
    return tf.matmul(x, kernel, transpose_b=transpose_kernel)
  flat = tf.matmul(shapes.reshape(x, [-1, shapes.dim(x, -1)]), kernel,
                   transpose_b=transpose_kernel)
  d_out = kernel.shape[0 if transpose_kernel else 1]
  return with_leading_axes(flat, x, d_out)


def with_leading_axes(flat, x, d_out):
  """A product of x's rows, [rows, d_out] (or [1, rows, d_out]), shaped
  [..., d_out] as x is [..., d_in], with the static shape kept.

  Args:
    flat: the product of x's rows, one row per row of x.
    x: [..., d_in], the input the rows came from.
    d_out: the product's last axis (an int).
  """
  leading = x.shape[:-1]
  if leading.rank is not None and sum(d is None for d in leading) <= 1:
    out = shapes.reshape(flat, [shapes.dim(x, axis)
                                for axis in range(leading.rank)] + [d_out])
  else:  # x's leading shape, read once
    out = tf.reshape(flat, tf.concat([tf.shape(x)[:-1], [d_out]], 0))
  out.set_shape(x.shape[:-1].concatenate([d_out]))
  return out
