"""Reshapes whose target shape is a constant where the static shape allows.

A reshape to `tf.shape(x)[0], tf.shape(x)[1], ...` costs a Shape, a
StridedSlice per axis and a Pack at every call; inside a search loop that
is every step. With at most one axis unknown before the graph runs, the
target is a Python list (one Const) with -1 for that axis, and graph
optimization folds nothing it could not fold before.
"""
import tensorflow as tf


def dim(x, axis):
  """x's size along `axis`: an int when known statically, else a `Size`
  that `reshape` reads from the graph only if it must."""
  size = x.shape[axis]
  return size if size is not None else Size(x, axis)


class Size:
  """x's size along `axis`, unknown before the graph runs."""

  def __init__(self, x, axis):
    self.x, self.axis = x, axis

  def tensor(self):
    return tf.shape(self.x)[self.axis]


def reshape(x, dims):
  """tf.reshape(x, dims), dims a list of ints, int32 scalars and `Size`s.

  With one dim not an int (and no int 0, which would leave -1 ambiguous
  for an empty tensor, nor -1), the target is the ints with -1 for it: a
  constant, and no `Size` is read. Otherwise the dims are stacked.
  """
  dynamic = [i for i, d in enumerate(dims) if not isinstance(d, int)]
  if not dynamic:
    return tf.reshape(x, dims)
  ints = [d for d in dims if isinstance(d, int)]
  if len(dynamic) == 1 and 0 not in ints and -1 not in ints:
    return tf.reshape(x, [-1 if i == dynamic[0] else d
                          for i, d in enumerate(dims)])
  return tf.reshape(x, tf.stack([d.tensor() if isinstance(d, Size) else d
                                 for d in dims]))
