"""Another run's vocabulary, for a run that reuses it: the files a run folder
(or a checkpoint inside one, or a bare sentencepiece model) provides, and
the map from one vocabulary's pieces to another's.

A fine-tuning run encodes its data with its parent's vocabulary, so that the
parent's embedding rows mean the same pieces (`t2t-datagen --vocab_from`,
implied by `t2t-trainer --warm_start_from` with `--generate_data`). Where
the new data needs its own vocabulary, `row_map` carries the rows over by
piece (`t2t-trainer --warm_start_map_vocab`).
"""
import dataclasses
import os

import numpy as np

# The names a run folder gives its vocabulary copies (t2tlite.run_dir).
RUN_VOCAB_FILE = "vocab.model"
RUN_TARGET_VOCAB_FILE = "vocab.targets.model"
# How far above a checkpoint's folder its run folder may lie: RUN/ckpt-N 0,
# RUN/best/ckpt-N and RUN/averaged/ckpt-N 1.
_MAX_LEVELS_UP = 1


class VocabSourceError(ValueError):
  """A --vocab_from path that holds no vocabulary."""


@dataclasses.dataclass(frozen=True)
class VocabSource:
  """The vocabulary files of another run.

  Attributes:
    inputs: the sentencepiece model of the inputs (shared, or the inputs').
    targets: the targets' own model, or None when they share `inputs`.
    run_folder: the run folder they come from, or None for a bare model.
  """
  inputs: str
  targets: str | None = None
  run_folder: str | None = None


def find_run_folder(path):
  """The run folder holding `path` (a run folder, a folder of checkpoints
  inside one, or a checkpoint prefix), or None: the nearest folder with a
  vocab.model, from the checkpoint's folder (or `path`'s own) up to one
  level above it."""
  folder = path if os.path.isdir(path) else os.path.dirname(path)
  for _ in range(_MAX_LEVELS_UP + 1):
    if os.path.isfile(os.path.join(folder, RUN_VOCAB_FILE)):
      return os.path.abspath(folder)
    parent = os.path.dirname(os.path.abspath(folder))
    if parent == folder:
      break
    folder = parent
  return None


def resolve(path, flag="vocab_from"):
  """The `VocabSource` of `path`: a sentencepiece `.model` file, or a run
  folder (or a checkpoint or checkpoint folder inside one).

  Raises:
    VocabSourceError: nothing there holds a vocabulary.
  """
  path = os.path.expanduser(path)
  if os.path.isfile(path) and path.endswith(".model"):
    return VocabSource(inputs=os.path.abspath(path))
  run = find_run_folder(path)
  if run is None:
    raise VocabSourceError(
        f"{flag}={path}: no vocabulary there (expected a sentencepiece "
        f".model file, or a t2tlite run folder with {RUN_VOCAB_FILE}, or a "
        "checkpoint inside one)")
  return of_run_folder(run)


def of_run_folder(run):
  """The `VocabSource` of a run folder (`find_run_folder`'s answer)."""
  targets = os.path.join(run, RUN_TARGET_VOCAB_FILE)
  return VocabSource(inputs=os.path.join(run, RUN_VOCAB_FILE),
                     targets=targets if os.path.isfile(targets) else None,
                     run_folder=run)


def same_file_contents(a, b):
  """Whether two files hold the same bytes."""
  if os.path.getsize(a) != os.path.getsize(b):
    return False
  with open(a, "rb") as fa, open(b, "rb") as fb:
    return fa.read() == fb.read()


def row_map(old_pieces, new_pieces):
  """For each id of a new vocabulary, the id of the same piece in an old one.

  The special ids (0 PAD, 1 EOS, 2 UNK: `t2tlite.ids`) map to themselves.

  Args:
    old_pieces, new_pieces: lists of str, a vocabulary's pieces by id.
  Returns:
    int64 array [len(new_pieces)]: the old id, or -1 where the old
    vocabulary lacks the piece (its row is initialised as new).
  """
  old_ids = {piece: i for i, piece in enumerate(old_pieces)}
  mapped = np.array([old_ids.get(piece, -1) for piece in new_pieces],
                    dtype=np.int64)
  special = min(3, len(old_pieces), len(new_pieces))
  mapped[:special] = np.arange(special)
  return mapped
