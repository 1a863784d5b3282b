"""Problem registry, NAME_rev, the built-in problems' samples, raw-folder
resolution and the bad-input errors of the translation problems."""
import gzip
import os
import sys
import types

import pytest

import t2tlite  # noqa: F401
import t2tlite.problems  # noqa: F401  (registers the built-in problems)
from corpora import read_lines, shared_corpus, write_lines
from t2tlite import problem as problem_lib
from t2tlite import registry
from t2tlite.data import text_files
from t2tlite.data import vocab as vocab_lib
from t2tlite.data.samples import DataError, Skipped
from t2tlite.problems import translate


@pytest.fixture
def fresh_problem_registry(monkeypatch):
  monkeypatch.setattr(registry, "problems",
                      registry.make_problem_registry(builtins=None))


def test_builtin_problems_are_registered():
  assert {"translate_ende_wmt", "translate_enfr_wmt", "parsing_wsj",
          "algorithmic_reverse"} <= set(registry.problems.names())


def test_reversed_variant_shares_files_and_swaps():
  forward = problem_lib.get_problem("translate_ende_wmt")
  backward = problem_lib.get_problem("translate_ende_wmt_rev")
  assert (forward.reverse, backward.reverse) == (False, True)
  assert backward.name == "translate_ende_wmt_rev"
  assert backward.data_name == forward.data_name == "translate_ende_wmt"
  assert backward.vocab_file("/d") == forward.vocab_file("/d")
  assert backward.text_files("/d", "dev") == forward.text_files("/d",
                                                                "dev")[::-1]


def test_unknown_problem_lists_close_names():
  with pytest.raises(registry.RegistryError) as error:
    problem_lib.get_problem("translate_ende_wtm")
  assert "translate_ende_wmt" in str(error.value)
  with pytest.raises(registry.RegistryError, match="algorithmic_reverse_rev"):
    problem_lib.get_problem("algorithmic_revers_rev")


def test_register_problem_names(fresh_problem_registry):
  @problem_lib.register_problem
  class MyCopyTask(problem_lib.Text2TextProblem):
    pass

  @problem_lib.register_problem("explicit_name")
  class Other(problem_lib.Text2TextProblem):
    pass

  assert registry.problems.names() == ["explicit_name", "my_copy_task"]
  assert problem_lib.get_problem("my_copy_task_rev").data_name == "my_copy_task"
  explicit = problem_lib.get_problem("explicit_name")
  assert isinstance(explicit, Other)
  # Its files are named by its registered name, not by its class.
  assert explicit.data_name == "explicit_name"
  assert explicit.vocab_file("/d") == "/d/vocab.explicit_name.model"
  with pytest.raises(registry.RegistryError, match="already registered"):
    problem_lib.register_problem("explicit_name")(MyCopyTask)
  with pytest.raises(ValueError, match="reserved"):
    problem_lib.register_problem("thing_rev")(Other)


def test_bare_register_problem_splits_words_after_digits(
    fresh_problem_registry):
  @problem_lib.register_problem
  class Wmt14EnDe(problem_lib.Text2TextProblem):
    pass

  assert Wmt14EnDe.name == "wmt14_en_de"
  assert registry.problems.names() == ["wmt14_en_de"]


class SideTexts(problem_lib.Text2TextProblem):
  """Three train samples, the middle one skipped, and a later test set."""
  extra_test_splits = ("test2017",)

  def generate_samples(self, split, tmp_dir, raw_data_dir=None):
    assert split == "train"
    yield {"inputs": "a b", "targets": "x"}
    yield Skipped("empty line", "train.en:2")
    yield {"inputs": "c", "targets": "y z"}


def test_vocabulary_text_is_the_train_samples_of_the_side_asked():
  problem = SideTexts()
  assert list(problem.vocab_texts(None, side="targets")) == ["x", "y z"]
  assert list(problem.vocab_texts(None, side="inputs")) == ["a b", "c"]
  assert list(problem.vocab_texts(None)) == ["a b", "x", "c", "y z"]


def test_extra_test_splits_are_read_like_the_others(tmp_path):
  problem = SideTexts()
  assert problem.splits == ("train", "dev", "test", "test2017")
  write_lines(tmp_path / "side_texts-test2017.inputs.txt", ["a b", "c"])
  write_lines(tmp_path / "side_texts-test2017.targets.txt", ["b a", "c"])
  assert problem.text_pairs(str(tmp_path), "test2017") == [("a b", "b a"),
                                                           ("c", "c")]
  with pytest.raises(DataError, match="run t2t-datagen"):
    problem.shard_files(str(tmp_path), "test2017")
  with pytest.raises(DataError, match="Unknown split 'test2018': expected "
                     "one of train, dev, test, test2017"):
    problem.text_pairs(str(tmp_path), "test2018")


def test_missing_or_misaligned_target_text_says_what_to_run(tmp_path):
  problem = problem_lib.get_problem("algorithmic_reverse")
  inputs, targets = problem.stored_text_files(str(tmp_path), "dev")
  write_lines(inputs, ["1 2"])
  with pytest.raises(DataError) as error:
    problem.text_pairs(str(tmp_path), "dev")
  assert str(error.value).startswith(f"{targets} does not exist")
  assert "run t2t-datagen --problem=algorithmic_reverse" in str(error.value)
  # Both there, of different lengths: named, not cut to the shorter one.
  write_lines(targets, [])
  with pytest.raises(DataError) as error:
    problem.text_pairs(str(tmp_path), "dev")
  assert str(error.value).startswith(
      f"Misaligned parallel files: {inputs} has 1 lines but {targets} "
      "has 0 lines; run "
      "t2t-datagen --problem=algorithmic_reverse")
  write_lines(targets, ["2 1"])
  assert problem.text_pairs(str(tmp_path), "dev") == [("1 2", "2 1")]


def test_algorithmic_reverse_samples():
  problem = problem_lib.get_problem("algorithmic_reverse")
  samples = list(problem.generate_samples("train", None))
  assert len(samples) == problem.num_samples["train"]
  assert samples == list(problem.generate_samples("train", None))  # seeded
  lengths, seen = set(), set()
  for sample in samples:
    digits = sample["inputs"].split()
    assert all(len(d) == 1 for d in digits)
    assert sample["targets"].split() == digits[::-1]
    lengths.add(len(digits))
    seen.update(digits)
  assert lengths == set(range(1, 21))
  assert seen == set("0123456789")
  dev = list(problem.generate_samples("dev", None))
  test = list(problem.generate_samples("test", None))
  assert len(dev) == len(test) == 1_000
  # Each split has its own seed: no split repeats another.
  assert dev[:50] != samples[:50] and test[:50] != dev[:50]


def _make_folder(folder, names):
  for name in names:
    write_lines(folder / name, ["a b c"])
  return folder


def test_raw_folder_resolution(tmp_path):
  _make_folder(tmp_path, ["train.en", "train.de", "val.en.gz", "val.de.gz",
                          "test_2016_flickr.en.gz", "test_2016_flickr.de.gz",
                          "train.tok.en", "README"])
  found = text_files.find_split_files(str(tmp_path), ("en", "de"))
  names = {split: tuple(p.rsplit("/", 1)[1] for p in paths)
           for split, paths in found.items()}
  assert names == {"train": ("train.en", "train.de"),  # exact name wins
                   "dev": ("val.en.gz", "val.de.gz"),
                   "test": ("test_2016_flickr.en.gz", "test_2016_flickr.de.gz")}
  problem = problem_lib.get_problem("translate_ende_wmt")
  assert problem.available_splits(None, str(tmp_path)) == ("train", "dev",
                                                           "test")


def test_raw_folder_without_test_files_has_no_test_split(tmp_path):
  _make_folder(tmp_path, ["train.en", "train.de", "valid.en", "valid.de"])
  problem = problem_lib.get_problem("translate_ende_wmt")
  assert problem.available_splits(None, str(tmp_path)) == ("train", "dev")
  _make_folder(tmp_path, ["test.de"])  # one side only: still no test split
  with pytest.raises(DataError, match="test.de has no parallel en file"):
    problem.available_splits(None, str(tmp_path))


def test_dev_is_preferred_over_its_aliases(tmp_path):
  _make_folder(tmp_path, ["train.en", "train.de", "valid.en", "valid.de",
                          "dev.en", "dev.de", "val.en.gz", "val.de.gz"])
  found = text_files.find_split_files(str(tmp_path), ("en", "de"))
  assert found["dev"] == (str(tmp_path / "dev.en"), str(tmp_path / "dev.de"))


def test_raw_folder_errors(tmp_path):
  langs = ("en", "de")
  with pytest.raises(DataError) as error:
    text_files.find_split_files(str(tmp_path / "nowhere"), langs)
  message = str(error.value)
  for expected in ("does not exist", "train.en", "train.de", ".gz",
                   "tensorflow-datasets", "leave raw_data_dir out"):
    assert expected in message
  _make_folder(tmp_path, ["dev.en", "dev.de"])
  with pytest.raises(DataError, match="No training files"):
    text_files.find_split_files(str(tmp_path), langs)
  _make_folder(tmp_path, ["train.en", "train.de", "test_a.en", "test_b.en",
                          "test_a.de"])
  with pytest.raises(DataError, match="test_a.en, test_b.en"):
    text_files.find_split_files(str(tmp_path), langs)


def test_one_sided_split_is_an_error(tmp_path):
  _make_folder(tmp_path, ["train.en", "train.de", "test.en"])
  with pytest.raises(DataError, match=r"test.en has no parallel de file"):
    text_files.find_split_files(str(tmp_path), ("en", "de"))


def test_misaligned_files_name_both_files_and_counts(tmp_path):
  source = shared_corpus("multi30k/raw")
  write_lines(tmp_path / "train.en", read_lines(source / "train.en.gz", 50))
  write_lines(tmp_path / "train.de.gz", read_lines(source / "train.de.gz", 48))
  problem = problem_lib.get_problem("translate_ende_wmt")
  with pytest.raises(DataError) as error:
    next(problem.generate_samples("train", None, str(tmp_path)))
  message = str(error.value)
  assert f"{tmp_path}/train.en has 50 lines" in message
  assert f"{tmp_path}/train.de.gz has 48 lines" in message


def test_empty_and_undecodable_lines_are_skipped_with_location(tmp_path):
  source = shared_corpus("multi30k/raw")
  english = read_lines(source / "train.en.gz", 20)
  german = read_lines(source / "train.de.gz", 20)
  english[3] = ""
  german[7] = "   "
  write_lines(tmp_path / "train.en", english)
  with gzip.open(tmp_path / "train.de.gz", "wb") as f:
    for index, line in enumerate(german):
      f.write(b"Stra\xdfe\n" if index == 11 else line.encode() + b"\n")
  problem = problem_lib.get_problem("translate_ende_wmt")
  samples = list(problem.generate_samples("train", None, str(tmp_path)))
  skipped = [s for s in samples if isinstance(s, Skipped)]
  assert skipped == [
      Skipped("empty line", f"{tmp_path}/train.en:4"),
      Skipped("empty line", f"{tmp_path}/train.de.gz:8"),
      Skipped("undecodable bytes", f"{tmp_path}/train.de.gz:12")]
  kept = [s for s in samples if not isinstance(s, Skipped)]
  assert len(kept) == 17
  assert kept[0] == {"inputs": english[0], "targets": german[0]}


def test_online_source_maps_tfds_splits_and_languages(monkeypatch):
  calls = []

  def fake_tfds(name, split, tmp_dir):
    calls.append((name, split, tmp_dir))
    return iter([{"en": b"Hello", "de": b"Hallo"},
                 {"en": b"bad", "de": b"\xff"}])

  monkeypatch.setattr(translate, "load_tfds_split", fake_tfds)
  samples = list(problem_lib.get_problem("translate_ende_wmt")
                 .generate_samples("dev", "/scratch"))
  assert calls == [("wmt14_translate/de-en", "dev", "/scratch")]
  assert samples[0] == {"inputs": "Hello", "targets": "Hallo"}
  # Located by its index in the split, counted from 0.
  assert samples[1] == Skipped("undecodable bytes",
                               "wmt14_translate/de-en dev #1")


class _FakeTfdsBuilder:
  """A tensorflow-datasets builder that downloads nothing: it records what
  it is asked for and gives one pair of the asked split."""

  calls = []

  def __init__(self, name, data_dir):
    self.calls.append(("builder", name, data_dir))

  def download_and_prepare(self, download_dir):
    self.calls.append(("download", download_dir))

  def as_dataset(self, split):
    self.calls.append(("split", split))
    pairs = [{"en": f"{split} en".encode(), "fr": f"{split} fr".encode()}]
    return types.SimpleNamespace(as_numpy_iterator=lambda: iter(pairs))


def test_online_splits_are_the_papers_newstest_sets(monkeypatch):
  """dev is newstest2013 (tensorflow-datasets' validation split), test is
  newstest2014 (its test split); downloads stay under tmp_dir."""
  monkeypatch.setitem(sys.modules, "tensorflow_datasets",
                      types.SimpleNamespace(builder=_FakeTfdsBuilder))
  monkeypatch.setattr(_FakeTfdsBuilder, "calls", [])
  problem = problem_lib.get_problem("translate_enfr_wmt")
  read = {split: list(problem.generate_samples(split, "/scratch"))
          for split in ("train", "dev", "test")}
  assert read == {
      split: [{"inputs": f"{name} en", "targets": f"{name} fr"}]
      for split, name in (("train", "train"), ("dev", "validation"),
                          ("test", "test"))}
  assert _FakeTfdsBuilder.calls[:3] == [
      ("builder", "wmt14_translate/fr-en", "/scratch/tfds"),
      ("download", "/scratch/downloads"), ("split", "train")]


def test_online_failure_explains_the_offline_layout(monkeypatch):
  def no_network(name, split, tmp_dir):
    raise ConnectionError("no route to host")

  monkeypatch.setattr(translate, "load_tfds_split", no_network)
  problem = problem_lib.get_problem("translate_enfr_wmt")
  with pytest.raises(DataError) as error:
    next(problem.generate_samples("train", "/scratch"))
  assert "wmt14_translate/fr-en" in str(error.value)
  assert "raw_data_dir=DIR" in str(error.value)
  assert "train.fr" in str(error.value)


def test_reading_before_datagen_says_what_to_run(tmp_path):
  problem = problem_lib.get_problem("algorithmic_reverse")
  with pytest.raises(DataError, match="run t2t-datagen"):
    problem.vocabulary(str(tmp_path))
  with pytest.raises(DataError, match="run t2t-datagen"):
    problem.shard_files(str(tmp_path), "train")
  with pytest.raises(DataError, match="expected one of train, dev, test"):
    problem.shard_files(str(tmp_path), "validation")


def test_problem_decode_defaults_under_user_overrides(caplog):
  from t2tlite.decode.settings import DecodeHParams
  from t2tlite.problem_decoding import decode_hparams
  parsing = decode_hparams("parsing_wsj")
  assert (parsing.beam_size, parsing.alpha, parsing.extra_length) == (
      21, 0.0, 300)  # paper, section 6.3, but alpha chosen on dev
  mine = decode_hparams("parsing_wsj", "beam_size=4,alpha=0.6")
  assert (mine.beam_size, mine.alpha, mine.extra_length) == (4, 0.6, 300)
  assert decode_hparams("translate_ende_wmt_rev") == DecodeHParams()
  with caplog.at_level("WARNING"):
    unknown = decode_hparams("not_a_problem", "alpha=1.0")
  assert unknown == DecodeHParams(alpha=1.0)
  assert "not_a_problem is not registered" in caplog.text
  with pytest.raises(ValueError, match="beam_sise"):
    decode_hparams("parsing_wsj", "beam_sise=4")


class _Pieces:
  """A vocabulary as TreeConstraint.from_vocabularies reads it."""

  def __init__(self, pieces):
    self._pieces = pieces

  def pieces(self):
    return list(self._pieces)


def test_decode_constraint_only_of_a_registered_problem_that_has_one():
  from t2tlite.decode.settings import DecodeHParams
  from t2tlite.decode.tree_constraint import TreeConstraint
  from t2tlite.problem_decoding import decode_constraint
  from tree_pieces import INPUT_PIECES, TARGET_PIECES
  words, trees = _Pieces(INPUT_PIECES), _Pieces(TARGET_PIECES)
  constrained, free = DecodeHParams(), DecodeHParams(constrained=False)
  tree = decode_constraint("parsing_wsj", words, trees, constrained)
  assert isinstance(tree, TreeConstraint)
  assert decode_constraint("parsing_wsj", words, trees, free) is None
  # None: the reversed problem (its targets are words), a problem without
  # one, and a name not registered here (a plugin's run decoded where the
  # plugin is not loaded).
  for name in ("parsing_wsj_rev", "translate_ende_wmt", "not_a_problem"):
    assert decode_constraint(name, words, trees, constrained) is None, name


def test_vocabulary_files_per_side_and_the_reversed_swap(tmp_path):
  data_dir = str(tmp_path)
  words = str(tmp_path / "vocab.parsing_wsj.model")
  symbols = str(tmp_path / "vocab.parsing_wsj.targets.model")
  parsing = problem_lib.get_problem("parsing_wsj")
  backward = problem_lib.get_problem("parsing_wsj_rev")
  assert not parsing.shares_vocabulary and not backward.shares_vocabulary
  assert (parsing.vocab_file(data_dir),
          parsing.vocab_file(data_dir, "targets")) == (words, symbols)
  assert (backward.vocab_file(data_dir),
          backward.vocab_file(data_dir, "targets")) == (symbols, words)
  shared = problem_lib.get_problem("translate_ende_wmt_rev")
  assert shared.shares_vocabulary
  assert shared.vocab_file(data_dir, "targets") == shared.vocab_file(
      data_dir) == str(tmp_path / "vocab.translate_ende_wmt.model")
  for method in (parsing.vocab_file, parsing.vocabulary):
    with pytest.raises(ValueError, match="side='source': expected one of "
                       "inputs, targets"):
      method(data_dir, "source")
  with pytest.raises(DataError, match=f"expected {symbols}"):
    parsing.vocabulary(data_dir, "targets")


def test_vocabulary_is_loaded_again_when_its_file_changes(tmp_path):
  problem = problem_lib.get_problem("algorithmic_reverse")
  path = problem.vocab_file(str(tmp_path))
  vocab_lib.train_sentencepiece(lambda: iter(["a b c"]), path, None,
                                model_type="word")
  first = problem.vocabulary(str(tmp_path))
  assert first.size == 6 and problem.vocabulary(str(tmp_path)) is first
  # A new datagen writes another vocabulary in its place.
  vocab_lib.train_sentencepiece(lambda: iter(["a b c d e"]), path, None,
                                model_type="word")
  stamp = os.stat(path).st_mtime_ns + 1_000_000_000
  os.utime(path, ns=(stamp, stamp))
  assert problem.vocabulary(str(tmp_path)).size == 8


def test_dev_metric_samples_are_the_first_pairs_or_all():
  problem = problem_lib.get_problem("algorithmic_reverse")
  pairs = [(str(i), str(i)[::-1]) for i in range(10, 15)]
  assert problem.sample_pairs(pairs, 2) == pairs[:2]
  assert problem.sample_pairs(pairs, 9) == pairs
  for every in (0, -1):
    assert problem.sample_pairs(pairs, every) == pairs
