"""Several problems as one:
`--problem=translate_ende_multi30k+translate_enfr_multi30k` trains one
model on both (tensor2tensor's MultiProblem; one-to-many translation with
target-language tags, Johnson et al., 2017).

    mixture = get_problem("translate_ende_multi30k+translate_enfr_multi30k")
    mixture.generate_data(data_dir)   # one vocabulary, each member's records
    mixture.target_languages          # {"de": "<2de>", "fr": "<2fr>"}

Files in data_dir, M the mixture's name (members joined by "+"):

    vocab.M.model              one sentencepiece model over every member:
                               trained on the members' train text (both
                               sides; sentencepiece samples at most
                               vocab_sample_size sentences of them all),
                               the largest member vocab_size unless
                               --vocab_size says, the first member's type;
                               each member's tag a user-defined piece
    M.MEMBER-<split>-...       each member's records and dev/test text, its
                               source lines starting with its tag
    M.datagen.json             the summary

A member's tag is `<2LANG>`, LANG its target language (`languages.language_of`:
its target_lang, else its name). Members must share one vocabulary between
inputs and targets (no target_vocab_type).

Training draws examples from the members (`pipeline.mixed_examples`) by
their numbers of train examples, or hparams mixing_rates, or by size
tempered by mixing_temperature; evaluation decodes every member's dev and
scores each by its metric (`<metric>/<member>` in metrics.jsonl), the mean
being the mixture's metric (`<metric>/mean`): `best/` and early stopping
follow it.

A plugin registers a mixture under a name of its own:

    @register_problem("ende_enfr")
    class EndeEnfr(MixtureProblem):
      members = ("translate_ende_multi30k", "translate_enfr_multi30k")
"""
import json
import os

from absl import logging

from t2tlite import files
from t2tlite import hparams_lib
from t2tlite import problem as problem_lib
from t2tlite.data import datagen, languages, pipeline, vocab_source
from t2tlite.data import vocab as vocab_lib
from t2tlite.data.samples import DataError, Skipped

SEPARATOR = "+"


def is_mixture_name(name):
  return SEPARATOR in name


class MemberView(problem_lib.Text2TextProblem):
  """One member as the mixture stores it: its samples (swapped when a _rev
  member) with the tag before the source, under the mixture's vocabulary
  and the file names M.MEMBER."""

  def __init__(self, mixture, member):
    super().__init__()
    self.member, self.mixture = member, mixture
    self.data_name = self.name = f"{mixture.data_name}.{member.name}"
    self.language = languages.language_of(member)
    self.tag = languages.tag_of(self.language)
    self.num_shards = member.num_shards
    self.extra_test_splits = member.extra_test_splits
    self.max_length = getattr(member, "max_length", None)
    self.metric = member.metric

  def stored_vocab_file(self, data_dir, side="inputs"):
    return self.mixture.stored_vocab_file(data_dir, side)

  def available_splits(self, tmp_dir, raw_data_dir=None):
    return self.member.available_splits(tmp_dir, raw_data_dir)

  def generate_samples(self, split, tmp_dir, raw_data_dir=None):
    # Text that spells a tag stays text (languages.escape_tags).
    known = self.mixture.target_languages
    for sample in self.member.generate_samples(split, tmp_dir, raw_data_dir):
      if isinstance(sample, Skipped):
        yield sample
        continue
      source, target = sample["inputs"], sample["targets"]
      if self.member.reverse:
        source, target = target, source
      yield {"inputs": f"{self.tag} {languages.escape_tags(source, known)}",
             "targets": languages.escape_tags(target, known)}


class MixtureProblem(problem_lib.Text2TextProblem):
  """Problems trained as one (see the module doc).

  Args:
    member_names: the members' problem names (default: the class's
      `members`).
  Raises:
    registry.RegistryError: an unknown member.
    DataError: fewer than two members, a repeated one, two of one
      language, or one with a vocabulary of its own for the targets.
  """
  members = ()
  metric = None  # set per instance

  def __init__(self, member_names=None, reverse=False):
    if reverse:
      raise DataError("a mixture cannot be reversed: reverse its members "
                      "(NAME_rev+...)")
    super().__init__()
    names = tuple(member_names or self.members)
    if type(self).name is None:
      self.data_name = self.name = SEPARATOR.join(names)
    if len(names) < 2 or len(set(names)) != len(names):
      raise DataError(f"problem {self.name}: a mixture needs two or more "
                      "different problems, joined by '+'")
    problems = [problem_lib.get_problem(n) for n in names]
    for member in problems:
      if not member.shares_vocabulary:
        raise DataError(
            f"problem {self.name}: member {member.name} gives its targets "
            "their own vocabulary; a mixture shares one vocabulary")
      if is_mixture_name(member.name) or isinstance(member, MixtureProblem):
        raise DataError(f"problem {self.name}: a mixture of mixtures")
    self.views = [MemberView(self, member) for member in problems]
    langs = [view.language for view in self.views]
    if len(set(langs)) != len(langs):
      raise DataError(
          f"problem {self.name}: two members translate into the same "
          f"language ({', '.join(langs)}): their tags would be one")
    self.vocab_type = problems[0].vocab_type
    self.vocab_size = max(p.vocab_size for p in problems)
    self.vocab_byte_fallback = any(p.vocab_byte_fallback for p in problems)
    self.vocab_sample_size = max(p.vocab_sample_size for p in problems)
    self.decode_defaults = problems[0].decode_defaults
    metrics = {p.metric for p in problems}
    if None in metrics:
      self.metric = None
    else:
      self.metric = (f"{metrics.pop()}/mean" if len(metrics) == 1 else
                     "mean")
    self.extra_test_splits = tuple(
        s for s in problems[0].extra_test_splits
        if all(s in p.extra_test_splits for p in problems))

  @property
  def target_languages(self):
    """{language: tag} of the members, in their order."""
    return {view.language: view.tag for view in self.views}

  def view_of_language(self, language):
    return next(v for v in self.views if v.language == language)

  # ---- writing -------------------------------------------------------------

  def available_splits(self, tmp_dir, raw_data_dir=None):
    found = [set(v.available_splits(tmp_dir, raw_data_dir))
             for v in self.views]
    return tuple(s for s in self.splits if all(s in f for f in found))

  def vocab_texts(self, tmp_dir, raw_data_dir=None, side=None):
    for view in self.views:
      yield from view.member.vocab_texts(tmp_dir, raw_data_dir, side)

  def generate_data(self, data_dir, tmp_dir=None, raw_data_dir=None,
                    vocab_size=None, progress=None, vocab_from=None):
    """The shared vocabulary (trained, reused, or with vocab_from copied
    from a run whose vocabulary holds every tag), then each member's
    records; returns the summary (also M.datagen.json)."""
    data_dir = os.path.expanduser(data_dir)
    os.makedirs(data_dir, exist_ok=True)
    tmp_dir = os.path.expanduser(tmp_dir or os.path.join(data_dir, "tmp"))
    raw_data_dir = raw_data_dir and os.path.expanduser(raw_data_dir)
    for view in self.views:
      view.available_splits(tmp_dir, raw_data_dir)  # fails early
    path = self.stored_vocab_file(data_dir)
    copied = None
    if vocab_from:
      copied = self._adopt_vocabulary(data_dir, vocab_from)
    requested = vocab_size or self.vocab_size
    info = {"file": path, "type": self.vocab_type, "requested": requested,
            "tags": list(self.target_languages.values())}
    if os.path.exists(path):
      size = vocab_lib.Vocabulary.from_file(path).size
      info.update(size=size, reused=True)
      if copied:
        info["copied_from"] = copied
    else:
      self._remove_records(data_dir)
      size = vocab_lib.train_sentencepiece(
          lambda: self.vocab_texts(tmp_dir, raw_data_dir), path, requested,
          model_type=self.vocab_type,
          input_sentence_size=self.vocab_sample_size,
          byte_fallback=self.vocab_byte_fallback,
          user_defined_symbols=list(self.target_languages.values()))
      info.update(size=size, reused=False)
    summary = {"problem": self.name, "data_dir": data_dir, "vocab": info,
               "members": {}}
    for view in self.views:
      member = datagen.generate(view, data_dir, tmp_dir, raw_data_dir,
                                progress=progress)
      summary["members"][view.member.name] = {
          "language": view.language, "tag": view.tag,
          "splits": member["splits"]}
    files.atomic_write_text(
        os.path.join(data_dir, f"{self.data_name}.datagen.json"),
        json.dumps(summary, indent=1))
    return summary

  def _remove_records(self, data_dir):
    for view in self.views:
      datagen.remove_records(data_dir, view.data_name, view.splits)

  def _adopt_vocabulary(self, data_dir, vocab_from):
    try:
      source = vocab_source.resolve(vocab_from)
    except vocab_source.VocabSourceError as error:
      raise DataError(str(error)) from None
    if source.targets:
      raise DataError(f"vocab_from={vocab_from}: that run gives its targets "
                      "their own vocabulary; a mixture shares one")
    pieces = set(vocab_lib.Vocabulary.from_file(source.inputs).pieces())
    missing = [t for t in self.target_languages.values() if t not in pieces]
    if missing:
      raise DataError(
          f"vocab_from={vocab_from}: its vocabulary lacks the tags "
          f"{', '.join(missing)} of {self.name}; train the mixture's own "
          "vocabulary and map the parent's rows by piece "
          "(t2t-trainer --warm_start_map_vocab)")
    destination = self.stored_vocab_file(data_dir)
    if not (os.path.exists(destination) and vocab_source.same_file_contents(
        source.inputs, destination)):
      self._remove_records(data_dir)
      files.atomic_copy(source.inputs, destination)
    return source.inputs

  # ---- reading -------------------------------------------------------------

  def shard_files(self, data_dir, split):
    self._check_split(split)
    return [f for view in self.views for f in view.shard_files(data_dir,
                                                               split)]

  def split_stats(self, data_dir, split):
    stats = [view.split_stats(data_dir, split) for view in self.views]
    lengths = {}
    for s in stats:
      for k, n in s["lengths"].items():
        lengths[k] = lengths.get(k, 0) + n
    return {"examples": sum(s["examples"] for s in stats),
            "lengths": lengths}

  def rates(self, data_dir, hp):
    """Each member's share of the training examples (sums to 1): hp's
    mixing_rates, else by kept train examples ** (1 / mixing_temperature).

    Raises:
      ValueError: mixing_rates of another number of members.
    """
    given = hparams_lib.parse_rates(hp.mixing_rates)
    if given:
      if len(given) != len(self.views):
        raise ValueError(
            f"hparam mixing_rates={hp.mixing_rates}: {len(given)} rates for "
            f"the {len(self.views)} members of {self.name}")
      weights = given
    else:
      weights = []
      for view in self.views:
        too_long, total = view.count_longer(data_dir, "train", hp.max_length)
        weights.append((total - too_long) ** (1.0 / hp.mixing_temperature))
    total = sum(weights)
    return [w / total for w in weights]

  def dataset(self, data_dir, split, hp, training, input_context=None,
              seed=None, repeat=None):
    """Training: the members' examples mixed by `rates`, then batched as
    one problem's; otherwise each member's batches in turn (one pass)."""
    repeat = training if repeat is None else repeat
    if not training:
      datasets = [view.dataset(data_dir, split, hp, False, input_context,
                               seed, repeat) for view in self.views]
      dataset = datasets[0]
      for other in datasets[1:]:
        dataset = dataset.concatenate(other)
      return dataset
    pipeline.check_batch_size(hp.batch_size, hp.max_length)
    rates = self.rates(data_dir, hp)
    logging.info("Mixing %s", ", ".join(
        f"{view.member.name} {rate:.3f}"
        for view, rate in zip(self.views, rates)))
    if input_context is not None and seed is not None:
      seed += input_context.input_pipeline_id
    streams = [pipeline.example_dataset(
        view.shard_files(data_dir, split), hp.max_length, True,
        input_context, seed=seed, repeat=True) for view in self.views]
    return pipeline.batch_examples(
        pipeline.mixed_examples(streams, rates, seed), hp.batch_size,
        hp.max_length)

  def stored_text_files(self, data_dir, split):
    return self.views[0].stored_text_files(data_dir, split)

  def text_pairs(self, data_dir, split):
    """Every member's (tagged) pairs, member after member."""
    return [pair for view in self.views
            for pair in view.text_pairs(data_dir, split)]

  def sample_pairs(self, pairs, samples):
    """The first `samples` pairs of each member (all for samples <= 0)."""
    if samples <= 0:
      return pairs
    taken, counts = [], {}
    for pair in pairs:
      language = languages.line_language(pair[0], self.target_languages)
      if counts.get(language, 0) < samples:
        counts[language] = counts.get(language, 0) + 1
        taken.append(pair)
    return taken

  def postprocess(self, text, inputs=None):
    language = inputs and languages.line_language(inputs,
                                                  self.target_languages)
    if language is None:
      return text
    view = self.view_of_language(language)
    return view.member.postprocess(
        text, inputs=languages.strip_tag(inputs, self.target_languages))

