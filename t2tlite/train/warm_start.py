"""Warm start: a new run's first weights from another run's checkpoint, for
fine-tuning and transfer (tensor2tensor's --warm_start_from).

Only the model's weights are read: the optimizer, the step and the
learning-rate schedule start afresh under the new run's hparams. Weights are
matched by name (`run_dir.model_variables`) and shape, variable by variable;
a regex (`re.match`, from the start of the name) limits which are read, and
the others keep their fresh initialisation.

The embedding rows mean pieces of a vocabulary, so the parent's vocabulary
must be the new run's (t2t-datagen --vocab_from), or the rows are carried
over by piece (`map_vocab`): rows of pieces both vocabularies hold come from
the parent, the rest keep their fresh initialisation.

Everything is read and checked by `prepare`, before the new run writes
anything; `WarmStart.apply` only assigns.
"""
import dataclasses
import os
import re

import numpy as np
import tensorflow as tf

from t2tlite import run_dir
from t2tlite.data import vocab_source
from t2tlite.data.vocab import Vocabulary

# The model variables whose rows are pieces: {name: the side of its
# vocabulary}. With one shared vocabulary, "embedding" is the inputs' too.
VOCAB_ROWS = {"embedding/embeddings": "targets",
              "input_embedding/embeddings": "inputs"}
_STEP = re.compile(r"-(\d+)$")


class WarmStartError(ValueError):
  """A warm start that cannot be done as asked (one line, naming both sides)."""


def checkpoint_key(name):
  """The key of model variable `name` in a t2tlite checkpoint (object-graph
  escaping: "." -> "..", "/" -> ".S")."""
  escaped = name.replace(".", "..").replace("/", ".S")
  return f"model/{escaped}/.ATTRIBUTES/VARIABLE_VALUE"


def find_checkpoint(path):
  """The checkpoint prefix `path` names: a run folder or a folder of
  checkpoints (its newest: `RUN/best` is the best), or a prefix.

  Raises:
    WarmStartError: no checkpoint there.
  """
  path = os.path.expanduser(path)
  if os.path.isdir(path):
    prefix = tf.train.latest_checkpoint(path)
    if prefix is None:
      raise WarmStartError(
          f"warm_start_from={path}: no checkpoint in that folder (expected a "
          "run folder, its best/, or a checkpoint prefix such as "
          "RUN/ckpt-1000)")
    return prefix
  if tf.io.gfile.exists(path + ".index"):
    return path
  raise WarmStartError(
      f"warm_start_from={path}: no such folder or checkpoint (expected a run "
      "folder, its best/, or a checkpoint prefix such as RUN/ckpt-1000)")


@dataclasses.dataclass(frozen=True)
class Parent:
  """Where a warm-started run's first weights come from.

  Attributes:
    checkpoint: the checkpoint prefix read.
    step: the parent's step at that checkpoint (from its name), or None.
    vocab: the parent's `vocab_source.VocabSource`, or None for a checkpoint
      outside any run folder.
    variables: the regex limiting the variables read, or None (all).
    map_vocab: whether embedding rows are carried over by piece.
  """
  checkpoint: str
  step: int | None
  vocab: vocab_source.VocabSource | None
  variables: str | None = None
  map_vocab: bool = False

  @property
  def run_folder(self):
    return self.vocab.run_folder if self.vocab else None

  def to_json(self):
    """run.json's "parent"."""
    return {"path": self.run_folder, "checkpoint": self.checkpoint,
            "step": self.step,
            "vocab": self.vocab.inputs if self.vocab else None,
            "target_vocab": self.vocab.targets if self.vocab else None,
            "variables": self.variables, "map_vocab": self.map_vocab}


def parent_of(path, variables=None, map_vocab=False):
  """The `Parent` of `--warm_start_from=path`.

  Raises:
    WarmStartError: no checkpoint at path, or `variables` is no regex.
  """
  checkpoint = find_checkpoint(path)
  if variables:
    try:
      re.compile(variables)
    except re.error as error:
      raise WarmStartError(f"warm_start_variables={variables}: not a regular "
                           f"expression ({error})") from None
  run = vocab_source.find_run_folder(checkpoint)
  match = _STEP.search(checkpoint)
  return Parent(checkpoint=checkpoint,
                step=int(match.group(1)) if match else None,
                vocab=vocab_source.of_run_folder(run) if run else None,
                variables=variables or None, map_vocab=map_vocab)


@dataclasses.dataclass(frozen=True)
class WarmStart:
  """The checked values of a warm start, ready to assign.

  Attributes:
    parent: the `Parent`.
    values: {model variable name: np.ndarray} to assign.
    fresh: names of the variables left at their initialisation (not
      selected by the regex).
    new_rows: {name: rows initialised as new} of mapped embeddings.
  """
  parent: Parent
  values: dict
  fresh: tuple
  new_rows: dict

  def apply(self, model):
    """Assigns the values to `model`'s variables (built like the one
    `prepare` checked; under any tf.distribute strategy)."""
    variables = run_dir.model_variables(model)
    for name, value in self.values.items():
      variables[name].assign(value)

  def describe(self):
    """One line for the log."""
    step = f" (step {self.parent.step})" if self.parent.step is not None else ""
    line = (f"Warm start from {self.parent.checkpoint}{step}: "
            f"{len(self.values)} of {len(self.values) + len(self.fresh)} "
            "variables loaded; optimizer, step and learning-rate schedule "
            "start anew")
    if self.fresh:
      line += (f"; {len(self.fresh)} left at their initialisation "
               f"(--warm_start_variables={self.parent.variables})")
    for name, count in self.new_rows.items():
      line += f"; {name}: {count} rows of pieces new to the parent's vocabulary"
    return line + "."


def _vocab_files(vocab):
  """{side: file} of a VocabSource (both sides name one file when shared)."""
  return {"inputs": vocab.inputs, "targets": vocab.targets or vocab.inputs}


def _check_vocabularies(parent, run_vocab):
  """Raises WarmStartError when the parent's and the run's vocabularies
  differ (and are not to be mapped) or are of different kinds."""
  if (parent.vocab.targets is None) != (run_vocab.targets is None):
    kinds = {True: "one shared vocabulary", False: "separate input and "
             "target vocabularies"}
    raise WarmStartError(
        f"warm_start_from={parent.checkpoint}: the parent has "
        f"{kinds[parent.vocab.targets is None]} ({parent.vocab.inputs}), this "
        f"run {kinds[run_vocab.targets is None]} ({run_vocab.inputs})")
  if parent.map_vocab:
    return
  ours = _vocab_files(run_vocab)
  for side, theirs in _vocab_files(parent.vocab).items():
    if not (vocab_source.same_file_contents(theirs, ours[side]) or
            Vocabulary.from_file(theirs).pieces() ==
            Vocabulary.from_file(ours[side]).pieces()):
      raise WarmStartError(
          f"warm_start_from={parent.checkpoint}: the parent's vocabulary "
          f"{theirs} differs from this run's {ours[side]}; encode the data "
          f"with the parent's (t2t-datagen --vocab_from={parent.run_folder}, "
          "implied by t2t-trainer --warm_start_from with --generate_data) or "
          "carry its rows over by piece (--warm_start_map_vocab)")


def prepare(parent, model, run_vocab):
  """Reads the parent's checkpoint and checks it against `model`.

  Args:
    parent: a `Parent`.
    model: a model built as the new run's (its variables' names and shapes,
      and the fresh initialisation of what is not read or mapped).
    run_vocab: the new run's `vocab_source.VocabSource` (its data's files).
  Returns:
    A `WarmStart`.
  Raises:
    WarmStartError: the vocabularies differ (without map_vocab), a selected
      variable is missing from the checkpoint or has another shape there, or
      the regex selects nothing.
  """
  if parent.vocab is not None:
    _check_vocabularies(parent, run_vocab)
  elif parent.map_vocab:
    raise WarmStartError(
        f"warm_start_from={parent.checkpoint}: --warm_start_map_vocab needs "
        "the parent's vocabulary, and no run folder holds that checkpoint")
  reader = tf.train.load_checkpoint(parent.checkpoint)
  shapes = reader.get_variable_to_shape_map()
  maps = _row_maps(parent, run_vocab) if parent.map_vocab else {}
  values, fresh, new_rows = {}, [], {}
  for name, variable in run_dir.model_variables(model).items():
    if parent.variables and not re.match(parent.variables, name):
      fresh.append(name)
      continue
    key, shape = checkpoint_key(name), list(variable.shape)
    if key not in shapes:
      raise WarmStartError(
          f"warm_start_from={parent.checkpoint}: this model's variable {name} "
          f"{shape} is not in that checkpoint (another model or hparams set? "
          "--warm_start_variables can leave it out)")
    value = reader.get_tensor(key)
    if name in VOCAB_ROWS and maps:
      rows = maps[VOCAB_ROWS[name]]
      if list(value.shape[1:]) != shape[1:]:
        raise WarmStartError(
            f"warm_start_from={parent.checkpoint}: {name} is "
            f"{list(value.shape)} there and {shape} in this model (another "
            "d_model?)")
      mapped = variable.numpy().copy()
      kept = rows >= 0
      mapped[kept] = value[rows[kept]]
      value, new_rows[name] = mapped, int((~kept).sum())
    elif list(value.shape) != shape:
      raise WarmStartError(
          f"warm_start_from={parent.checkpoint}: {name} is "
          f"{list(value.shape)} there and {shape} in this model (another "
          "hparams set or vocabulary size?)")
    values[name] = value
  if not values:
    raise WarmStartError(
        f"warm_start_variables={parent.variables}: matches none of the "
        "model's variables (names such as encoder_0/self_attention/w_q, "
        "decoder_0/..., embedding/embeddings)")
  return WarmStart(parent=parent, values=values, fresh=tuple(fresh),
                   new_rows=new_rows)


def _row_maps(parent, run_vocab):
  """{side: `vocab_source.row_map`} from the parent's vocabulary to the
  run's."""
  ours = _vocab_files(run_vocab)
  return {side: vocab_source.row_map(Vocabulary.from_file(theirs).pieces(),
                                     Vocabulary.from_file(ours[side]).pieces())
          for side, theirs in _vocab_files(parent.vocab).items()}
