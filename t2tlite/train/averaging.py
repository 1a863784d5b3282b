"""Checkpoint averaging (section 6.1): the element-wise mean of the model
weights of the last N checkpoints a folder lists (paper: 5 for base, 20 for
big models).

The folder is a run's output_dir (its newest N) or OUTPUT_DIR/best (its N
best: `best.py` lists them best last). The result is a model-only checkpoint
in output_dir/averaged/, numbered by the highest step averaged, which the
decoder and the exporter load with `--checkpoint_path=OUTPUT_DIR/averaged`.
"""
import os

from absl import logging
import numpy as np
import tensorflow as tf

from t2tlite import run_dir
from t2tlite.train import best as best_lib

AVERAGED_SUBDIR = "averaged"


def last_checkpoints(checkpoint_dir, n):
  """The last `n` checkpoint prefixes the 'checkpoint' file of
  `checkpoint_dir` lists, in its order: in a run folder the newest, oldest
  first; in OUTPUT_DIR/best the best, best last.

  Raises:
    FileNotFoundError: no checkpoint in checkpoint_dir.
    ValueError: fewer than n checkpoints are kept there.
  """
  state = tf.train.get_checkpoint_state(checkpoint_dir)
  paths = list(state.all_model_checkpoint_paths) if state else []
  if not paths:
    raise FileNotFoundError(f"No checkpoint in {checkpoint_dir}: train "
                            "first with t2t-trainer.")
  if n <= 0:
    raise ValueError(f"n={n}: expected a positive number of checkpoints")
  if len(paths) < n:
    best = os.path.exists(os.path.join(checkpoint_dir, best_lib.BEST_FILE))
    more = "keep_best_checkpoints" if best else "keep_checkpoint_max"
    raise ValueError(
        f"n={n} but {checkpoint_dir} keeps only {len(paths)} checkpoints "
        f"({', '.join(os.path.basename(p) for p in paths)}); use n="
        f"{len(paths)}, or train with a larger t2t-trainer --{more}.")
  # get_checkpoint_state has already joined relative paths to the folder.
  return paths[-n:]


def _step_of(path):
  return int(path.rsplit("-", 1)[1])


def average_checkpoints(output_dir, n, averaged_dir=None,
                        checkpoint_dir=None):
  """Averages the last `n` checkpoints of a folder into one.

  Float weights are averaged; any other weight keeps the value of the last
  one listed.

  Args:
    output_dir: a t2t-trainer output_dir (the model's config).
    n: how many checkpoints.
    averaged_dir: where to write; default output_dir/averaged.
    checkpoint_dir: the folder whose last `n` checkpoints are averaged
      (`last_checkpoints`); default output_dir (its newest n).
  Returns:
    The prefix of the averaged checkpoint.
  """
  if checkpoint_dir and not os.path.isdir(checkpoint_dir):
    raise FileNotFoundError(
        f"checkpoint_dir={checkpoint_dir}: not a folder (expected a folder "
        "of checkpoints, such as OUTPUT_DIR/best)")
  info = run_dir.read_run_info(output_dir)
  paths = last_checkpoints(checkpoint_dir or output_dir, n)
  model = run_dir.build_run_model(info)
  checkpoint = run_dir.make_checkpoint(model)
  variables = run_dir.model_variables(model)
  sums = {}
  for path in paths:
    status = run_dir.restore(checkpoint, path).expect_partial()
    try:
      status.assert_existing_objects_matched()
    except AssertionError as error:
      # TensorFlow's message lists every unmatched object, over many lines.
      raise ValueError(
          f"{path}: its variables are not this run's model's ("
          f"{str(error).splitlines()[0][:200]}); average checkpoints of "
          f"{output_dir}'s model (its hparams.json)") from None
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
  prefix = manager.save(checkpoint_number=max(map(_step_of, paths)))
  logging.info("Averaged %d checkpoints (%s) into %s", len(paths),
               ", ".join(os.path.basename(p) for p in paths), prefix)
  return prefix
