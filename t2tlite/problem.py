"""Problems: a dataset's samples, vocabulary, records and input pipeline.

A text problem is a `Text2TextProblem` subclass that yields
`{"inputs": str, "targets": str}` per split and declares its vocabulary, splits,
shard counts and maximum length; `@register_problem` makes it available by name:

    @register_problem("my_copy")
    class MyCopy(Text2TextProblem):
      vocab_size = 1000
      def generate_samples(self, split, tmp_dir, raw_data_dir=None):
        for line in open(f"{raw_data_dir}/{split}.txt"):
          yield {"inputs": line, "targets": line}

What the trainer, decoder and t2t-datagen call:

    problem = get_problem("translate_ende_wmt")  # or "translate_ende_wmt_rev"
    problem.generate_data(data_dir, tmp_dir, raw_data_dir=None, vocab_size=None)
    vocab = problem.vocabulary(data_dir)  # a t2tlite.data.vocab.Vocabulary
    target_vocab = problem.vocabulary(data_dir, "targets")  # differs only
    # when the problem declares a target_vocab_type
    ds = problem.dataset(data_dir, "train", hp, training=True)
    dist_ds = problem.distributed_dataset(strategy, data_dir, "dev", hp, False)
    pairs = problem.text_pairs(data_dir, "test")  # [(inputs, targets)]
    tree = problem.postprocess(decoded_text, inputs=source_text)

`NAME_rev` is the same problem with inputs and targets swapped: it reads (and
generates) the same files as NAME, swapping when reading (records, text files
and, when the targets have their own vocabulary, the two vocabularies).
"""
import json
import os
import re

from absl import logging

from t2tlite import registry
from t2tlite.data import autotune, datagen, pipeline, records, text_files
from t2tlite.data.samples import DataError, Skipped  # noqa: F401  (re-exported)
from t2tlite.data.vocab import Vocabulary

SPLITS = ("train", "dev", "test")
SIDES = ("inputs", "targets")
REVERSE_SUFFIX = registry.REVERSE_SUFFIX


def _snake_case(name):
  return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _check_side(side):
  if side not in SIDES:
    raise ValueError(f"side={side!r}: expected one of {', '.join(SIDES)}")


def register_problem(name=None):
  """Registers a Problem subclass under a name.

  Use `@register_problem("name")`, or bare `@register_problem` to name it from
  the class name in snake_case (`TranslateEndeWmt` -> `translate_ende_wmt`).
  Names ending in `_rev` are reserved for the reversed variants (the problems
  registry refuses them).
  """
  def decorator(cls, name=name):
    name = name or _snake_case(cls.__name__)
    registry.problems.add(name, cls)
    cls.name = name
    return cls

  if isinstance(name, type):  # bare @register_problem
    return decorator(name, None)
  return decorator


def decode_defaults(name):
  """The decode_defaults of problem `name`, or "" (with a warning) when no
  registered problem has that name, e.g. a plugin that was not loaded."""
  try:
    return get_problem(name).decode_defaults
  except registry.RegistryError:
    logging.warning("Problem %s is not registered (a plugin not loaded?): "
                    "decoding with the generic defaults.", name)
    return ""


def get_problem(name):
  """A new instance of the registered problem `name` (or `NAME_rev`).

  A name of problems joined by "+"
  ("translate_ende_multi30k+translate_enfr_multi30k") is their mixture,
  one problem (`t2tlite.mixture`).

  Raises:
    registry.RegistryError: unknown name; the message lists close names.
  """
  if "+" in name:
    from t2tlite import mixture
    return mixture.MixtureProblem(name.split("+"))
  return registry.problems.get(name)()


class Problem:
  """The reading side of a problem: records, vocabulary and splits in data_dir.

  Attributes:
    name: the name it was obtained by ("translate_ende_wmt_rev").
    data_name: the registered name, used for its files in data_dir.
    reverse: whether inputs and targets are swapped when reading.
    num_shards: {split: number of TFRecord shards} (a split not named has
      one).
    extra_test_splits: names of test sets beyond SPLITS that the problem
      also writes (records and text), e.g. a corpus's later test years.
  """
  name = None  # set by register_problem on the class
  num_shards = {"train": 10, "dev": 1, "test": 1}
  extra_test_splits = ()
  # Decode hparams ("beam_size=4,alpha=0.6") that t2t-decoder, t2t-attention
  # and t2t-exporter start from; --decode_hparams overrides them.
  decode_defaults = ""
  # The problem's own dev metric, which t2t-trainer computes at every
  # evaluation by decoding dev (`t2tlite.train.dev_metric`), higher is
  # better: None (none), "bleu" (sacreBLEU, cased), "bracket_f1" (EVALB),
  # "exact_match" (percent of outputs equal to the targets), or a plugin's
  # own name, scored by its `score_outputs`.
  metric = None

  def __init__(self, reverse=False):
    self.data_name = type(self).name or _snake_case(type(self).__name__)
    self.reverse = reverse
    self.name = self.data_name + (REVERSE_SUFFIX if reverse else "")
    self._vocabs = {}  # path -> ((path, mtime), Vocabulary)

  def generate_data(self, data_dir, tmp_dir=None, raw_data_dir=None,
                    vocab_size=None, progress=None, vocab_from=None):
    """Writes vocabulary and records into data_dir; returns a summary dict.
    vocab_from: another run's vocabulary to reuse instead of training one."""
    raise NotImplementedError

  @property
  def shares_vocabulary(self):
    """Whether inputs and targets use one vocabulary (no target_vocab_type)."""
    return getattr(self, "target_vocab_type", None) is None

  def _data_side(self, side):
    """The side of the stored data that `side` reads (swapped for _rev)."""
    _check_side(side)
    return SIDES[1 - SIDES.index(side)] if self.reverse else side

  def stored_vocab_file(self, data_dir, side="inputs"):
    """Path of the sentencepiece model of a side of the stored data (never
    swapped): vocab.P.model, and vocab.P.targets.model for the targets when
    they have their own vocabulary."""
    _check_side(side)
    separate = side == "targets" and not self.shares_vocabulary
    return os.path.join(os.path.expanduser(data_dir),
                        f"vocab.{self.data_name}"
                        f"{'.targets' if separate else ''}.model")

  def vocab_file(self, data_dir, side="inputs"):
    """Path of the sentencepiece model of `side` ("inputs" or "targets"):
    the same file for both unless the problem declares a target_vocab_type.

    Raises:
      ValueError: an unknown side.
    """
    return self.stored_vocab_file(data_dir, self._data_side(side))

  def vocabulary(self, data_dir, side="inputs"):
    """The `Vocabulary` of `side` saved in data_dir (loaded again only if the
    file changed).

    Raises:
      ValueError: an unknown side.
      DataError: no vocabulary file (t2t-datagen has not been run).
    """
    path = self.vocab_file(data_dir, side)
    if not os.path.exists(path):
      raise DataError(
          f"No vocabulary for {self.data_name} in {data_dir} (expected "
          f"{path}); run t2t-datagen --problem={self.data_name} "
          f"--data_dir={data_dir} first.")
    key = (path, os.stat(path).st_mtime_ns)
    if path not in self._vocabs or self._vocabs[path][0] != key:
      self._vocabs[path] = (key, Vocabulary.from_file(path))
    return self._vocabs[path][1]

  @property
  def splits(self):
    """Every split name of the problem: SPLITS, then extra_test_splits."""
    return SPLITS + tuple(self.extra_test_splits)

  def _check_split(self, split):
    if split not in self.splits:
      raise DataError(f"Unknown split '{split}': expected one of "
                      f"{', '.join(self.splits)}.")

  def shard_files(self, data_dir, split):
    """The complete TFRecord shards of a split (DataError if none/partial)."""
    self._check_split(split)
    return records.find_shards(os.path.expanduser(data_dir), self.data_name,
                               split)

  def split_stats(self, data_dir, split):
    """Datagen statistics of a split: examples, tokens, skips, "lengths"
    ({max(len(inputs), len(targets)) as str: count}, EOS included)."""
    return records.read_stats(self.shard_files(data_dir, split))

  def count_longer(self, data_dir, split, max_length):
    """(examples longer than max_length tokens, all examples) of a split:
    what `dataset` drops, from the datagen statistics."""
    lengths = self.split_stats(data_dir, split)["lengths"]
    return (sum(n for k, n in lengths.items() if int(k) > max_length),
            sum(lengths.values()))

  def dataset(self, data_dir, split, hp, training, input_context=None,
              seed=None, repeat=None):
    """Token-budget batches of one replica's share of a split.

    Args:
      data_dir: where t2t-datagen wrote the records.
      split: "train", "dev" or "test".
      hp: HParams; uses hp.batch_size (padded tokens per replica per batch)
        and hp.max_length (longer examples, EOS included, are dropped; the
        number dropped is logged, see `split_stats`).
      training: shuffle and repeat (unless repeat=False); otherwise one
        deterministic pass.
      input_context: a `tf.distribute.InputContext` (per-replica sharding).
      seed: shuffle seed for reproducible training order.
      repeat: repeat forever; defaults to `training`.

    Returns:
      tf.data.Dataset of {"inputs": int32 [batch, length],
      "targets": int32 [batch, length]}, padded with 0 to the bucket length,
      batch * length <= hp.batch_size.
    """
    files = self.shard_files(data_dir, split)
    too_long, total = self.count_longer(data_dir, split, hp.max_length)
    if too_long:
      logging.info("%s %s: dropping %d of %d examples longer than "
                   "max_length=%d tokens.", self.name, split, too_long, total,
                   hp.max_length)
    return pipeline.make_dataset(
        files, batch_size=hp.batch_size, max_length=hp.max_length,
        training=training, input_context=input_context, swap=self.reverse,
        seed=seed, repeat=training if repeat is None else repeat)

  def distributed_dataset(self, strategy, data_dir, split, hp, training,
                          seed=None):
    """`dataset` per input pipeline via distribute_datasets_from_function
    (its per-device datasets not autotuned: `autotune.off_per_device`)."""
    autotune.off_per_device()
    return strategy.distribute_datasets_from_function(
        lambda context: self.dataset(data_dir, split, hp, training,
                                     input_context=context, seed=seed))

  def stored_text_files(self, data_dir, split):
    """(inputs_path, targets_path) of the dev/test text as datagen stores it
    (never swapped)."""
    self._check_split(split)
    return tuple(os.path.join(os.path.expanduser(data_dir),
                              f"{self.data_name}-{split}.{side}.txt")
                 for side in ("inputs", "targets"))

  def text_files(self, data_dir, split):
    """(inputs_path, targets_path): the dev/test text kept by datagen, one
    sample a line, the same samples as the records (swapped for NAME_rev)."""
    paths = self.stored_text_files(data_dir, split)
    return paths[::-1] if self.reverse else paths

  def text_pairs(self, data_dir, split):
    """[(inputs, targets)] text of a dev/test split, for decoding and scoring.

    Raises:
      DataError: the text files are missing (train has none; or run
        datagen), or of different lengths.
    """
    paths = self.text_files(data_dir, split)
    for path in paths:
      if not os.path.exists(path):
        raise DataError(
            f"{path} does not exist: t2t-datagen keeps the text of the dev "
            f"and test splits only; run t2t-datagen --problem="
            f"{self.data_name} --data_dir={data_dir}.")
    sides = []
    for path in paths:
      with open(path, encoding="utf-8") as f:
        sides.append([line.rstrip("\n") for line in f])
    text_files.check_aligned(
        paths[0], len(sides[0]), paths[1], len(sides[1]),
        remedy=f"run t2t-datagen --problem={self.data_name} "
        f"--data_dir={data_dir} again")
    return list(zip(*sides))

  def sample_pairs(self, pairs, samples):
    """The pairs of `text_pairs` the dev metric decodes: the first
    `samples` (all for samples <= 0; a mixture's: of each member)."""
    return pairs[:samples] if samples > 0 else pairs

  @property
  def target_languages(self):
    """{language: tag} of a mixture's members (`t2tlite.mixture`); {}."""
    return {}

  def postprocess(self, text, inputs=None):
    """Turns decoded target text into the problem's output form (identity
    here; parsing turns a linearized tree into a bracketed tree)."""
    del inputs
    return text

  def score_outputs(self, outputs, pairs):
    """The dev metric of a plugin problem whose `metric` is its own name.

    Args:
      outputs: list of str, the decoded dev targets (not postprocessed).
      pairs: [(inputs, targets)] text of the same dev lines.
    Returns:
      {name: float}, holding at least `metric` (higher is better); every
      entry is logged and written to metrics.jsonl.
    """
    raise NotImplementedError(
        f"problem {self.name}: metric={self.metric!r} is not a built-in "
        "metric (bleu, bracket_f1, exact_match), so the problem must "
        "define score_outputs(outputs, pairs)")

  def decode_constraint(self, input_vocab, target_vocab):
    """The `t2tlite.decode.constraints.DecodeConstraint` every decoded
    output obeys (in t2t-decoder, evaluation and the SavedModel, unless
    the decode hparam constrained=false), or None: none here (parsing:
    well-formed trees over the input's words)."""
    del input_vocab, target_vocab
    return None

  def word_pointer_tables(self, input_vocab, target_vocab):
    """Tables for the decoder's word pointer (hparam word_pointer, see
    `t2tlite.layers.word_pointer`): {"word_starts": bool per input id,
    "word_tokens": bool per target id}, for problems whose target tokens of
    one kind stand for the source words one by one; None here."""
    del input_vocab, target_vocab
    return None

  def postprocess_graph(self, outputs, inputs):
    """`postprocess` as TensorFlow ops, for the SavedModel's text signature
    when outputs are constrained: tf.string [batch] decoded text and source
    text -> tf.string [batch]. The identity here."""
    del inputs
    return outputs

  def datagen_summary(self, data_dir):
    """The summary dict saved by the last complete `generate_data`."""
    path = os.path.join(os.path.expanduser(data_dir),
                        f"{self.data_name}.datagen.json")
    with open(path, encoding="utf-8") as f:
      return json.load(f)


class Text2TextProblem(Problem):
  """A problem made of text pairs. Subclasses implement `generate_samples`.

  Class attributes to declare:
    vocab_type: "bpe" or "unigram" (sentencepiece model type).
    vocab_size: pieces in the shared vocabulary (ids 0-2 included); reduced
      with a warning when the corpus cannot support it.
    target_vocab_type: None (the targets share the input vocabulary), or the
      targets get their own, trained on the targets only (the input one then
      on the inputs only): "word" (one id per whitespace-separated token
      seen in training; unseen tokens become UNK), "bpe" or "unigram".
    target_vocab_size: pieces of a "bpe"/"unigram" target vocabulary
      (default vocab_size); a "word" one has as many as there are tokens.
    vocab_sample_size: at most this many sentences train the vocabulary.
    vocab_byte_fallback: rare characters become UTF-8 byte pieces instead of
      UNK (lossless text; the vocabulary then needs 256 more pieces).
    num_shards: {split: shards}.
    max_length: if set, training examples longer than this many tokens on
      either side (EOS included) are not written (counted in the summary).
  """
  vocab_type = "bpe"
  vocab_size = 8000
  vocab_sample_size = 1_000_000
  vocab_byte_fallback = False
  target_vocab_type = None
  target_vocab_size = None
  max_length = None

  def generate_samples(self, split, tmp_dir, raw_data_dir=None):
    """Yields {"inputs": str, "targets": str} (or `Skipped`) for a split."""
    raise NotImplementedError

  def available_splits(self, tmp_dir, raw_data_dir=None):
    """The splits this source provides; should fail early (DataError) when
    the source is missing. All of SPLITS by default."""
    del tmp_dir, raw_data_dir
    return SPLITS

  def vocab_texts(self, tmp_dir, raw_data_dir=None, side=None):
    """Sentences to train a vocabulary on: the train split's `side`
    ("inputs" or "targets" of the stored data), or both sides (None)."""
    sides = SIDES if side is None else (side,)
    for sample in self.generate_samples("train", tmp_dir, raw_data_dir):
      if not isinstance(sample, Skipped):
        for name in sides:
          yield sample[name]

  def generate_data(self, data_dir, tmp_dir=None, raw_data_dir=None,
                    vocab_size=None, progress=None, vocab_from=None):
    """Trains (or reuses, or with vocab_from copies) the vocabulary and
    writes the records of every available split; see
    `t2tlite.data.datagen.generate`."""
    return datagen.generate(self, data_dir, tmp_dir, raw_data_dir, vocab_size,
                            progress, vocab_from=vocab_from)
