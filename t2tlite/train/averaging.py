"""Checkpoint averaging (section 6.1): the element-wise mean of the model
weights of the last N checkpoints (paper: 5 for base, 20 for big models).

The result is a model-only checkpoint in output_dir/averaged/, numbered by the
step of the newest averaged checkpoint, which the decoder and the exporter
load with `--checkpoint_path=OUTPUT_DIR/averaged`.
"""
import os

from absl import logging
import numpy as np
import tensorflow as tf

from t2tlite import run_dir

AVERAGED_SUBDIR = "averaged"


def last_checkpoints(output_dir, n):
  """The newest `n` checkpoint prefixes of a run, oldest first.

  Raises:
    FileNotFoundError: no checkpoint in output_dir.
    ValueError: fewer than n checkpoints are kept there.
  """
  state = tf.train.get_checkpoint_state(output_dir)
  paths = list(state.all_model_checkpoint_paths) if state else []
  if not paths:
    raise FileNotFoundError(f"No checkpoint in {output_dir}: train first with "
                            "t2t-trainer.")
  if n <= 0:
    raise ValueError(f"n={n}: expected a positive number of checkpoints")
  if len(paths) < n:
    raise ValueError(
        f"n={n} but {output_dir} keeps only {len(paths)} checkpoints "
        f"({', '.join(os.path.basename(p) for p in paths)}); use n="
        f"{len(paths)}, or train with a larger keep_checkpoint_max.")
  # get_checkpoint_state has already joined relative paths to output_dir.
  return paths[-n:]


def _step_of(path):
  return int(path.rsplit("-", 1)[1])


def average_checkpoints(output_dir, n, averaged_dir=None):
  """Averages the last `n` checkpoints of a run into one.

  Float weights are averaged; any other weight keeps the newest value.

  Args:
    output_dir: a t2t-trainer output_dir.
    n: how many of the newest checkpoints.
    averaged_dir: where to write; default output_dir/averaged.
  Returns:
    The prefix of the averaged checkpoint.
  """
  info = run_dir.read_run_info(output_dir)
  paths = last_checkpoints(output_dir, n)
  model = run_dir.build_run_model(info)
  checkpoint = run_dir.make_checkpoint(model)
  variables = run_dir.model_variables(model)
  sums = {}
  for path in paths:
    run_dir.restore(checkpoint, path).expect_partial(
    ).assert_existing_objects_matched()
    for name, variable in variables.items():
      value = variable.numpy()
      if np.issubdtype(value.dtype, np.floating):
        sums[name] = sums.get(name, 0.0) + value.astype(np.float64)
      else:
        sums[name] = value
  for name, variable in variables.items():
    value = sums[name]
    if np.issubdtype(variable.numpy().dtype, np.floating):
      value = value / len(paths)
    variable.assign(value.astype(variable.numpy().dtype))
  averaged_dir = averaged_dir or os.path.join(output_dir, AVERAGED_SUBDIR)
  manager = tf.train.CheckpointManager(checkpoint, averaged_dir,
                                       max_to_keep=None)
  prefix = manager.save(checkpoint_number=_step_of(paths[-1]))
  logging.info("Averaged %d checkpoints (%s) into %s", len(paths),
               ", ".join(os.path.basename(p) for p in paths), prefix)
  return prefix
