"""The hparams of a run on a (re)start: those saved in its output_dir, which a
restart's requested hparams must agree with."""
import os

import tensorflow as tf

from t2tlite import run_dir
from t2tlite.hparams_lib import HParams, create_hparams


class HParamsConflictError(ValueError):
  """A restart asked for hparams different from those the run was started
  with."""


def resolve_hparams(output_dir, hparams_set=None, overrides="",
                    train_steps=None):
  """The hparams of a run: those saved in output_dir, or the requested ones.

  On a restart (output_dir holds hparams.json), the saved hparams are used; a
  requested set and overrides must give the same values. `train_steps` (the
  --train_steps flag) may change on a restart, to train a run further.

  Raises:
    HParamsConflictError: the requested hparams differ from the saved ones.
    ValueError: no saved hparams and no hparams_set.
  """
  path = os.path.join(output_dir, run_dir.HPARAMS_FILE)
  saved = None
  if tf.io.gfile.exists(path):
    with tf.io.gfile.GFile(path) as f:
      saved = HParams.from_json(f.read(), source=path)
  requested = None
  if hparams_set:
    requested = create_hparams(hparams_set, overrides)
  elif overrides and saved is not None:  # overrides of the saved hparams
    requested = saved.override(overrides)
  if requested is None and saved is None:
    raise ValueError(f"hparams_set is required: {output_dir} holds no "
                     f"{run_dir.HPARAMS_FILE} to continue from.")
  if requested is not None and saved is not None:
    differ = [f"{k}: saved {v!r}, requested {requested.to_dict()[k]!r}"
              for k, v in saved.to_dict().items()
              if k != "train_steps" and requested.to_dict()[k] != v]
    if differ:
      raise HParamsConflictError(
          f"{output_dir} was trained with other hparams than requested "
          f"(hparams_set={hparams_set or '(the saved one)'}, overrides="
          f"{overrides!r}):\n  " +
          "\n  ".join(differ) +
          f"\nTo continue the run, leave out hparams_set and overrides (the "
          f"saved {run_dir.HPARAMS_FILE} is used); to train with the new "
          f"values, use another output_dir.")
  hp = saved or requested
  return hp.replace(train_steps=train_steps) if train_steps else hp
