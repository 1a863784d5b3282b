"""The scalar summaries the trainer writes (TensorBoard event files), and
reading them back, without the tensorboard package. TensorFlow is imported
when first used: the report reads runs without it at start-up."""
import functools
import os


@functools.cache
def _scalar_metadata():
  """What tensorboard's tf.summary.scalar writes, without needing the
  tensorboard package at training time (TensorFlow 2.21 does not install
  it)."""
  from tensorflow.core.framework import summary_pb2
  return summary_pb2.SummaryMetadata(
      plugin_data=summary_pb2.SummaryMetadata.PluginData(
          plugin_name="scalars"),
      data_class=summary_pb2.DATA_CLASS_SCALAR).SerializeToString()


class ScalarWriter:
  """Writes scalars of a run into event files under output_dir: one writer
  per subfolder ("" for output_dir itself, "eval" for evaluations). Only
  the chief writes (`chief` False: `write` does nothing)."""

  def __init__(self, output_dir, chief=True):
    self.output_dir, self.chief = output_dir, chief
    self._writers = {}

  def write(self, subdir, step, scalars):
    """Writes {name: float} at `step` under output_dir/subdir, flushed."""
    import tensorflow as tf
    if not self.chief:
      return
    if subdir not in self._writers:
      self._writers[subdir] = tf.summary.create_file_writer(
          os.path.join(self.output_dir, subdir))
    with self._writers[subdir].as_default(step=step):
      for name, value in scalars.items():
        tf.summary.write(name, tf.constant(value, tf.float32),
                         metadata=_scalar_metadata())
    self._writers[subdir].flush()


def read_scalars(folder):
  """{tag: {step: value}} of the scalar summaries in folder's event files
  (a run's output_dir for training scalars, OUTPUT_DIR/eval for evaluation)."""
  import tensorflow as tf
  from tensorflow.core.util import event_pb2
  scalars = {}
  for name in sorted(os.listdir(folder)):
    if not name.startswith("events.out.tfevents"):
      continue
    for record in tf.data.TFRecordDataset(os.path.join(folder, name)):
      event = event_pb2.Event.FromString(record.numpy())
      for value in event.summary.value:
        if value.metadata.plugin_data.plugin_name != "scalars":
          raise ValueError(f"{folder}/{name}: summary {value.tag!r} is not a "
                           "scalar")
        scalars.setdefault(value.tag, {})[event.step] = float(
            tf.make_ndarray(value.tensor))
  return scalars
