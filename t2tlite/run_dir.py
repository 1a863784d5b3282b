"""What a training run leaves in its output_dir, and how other tools read it.

    output_dir/
      hparams.json        the HParams the model was built with
      run.json            model and problem names, vocabulary size and
                          source, longest training example, flags used,
                          the planned length of a --train_minutes run, a
                          mixture's target languages and their tags
      metrics.jsonl       one line per evaluation (t2tlite.train.best)
      best/               the best checkpoint by the dev metric
      vocab.model         a copy of the sentencepiece model (so the folder is
                          self-contained for decoding and export)
      vocab.targets.model a copy of the targets' own model, when the problem
                          has one (run.json's target_vocab_source is then
                          set)
      ckpt-N.*, checkpoint  tf.train.CheckpointManager files
      averaged/           checkpoints written by t2t-avg-checkpoints

Every file is written under a temporary name and renamed when complete.
"""
import dataclasses
import json
import os

import tensorflow as tf

from t2tlite import files
from t2tlite.data.vocab_source import RUN_TARGET_VOCAB_FILE
from t2tlite.data.vocab_source import RUN_VOCAB_FILE
from t2tlite.data.vocab_source import same_file_contents
from t2tlite.hparams_lib import HParams
from t2tlite.models import DEFAULT_MODEL, build_model, word_pointer_tables

HPARAMS_FILE = "hparams.json"
RUN_FILE = "run.json"
VOCAB_FILE = RUN_VOCAB_FILE
TARGET_VOCAB_FILE = RUN_TARGET_VOCAB_FILE


@dataclasses.dataclass(frozen=True)
class RunInfo:
  """What decoding and export need to rebuild a trained model."""
  hparams: HParams
  problem: str
  vocab_size: int
  vocab_file: str          # the copy inside output_dir
  # The targets' vocabulary: vocab_size and vocab_file again when shared.
  target_vocab_size: int
  target_vocab_file: str
  flags: dict
  model: str = DEFAULT_MODEL
  # Tokens (EOS included) of the longest training example, inputs or
  # targets; None for runs that did not record it.
  longest_train_example: int | None = None
  # A mixture's {language: tag} (t2tlite.data.languages); {} otherwise.
  target_languages: dict = dataclasses.field(default_factory=dict)

  @property
  def shares_vocabulary(self):
    return self.target_vocab_file == self.vocab_file

  @property
  def model_target_vocab_size(self):
    """What build_model's target_vocab_size takes: None when shared."""
    return None if self.shares_vocabulary else self.target_vocab_size


def _copy_into(source, output_dir, name):
  """Copies `source` to output_dir/name (temporary name, then rename)."""
  copy = os.path.join(output_dir, name)
  if os.path.abspath(source) != os.path.abspath(copy):
    files.atomic_copy(source, copy)


def write_run_info(output_dir, hp, problem, vocab_size, vocab_source,
                   flags=None, model=DEFAULT_MODEL, longest_train_example=None,
                   target_vocab_size=None, target_vocab_source=None,
                   parent=None, target_languages=None):
  """Saves hparams.json, run.json and a copy of the vocabulary (or two).

  Args:
    vocab_size, vocab_source: the (input) vocabulary's size and model file.
    model: the registered model name (t2tlite.registry.models).
    longest_train_example: tokens of the longest example trained on, which
      the decoder compares its inputs with.
    target_vocab_size, target_vocab_source: the targets' own vocabulary;
      None when they share the input vocabulary.
    parent: None, or the run's lineage when it was warm-started
      (`t2tlite.train.warm_start.Parent.to_json`); a restart keeps the one
      recorded.
    target_languages: a mixture's {language: tag}, which decoding and
      export read (None or {}: a run of one problem).
  """
  if (target_vocab_source is None) != (target_vocab_size is None):
    raise ValueError("write_run_info: give both target_vocab_size and "
                     "target_vocab_source, or neither (shared vocabulary)")
  tf.io.gfile.makedirs(output_dir)
  _copy_into(vocab_source, output_dir, VOCAB_FILE)
  if target_vocab_source is not None:
    _copy_into(target_vocab_source, output_dir, TARGET_VOCAB_FILE)
    target_vocab_source = os.path.abspath(target_vocab_source)
  files.atomic_write_text(os.path.join(output_dir, HPARAMS_FILE),
                          hp.to_json())
  # A restart keeps the run's plan and its parent.
  plan = read_plan(output_dir)
  parent = parent or read_parent(output_dir)
  run = {"problem": problem, "vocab_size": vocab_size,
         "vocab_source": os.path.abspath(vocab_source),
         "target_vocab_size": target_vocab_size or vocab_size,
         "target_vocab_source": target_vocab_source, "flags": flags or {},
         "model": model, "longest_train_example": longest_train_example}
  if plan is not None:
    run["plan"] = plan
  if parent is not None:
    run["parent"] = parent
  if target_languages:
    run["target_languages"] = dict(target_languages)
  files.atomic_write_text(os.path.join(output_dir, RUN_FILE),
                          json.dumps(run, indent=2, sort_keys=True))


def _run_json_entry(output_dir, key):
  """run.json's `key`, or None (no run.json yet, or no such entry)."""
  path = os.path.join(output_dir, RUN_FILE)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    return json.load(f).get(key)


def read_plan(output_dir):
  """The "plan" of run.json (t2tlite.train.budget.Plan as a dict), or None
  (no run.json yet, or a run of fixed train_steps)."""
  return _run_json_entry(output_dir, "plan")


def read_parent(output_dir):
  """The "parent" of run.json (where a warm-started run's first weights came
  from: path, checkpoint, step, vocabulary), or None."""
  return _run_json_entry(output_dir, "parent")


def record_plan(output_dir, plan):
  """Adds the planned length of a --train_minutes run to run.json."""
  path = os.path.join(output_dir, RUN_FILE)
  with tf.io.gfile.GFile(path) as f:
    run = json.load(f)
  run["plan"] = plan
  files.atomic_write_text(path, json.dumps(run, indent=2, sort_keys=True))


def read_run_info(output_dir):
  """Reads what `write_run_info` saved.

  Raises:
    FileNotFoundError: output_dir holds no trained run.
  """
  paths = [os.path.join(output_dir, name)
           for name in (HPARAMS_FILE, RUN_FILE, VOCAB_FILE)]
  missing = [p for p in paths if not tf.io.gfile.exists(p)]
  if missing:
    raise FileNotFoundError(
        f"output_dir={output_dir} is not a t2tlite training folder: missing "
        f"{', '.join(missing)} (t2t-trainer writes them when it starts).")
  with tf.io.gfile.GFile(paths[0]) as f:
    hp = HParams.from_json(f.read(), source=paths[0])
  with tf.io.gfile.GFile(paths[1]) as f:
    run = json.load(f)
  target_vocab_file = paths[2]
  if run.get("target_vocab_source"):  # absent in runs of a shared vocabulary
    target_vocab_file = os.path.join(output_dir, TARGET_VOCAB_FILE)
    if not tf.io.gfile.exists(target_vocab_file):
      raise FileNotFoundError(
          f"output_dir={output_dir}: run.json names a target vocabulary but "
          f"{target_vocab_file} is missing (t2t-trainer copies it there when "
          "it starts).")
  return RunInfo(hparams=hp, problem=run["problem"],
                 vocab_size=run["vocab_size"], vocab_file=paths[2],
                 target_vocab_size=run.get("target_vocab_size",
                                           run["vocab_size"]),
                 target_vocab_file=target_vocab_file,
                 flags=run.get("flags", {}),
                 model=run.get("model", DEFAULT_MODEL),
                 longest_train_example=run.get("longest_train_example"),
                 target_languages=run.get("target_languages") or {})


def model_variables(model):
  """{path without the model's own name: variable} for every model weight.

  Checkpoints key weights by these paths rather than by Keras's object graph,
  so that any rebuilt model (whatever its instance name) restores them, and
  averaging can read them by name.
  """
  return {v.path.split("/", 1)[1]: v for v in model.weights}


def make_checkpoint(model, optimizer=None):
  """A tf.train.Checkpoint of the model's weights (and optimizer state)."""
  if optimizer is None:
    return tf.train.Checkpoint(model=model_variables(model))
  return tf.train.Checkpoint(model=model_variables(model), optimizer=optimizer)


class DamagedCheckpointError(ValueError):
  """A checkpoint's files cannot be read (e.g. a truncated .data-* file)."""


def restore(checkpoint, path):
  """`checkpoint.restore(path)`, naming the damaged file when the
  checkpoint cannot be read (TensorFlow's own error is an IndexError "Read
  less bytes than requested" for a truncated data file).

  Returns:
    The restore status.
  Raises:
    DamagedCheckpointError: one line, naming the data file(s) and sizes.
  """
  try:
    return checkpoint.restore(path)
  except (IndexError, tf.errors.OpError) as error:
    raise DamagedCheckpointError(
        f"checkpoint {path} is damaged: {_describe_files(path)} cannot be "
        f"read ({type(error).__name__}: {str(error).splitlines()[0]}); "
        "name an intact one with checkpoint_path (an older "
        "OUTPUT_DIR/ckpt-N, or OUTPUT_DIR/best).") from None


def _describe_files(prefix):
  """"P.data-00000-of-00001 (1234 bytes)" for each data file of a prefix."""
  names = tf.io.gfile.glob(prefix + ".data-*") or [prefix + ".data-*"]
  return ", ".join(
      f"{name} ({tf.io.gfile.stat(name).length} bytes)"
      if tf.io.gfile.exists(name) else f"{name} (missing)" for name in names)


def checkpoints_newest_first(output_dir):
  """The checkpoint prefixes the 'checkpoint' file of output_dir lists,
  newest first ([] when none)."""
  state = tf.train.get_checkpoint_state(output_dir)
  if not state:
    return []
  paths = list(state.all_model_checkpoint_paths) or [
      state.model_checkpoint_path]
  return [p for p in reversed(paths) if tf.io.gfile.exists(p + ".index")]


def latest_checkpoint(output_dir, checkpoint_path=None):
  """The checkpoint to load: `checkpoint_path` if given, else the newest one.

  `checkpoint_path` may be a checkpoint prefix (".../ckpt-7") or a folder.

  Raises:
    FileNotFoundError: with the folder that was searched.
  """
  if checkpoint_path:
    if tf.io.gfile.isdir(checkpoint_path):
      found = tf.train.latest_checkpoint(checkpoint_path)
      if found:
        return found
    elif tf.io.gfile.exists(checkpoint_path + ".index"):
      return checkpoint_path
    raise FileNotFoundError(
        f"checkpoint_path={checkpoint_path}: no checkpoint there (expected a "
        "prefix such as OUTPUT_DIR/ckpt-100 with its .index file, or a folder "
        "with a 'checkpoint' file).")
  found = tf.train.latest_checkpoint(output_dir)
  if not found:
    raise FileNotFoundError(
        f"No checkpoint in output_dir={output_dir}: train first with "
        "t2t-trainer, or name one with checkpoint_path.")
  return found


def load_trained_model(output_dir, checkpoint_path=None, dtype=None):
  """Rebuilds the model of a run (the class run.json names) and restores its
  weights.

  Returns:
    (model, RunInfo, the checkpoint path used).
  """
  info = read_run_info(output_dir)
  path = latest_checkpoint(output_dir, checkpoint_path)
  model = build_run_model(info, dtype=dtype)
  restore(make_checkpoint(model), path).expect_partial()
  return model, info, path


def build_run_model(info, dtype=None):
  """A freshly built (untrained) model of a run's class and vocabularies."""
  return build_model(info.hparams, info.vocab_size, dtype=dtype,
                     model=info.model,
                     target_vocab_size=info.model_target_vocab_size,
                     word_pointer=_word_pointer_tables(info))


def _word_pointer_tables(info):
  """The word pointer's tables, from the run's problem and vocabulary
  copies, when its hparams ask for one (else None, reading nothing)."""
  if not info.hparams.word_pointer:
    return None
  from t2tlite import problem as problem_lib
  from t2tlite.data.vocab import Vocabulary
  vocab = Vocabulary.from_file(info.vocab_file)
  target_vocab = (vocab if info.shares_vocabulary else
                  Vocabulary.from_file(info.target_vocab_file))
  return word_pointer_tables(info.hparams,
                             problem_lib.get_problem(info.problem), vocab,
                             target_vocab)


# Several runs' models at once: the members of an ensemble.



def _resolve_member(output_dir, path):
  """(RunInfo, checkpoint) of one ensemble member: `path` is a run folder
  (its newest checkpoint), or a checkpoint prefix or checkpoint folder
  (of the run holding it, else of `output_dir`'s run)."""
  if os.path.isfile(os.path.join(path, RUN_FILE)):
    return read_run_info(path), latest_checkpoint(path)
  checkpoint = latest_checkpoint(output_dir, path)
  # A checkpoint of another run (OUTPUT_DIR/ckpt-N, or under OUTPUT_DIR/
  # averaged or best) is that run's: its problem and vocabulary are checked.
  folder = os.path.dirname(checkpoint)
  for run in (folder, os.path.dirname(folder)):
    if os.path.isfile(os.path.join(run, RUN_FILE)):
      return read_run_info(run), checkpoint
  return read_run_info(output_dir), checkpoint


def check_same_problem_and_vocab(members):
  """Raises ValueError naming the first member whose problem or
  vocabularies differ from the first member's.

  Args:
    members: [(RunInfo, checkpoint path)].
  """
  (first, first_path), *others = members
  for info, path in others:
    if info.problem != first.problem:
      raise ValueError(
          f"checkpoint_path: {path} was trained on problem {info.problem} "
          f"but {first_path} on {first.problem}; an ensemble needs one "
          "problem and vocabulary")
    for name, a, b in (("vocabulary", first.vocab_file, info.vocab_file),
                       ("target vocabulary", first.target_vocab_file,
                        info.target_vocab_file)):
      if not same_file_contents(a, b):
        raise ValueError(
            f"checkpoint_path: the {name} of {path} ({b}) differs from that "
            f"of {first_path} ({a}); an ensemble needs one vocabulary")


def resolve_members(output_dir, paths):
  """[(RunInfo, checkpoint)] of an ensemble's members (`load_models`'
  arguments), checked before any loads.

  Raises:
    FileNotFoundError: a member without a checkpoint.
    ValueError: members of different problems or vocabularies.
  """
  members = [_resolve_member(output_dir, path) for path in paths]
  check_same_problem_and_vocab(members)
  return members


def load_models(output_dir, paths, dtype=None):
  """Loads the members of an ensemble (`decode.ensemble.Ensemble`).

  Args:
    output_dir: the run whose checkpoints bare prefixes or checkpoint
      folders name (and whose problem and vocabulary the ensemble uses).
    paths: run folders, checkpoint prefixes or checkpoint folders.
    dtype: the models' Keras dtype policy name (None: float32).
  Returns:
    (list of models, the first member's RunInfo, list of checkpoints).
  Raises:
    FileNotFoundError: a member without a checkpoint.
    ValueError: members of different problems or vocabularies.
    DamagedCheckpointError: a member's checkpoint cannot be read.
  """
  members = resolve_members(output_dir, paths)
  models = []
  for info, checkpoint in members:
    model = build_run_model(info, dtype=dtype)
    restore(make_checkpoint(model), checkpoint).expect_partial()
    models.append(model)
  return models, members[0][0], [checkpoint for _, checkpoint in members]



def load_ensemble(output_dir, paths, dtype=None):
  """`load_models` as one model: (decode.ensemble.Ensemble, the first
  member's RunInfo, its checkpoints joined by commas)."""
  from t2tlite.decode import ensemble
  models, info, checkpoints = load_models(output_dir, paths, dtype=dtype)
  return ensemble.Ensemble(models), info, ",".join(checkpoints)
