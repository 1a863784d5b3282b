"""A mixture of problems (t2tlite.mixture) without training: target-language
tags, one vocabulary with the tags as reserved pieces, records written the
same under a seed, and the mixing rates and draws."""
import collections
import json
import os
import re
import shutil
import sys

import pytest

from t2tlite import create_hparams, registry
from t2tlite import mixture as mixture_lib
from t2tlite import problem as problem_lib
from t2tlite.data import languages, pipeline, vocab_source
from t2tlite.data.vocab import Vocabulary, train_sentencepiece

PLUGINS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "support",
                       "plugins")
MIXTURE = "plugin_copy_digits+plugin_reverse_digits"
KNOWN = {"cp": "<2cp>", "plugin_reverse_digits": "<2plugin_reverse_digits>"}


@pytest.fixture(scope="module")
def mixture():
  registry.import_usr_dir(PLUGINS)
  yield problem_lib.get_problem(MIXTURE)
  # As test_datagen.py does: a later fresh import runs the modules again.
  for name in [m for m in sys.modules if m.startswith("t2t_usr_plugins")]:
    del sys.modules[name]


@pytest.fixture(scope="module")
def data_dirs(mixture, tmp_path_factory):
  """The mixture's data generated twice, in two folders."""
  folders = [str(tmp_path_factory.mktemp(f"data{i}")) for i in range(2)]
  for folder in folders:
    mixture.generate_data(folder)
  return folders


def test_tags_name_the_target_language_or_the_problem(mixture):
  assert mixture.target_languages == KNOWN
  assert mixture.metric == "exact_match/mean"
  multi30k = problem_lib.get_problem(
      "translate_ende_multi30k+translate_enfr_multi30k_rev")
  assert multi30k.target_languages == {"de": "<2de>", "en": "<2en>"}
  assert problem_lib.get_problem(
      "translate_ende_multi30k+translate_enfr_multi30k").target_languages == {
          "de": "<2de>", "fr": "<2fr>"}


@pytest.mark.parametrize("name, message", [
    ("plugin_copy_digits+plugin_copy_digits", "two or more different"),
    ("plugin_copy_digits+parsing_wsj", "their own vocabulary"),
    ("translate_ende_multi30k+translate_ende_wmt", "same language"),
])
def test_bad_mixtures_are_one_line_errors(mixture, name, message):
  with pytest.raises(problem_lib.DataError, match=message):
    problem_lib.get_problem(name)
  with pytest.raises(registry.RegistryError, match="plugin_copy_digit"):
    problem_lib.get_problem("plugin_copy_digit+plugin_reverse_digits")


def test_a_reversed_mixture_or_a_mixture_of_mixtures_is_refused(mixture):
  members = ("plugin_copy_digits", "plugin_reverse_digits")
  with pytest.raises(problem_lib.DataError,
                     match="a mixture cannot be reversed: reverse its "
                           "members"):
    mixture_lib.MixtureProblem(members, reverse=True)
  with pytest.raises(problem_lib.DataError,
                     match=re.escape(f"problem {MIXTURE}+plugin_sort_"
                                     "digits: a mixture of mixtures")):
    mixture_lib.MixtureProblem((MIXTURE, "plugin_sort_digits"))


def test_dev_samples_and_postprocessing_go_by_each_lines_tag(
    mixture, data_dirs, monkeypatch):
  """The dev metric's samples (--eval_decode_samples=N) are the first N
  pairs of each member; an output is postprocessed by the member its
  input's tag names, given the input without its tag; an input without a
  known tag leaves the output as it is."""
  pairs = mixture.text_pairs(data_dirs[0], "dev")
  by_language = collections.defaultdict(list)
  for pair in pairs:
    by_language[languages.line_language(pair[0], KNOWN)].append(pair)
  assert sorted(by_language) == sorted(KNOWN)
  assert all(len(some) > 2 for some in by_language.values())
  assert mixture.sample_pairs(pairs, 2) == (
      by_language["cp"][:2] + by_language["plugin_reverse_digits"][:2])
  assert mixture.sample_pairs(pairs, 0) == pairs
  reverse = mixture.view_of_language("plugin_reverse_digits").member
  monkeypatch.setattr(reverse, "postprocess",
                      lambda text, inputs=None: f"{text} (from {inputs})")
  assert mixture.postprocess(
      "2 1", inputs="<2plugin_reverse_digits> 1 2") == "2 1 (from 1 2)"
  for inputs in ("<2cp> 1 2", "1 2", "<2de> 1 2", None):
    assert mixture.postprocess("2 1", inputs=inputs) == "2 1"


def test_vocab_from_a_vocabulary_with_the_tags_is_copied_then_reused(
    mixture, data_dirs, tmp_path):
  """generate_data(vocab_from=...) of a mixture: a vocabulary that holds
  every tag is copied and the members' records encoded with it; a second
  run keeps both. A source with a target vocabulary of its own, or none,
  is a one-line DataError naming it."""
  source = mixture.stored_vocab_file(data_dirs[0])
  data_dir = str(tmp_path / "child")
  first = mixture.generate_data(data_dir, vocab_from=source)
  assert first["vocab"]["copied_from"] == source and first["vocab"]["reused"]
  assert vocab_source.same_file_contents(
      source, mixture.stored_vocab_file(data_dir))
  assert mixture.text_pairs(data_dir, "dev") == mixture.text_pairs(
      data_dirs[0], "dev")
  again = mixture.generate_data(data_dir, vocab_from=source)
  assert all(split["reused_shards"] == split["shards"]
             for member in again["members"].values()
             for split in member["splits"].values())
  two = tmp_path / "two_vocabularies"
  two.mkdir()
  for name in (vocab_source.RUN_VOCAB_FILE,
               vocab_source.RUN_TARGET_VOCAB_FILE):
    shutil.copy(source, two / name)
  for bad, message in ((two, "gives its targets their own vocabulary"),
                       (tmp_path / "no_run", "vocab_from")):
    with pytest.raises(problem_lib.DataError, match=message) as error:
      mixture.generate_data(str(tmp_path / "refused"), vocab_from=str(bad))
    assert str(bad) in str(error.value)


def test_lines_get_the_tag_of_their_language():
  assert languages.tag_lines(["1 2", "<2cp> 3", ""], KNOWN,
                             "plugin_reverse_digits") == [
      "<2plugin_reverse_digits> 1 2", "<2cp> 3", ""]
  assert languages.tag_lines(["1", "2"], KNOWN, ["cp", "cp"]) == [
      "<2cp> 1", "<2cp> 2"]
  assert languages.tag_lines(["1 2"], {}) == ["1 2"]
  with pytest.raises(languages.LanguageError,
                     match="unknown target_language 'de': this model knows "
                           "cp, plugin_reverse_digits"):
    languages.tag_lines(["1 2"], KNOWN, "de")
  with pytest.raises(languages.LanguageError, match="is needed"):
    languages.tag_lines(["1 2"], KNOWN)
  # A command names its file and the line.
  with pytest.raises(languages.LanguageError,
                     match="^--source_file=in.txt line 2: a target language "
                           "is needed"):
    languages.tag_lines(["<2cp> 1", "2"], KNOWN, where="--source_file=in.txt")
  # An unknown language for all lines is no line's fault.
  with pytest.raises(languages.LanguageError,
                     match="^unknown target_language 'de'"):
    languages.tag_lines(["<2cp> 1", "2"], KNOWN, "de",
                        where="--source_file=in.txt")
  with pytest.raises(languages.LanguageError, match="knows no target"):
    languages.tag_lines(["1 2"], {}, "de")


def test_a_line_starts_with_a_tag_only_if_whitespace_follows_it():
  assert languages.line_language("<2cp>1 2", KNOWN) is None
  assert languages.tag_lines(["<2cp>1 2"], KNOWN, "cp") == ["<2cp> < 2cp>1 2"]
  assert languages.line_language("<2cp>", KNOWN) == "cp"


def test_strip_tag_takes_off_a_known_leading_tag_only():
  assert languages.strip_tag("<2cp>  1 2", KNOWN) == "1 2"
  assert languages.strip_tag("1 2", KNOWN) == "1 2"
  # Not a tag of this model, or not leading: text.
  assert languages.strip_tag("<2de> 1", KNOWN) == "<2de> 1"
  assert languages.strip_tag("1 <2cp> 2", KNOWN) == "1 <2cp> 2"


def test_a_tagged_line_still_checks_the_language_given_for_it():
  with pytest.raises(languages.LanguageError,
                     match="^--source_file=in.txt line 2: unknown "
                           "target_language 'de'"):
    languages.tag_lines(["1", "<2cp> 2"], KNOWN, ["cp", "de"],
                        where="--source_file=in.txt")


def test_a_language_error_lists_the_known_languages_sorted():
  known = {"fr": "<2fr>", "de": "<2de>", "en": "<2en>"}
  with pytest.raises(languages.LanguageError,
                     match="unknown target_language 'it': this model knows "
                           "de, en, fr$"):
    languages.check_language("it", known)


def test_text_that_spells_a_tag_stays_text(mixture, data_dirs):
  """Only the first tag of a line means a language: a known tag's
  characters elsewhere (in a line to decode, or in a sample) are written
  `< 2LANG>`, which the vocabulary encodes as text."""
  assert languages.tag_lines(["1 <2cp> 2", "<2cp> 3 <2cp>", "<2cpx> 4"],
                             KNOWN, "plugin_reverse_digits") == [
      "<2plugin_reverse_digits> 1 < 2cp> 2", "<2cp> 3 < 2cp>",
      "<2plugin_reverse_digits> <2cpx> 4"]
  view = mixture.views[0]
  view.member.generate_samples = lambda *args: iter(
      [{"inputs": "1 <2cp> 2", "targets": "<2plugin_reverse_digits> 3"}])
  try:
    assert list(view.generate_samples("train", None)) == [
        {"inputs": "<2cp> 1 < 2cp> 2",
         "targets": "< 2plugin_reverse_digits> 3"}]
  finally:
    del view.member.generate_samples
  vocab = mixture.vocabulary(data_dirs[0])
  ids = vocab.encode_text("<2cp> 1 < 2cp> 2", add_eos=False)
  assert ids.count(3) == 1 and 4 not in ids


def test_mixing_rates_parse_with_their_commas():
  hp = create_hparams("transformer_tiny",
                      "mixing_rates=0.25,0.75,dropout=0.2")
  assert (hp.mixing_rates, hp.dropout) == ("0.25,0.75", 0.2)
  for bad in ("mixing_rates=a,b", "mixing_rates=0,0",
              "mixing_temperature=0"):
    with pytest.raises(ValueError, match="mixing_"):
      create_hparams("transformer_tiny", bad)


def test_one_vocabulary_with_the_tags_and_the_same_records(mixture,
                                                           data_dirs):
  first, second = data_dirs
  vocab = mixture.vocabulary(first)
  assert vocab.pieces()[3:5] == list(KNOWN.values())
  # A tag is one id wherever it stands; text never makes it.
  assert vocab.encode_text("<2cp> 1 2", add_eos=False)[:2] == [
      vocab.pieces().index("▁"), 3]
  assert 3 not in vocab.encode_text("< 2 cp > 1", add_eos=False)
  for view in mixture.views:
    for split in ("train", "dev"):
      for a, b in zip(view.shard_files(first, split),
                      view.shard_files(second, split)):
        with open(a, "rb") as fa, open(b, "rb") as fb:
          assert fa.read() == fb.read()
    pairs = view.text_pairs(first, "dev")
    assert all(source.startswith(view.tag + " ") for source, _ in pairs)
  assert Vocabulary.from_file(mixture.vocab_file(second)).model_proto == (
      vocab.model_proto)
  stats = mixture.split_stats(first, "train")
  assert stats["examples"] == 6000
  # Each length's count is the members' counts added up.
  members = [view.split_stats(first, "train")["lengths"]
             for view in mixture.views]
  assert set(members[0]) & set(members[1])
  assert stats["lengths"] == {
      k: sum(m.get(k, 0) for m in members) for k in {*members[0],
                                                     *members[1]}}


def test_rates_by_size_temperature_or_given(mixture, data_dirs):
  hp = create_hparams("transformer_tiny", "max_length=16")
  assert mixture.rates(data_dirs[0], hp) == [0.5, 0.5]
  hp = hp.replace(mixing_rates="1,3")
  assert mixture.rates(data_dirs[0], hp) == [0.25, 0.75]
  with pytest.raises(ValueError, match="3 rates for the 2 members"):
    mixture.rates(data_dirs[0], hp.replace(mixing_rates="1,1,1"))


def test_rates_by_size_count_the_kept_examples_tempered(mixture, data_dirs,
                                                       tmp_path):
  """Members of different kept sizes: the datagen statistics of a copy of
  the data say that half of each length of the second member's train
  examples is longer than max_length (which training drops)."""
  data_dir = str(tmp_path / "data")
  shutil.copytree(data_dirs[0], data_dir)
  for path in mixture.views[1].shard_files(data_dir, "train"):
    with open(path + ".json", encoding="utf-8") as f:
      stats = json.load(f)
    lengths = stats["lengths"]
    stats["lengths"] = {**{k: n - n // 2 for k, n in lengths.items()},
                        "99": sum(n // 2 for n in lengths.values())}
    with open(path + ".json", "w", encoding="utf-8") as f:
      json.dump(stats, f)
  hp = create_hparams("transformer_tiny", "max_length=16")
  kept = [total - longer for longer, total in (
      view.count_longer(data_dir, "train", 16) for view in mixture.views)]
  assert kept[0] == 3000 and 1400 < kept[1] < 1600
  assert mixture.rates(data_dir, hp) == pytest.approx(
      [kept[0] / sum(kept), kept[1] / sum(kept)])
  # Temperature 2: by the square roots of the sizes, nearer to even.
  roots = [n ** 0.5 for n in kept]
  assert mixture.rates(data_dir, hp.replace(mixing_temperature=2.0)) == (
      pytest.approx([roots[0] / sum(roots), roots[1] / sum(roots)]))


def test_draws_follow_the_rates_and_the_seed():
  import tensorflow as tf
  draws = [int(i) for i in pipeline.mixing_choices([1, 3], seed=5)
           .take(4000).as_numpy_iterator()]
  again = [int(i) for i in pipeline.mixing_choices([1, 3], seed=5)
           .take(4000).as_numpy_iterator()]
  other = [int(i) for i in pipeline.mixing_choices([1, 3], seed=6)
           .take(4000).as_numpy_iterator()]
  assert draws == again != other
  assert abs(collections.Counter(draws)[1] / 4000 - 0.75) < 0.03
  streams = [tf.data.Dataset.from_tensors(tf.constant(i, tf.int64)).repeat()
             for i in range(2)]
  mixed = [int(i) for i in pipeline.mixed_examples(streams, [1, 3], seed=5)
           .take(4000).as_numpy_iterator()]
  assert mixed == draws


def test_a_reversed_member_is_stored_with_its_sides_swapped(mixture):
  mix = problem_lib.get_problem("plugin_copy_digits+plugin_reverse_digits_rev")
  view = mix.views[1]
  assert view.member.reverse and view.tag == "<2plugin_reverse_digits_rev>"
  # NAME_rev generates NAME's samples (its files hold them as they are).
  stored = list(problem_lib.get_problem(
      "plugin_reverse_digits").generate_samples("dev", None))
  assert list(view.member.generate_samples("dev", None)) == stored
  assert list(view.generate_samples("dev", None)) == [
      {"inputs": f"{view.tag} {s['targets']}", "targets": s["inputs"]}
      for s in stored]
  assert any(s["inputs"] != s["targets"] for s in stored)


def test_members_of_different_metrics_and_vocabulary_sizes(mixture):
  """The mixture's vocabulary is as large as its largest member's; members
  scored by different metrics are followed by the mean of their scores, and
  a member scored by none leaves the mixture without a metric."""
  mix = problem_lib.get_problem("plugin_copy_digits+translate_ende_multi30k")
  assert mix.vocab_size == 8000
  assert mix.metric == "mean"
  # A member without a metric: the mixture has none (teacher-forced
  # evaluations only).
  assert problem_lib.get_problem("plugin_sort_digits").metric is None
  assert problem_lib.get_problem(
      "plugin_copy_digits+plugin_sort_digits").metric is None


def test_vocab_from_a_vocabulary_without_the_tags_is_refused(mixture,
                                                            tmp_path):
  source = str(tmp_path / "digits.model")
  train_sentencepiece(lambda: iter(["1 2 3 4 5 6 7 8 9 0"]), source, None,
                      model_type="word")
  data_dir = tmp_path / "child"
  with pytest.raises(problem_lib.DataError,
                     match="lacks the tags <2cp>, <2plugin_reverse_digits> "
                           f"of {re.escape(MIXTURE)}"):
    mixture.generate_data(str(data_dir), vocab_from=source)
  assert not os.path.exists(mixture.stored_vocab_file(str(data_dir)))


def test_a_registered_mixture_stores_its_files_under_its_name(mixture,
                                                             monkeypatch):
  # Registered in a copy of the problems, dropped after the test.
  monkeypatch.setattr(registry.problems, "_entries",
                      dict(registry.problems._entries))

  @problem_lib.register_problem("copy_and_reverse")
  class CopyAndReverse(mixture_lib.MixtureProblem):
    members = ("plugin_copy_digits", "plugin_reverse_digits")

  mix = problem_lib.get_problem("copy_and_reverse")
  assert isinstance(mix, CopyAndReverse)
  assert mix.name == mix.data_name == "copy_and_reverse"
  assert mix.vocab_file("/d") == "/d/vocab.copy_and_reverse.model"
  assert [view.data_name for view in mix.views] == [
      "copy_and_reverse.plugin_copy_digits",
      "copy_and_reverse.plugin_reverse_digits"]


def test_evaluation_reads_every_members_batches(mixture, data_dirs):
  hp = create_hparams("transformer_tiny", "max_length=16")
  tags = collections.Counter()
  for batch in mixture.dataset(data_dirs[0], "dev", hp, training=False):
    for row in batch["inputs"].numpy():
      tags.update({3, 4} & set(row.tolist()))  # the tags' ids
  expected = collections.Counter(
      languages.line_language(source, KNOWN)
      for source, _ in mixture.text_pairs(data_dirs[0], "dev"))
  assert tags == {3: expected["cp"], 4: expected["plugin_reverse_digits"]}
