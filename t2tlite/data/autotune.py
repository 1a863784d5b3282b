"""tf.data's autotuning off, for the pipelines t2tlite builds and for the
per-device datasets tf.distribute puts after them.

    dataset = dataset.with_options(autotune.off())
    autotune.off_per_device()   # once, before distributing a dataset

Why: an iterator of an autotuned pipeline owns a thread that re-optimizes
the pipeline at doubling intervals, up to a minute. In TensorFlow 2.21,
destroying the iterator waits for that thread's current interval to end
(gdb: `RootDataset::Iterator::~Iterator` waiting while
`Model::OptimizeLoop` sleeps). Each evaluation destroys its dev iterator,
and the end of training destroys its train iterator. A distributed
iterator has two such threads: the host pipeline's and each device's. A
tiny run of 30 steps stalled 2 to 75 s after its last evaluation, and
under 1 s with both off (shared Xeon; BUILD_NOTES.md, "Input pipeline speed").
Without the autotuning model, `tf.data.AUTOTUNE` parallelism falls back to
the machine's cores.
"""
import tensorflow as tf
from tensorflow.python.data.ops import multi_device_iterator_ops


def off():
  """tf.data.Options with autotuning disabled."""
  options = tf.data.Options()
  options.autotune.enabled = False
  return options


def off_per_device():
  """Disables autotuning in the per-device datasets (a generator and a
  one-element prefetch, nothing to tune) that tf.distribute's
  MultiDeviceIterator builds; idempotent. Does nothing if a TensorFlow
  version lacks the private function it wraps."""
  create = getattr(multi_device_iterator_ops, "_create_device_dataset",
                   None)
  if create is None or getattr(create, "autotune_off", False):
    return

  def create_without_autotune(*args, **kwargs):
    return create(*args, **kwargs).with_options(off())

  create_without_autotune.autotune_off = True
  multi_device_iterator_ops._create_device_dataset = create_without_autotune
