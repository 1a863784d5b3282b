"""Weights read in a layer's compute dtype, optionally cast once per search.

Under mixed precision (float32 variables, bfloat16 or float16 compute) every
use of a weight casts it. Inside a decoding loop that is every step: for
transformer_base, 63M elements read and written per step, more memory traffic
than the step's matmuls need. `weights_cast_once` casts every weight once, in
the graph being built, and `cast_weight` then returns those tensors, which the
loop body captures from outside the loop.
"""
import contextlib
import threading

import tensorflow as tf

_STATE = threading.local()


def _key(variable, dtype):
  return id(variable), tf.as_dtype(dtype).name


def cast_weight(variable, dtype):
  """`variable` as a `dtype` tensor (the one-off cast inside
  `weights_cast_once`)."""
  table = getattr(_STATE, "table", None)
  if table:
    cast = table.get(_key(variable, dtype))
    if cast is not None:
      return cast
  return tf.cast(variable, dtype)


@contextlib.contextmanager
def weights_cast_once(variables, dtype):
  """Within the block, `cast_weight(v, dtype)` of any of `variables` returns
  one cast made on entry. Only for code without gradients (decoding). Does
  nothing when the variables already have `dtype`."""
  dtype = tf.as_dtype(dtype)
  previous = getattr(_STATE, "table", None)
  table = dict(previous or {})
  table.update({_key(v, dtype): tf.cast(v, dtype) for v in variables
                if v.dtype != dtype})
  _STATE.table = table
  try:
    yield
  finally:
    _STATE.table = previous
