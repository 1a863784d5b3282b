"""t2t-datagen: Multi30k to records, the summary, resuming, temporary names,
and the real command with a --t2t_usr_dir plugin."""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import tensorflow as tf

import t2tlite.problems  # noqa: F401  (registers the built-in problems)
from corpora import MULTI30K_TRAIN_LINES, read_lines, shared_corpus
from t2tlite import problem as problem_lib
from t2tlite import registry
from t2tlite.data import datagen, records, trees
from t2tlite.hparams_lib import create_hparams

PLUGINS = pathlib.Path(__file__).resolve().parents[1] / "support" / "plugins"


def _records(path):
  return [records.parse_example(r) for r in tf.data.TFRecordDataset(path)]


def test_multi30k_summary_counts_every_line(multi30k_data, multi30k_raw):
  problem, data_dir, summary = multi30k_data
  splits = summary["splits"]
  assert set(splits) == {"train", "dev", "test"}
  for split, name in (("train", "train"), ("dev", "val.en.gz"),
                      ("test", "test_2016_flickr.en.gz")):
    path = multi30k_raw / (name if split != "train" else "train.en")
    lines = len(read_lines(path))
    assert splits[split]["examples"] + sum(
        splits[split]["skipped"].values()) == lines
  assert splits["train"]["examples"] == MULTI30K_TRAIN_LINES  # no bad lines
  assert splits["dev"]["examples"] == 1014
  assert summary["vocab"]["size"] == 1000 and not summary["vocab"]["reused"]
  assert problem.datagen_summary(str(data_dir)) == summary
  assert not [n for n in os.listdir(data_dir) if "incomplete" in n]
  shards = problem.shard_files(str(data_dir), "train")
  assert [os.path.basename(p) for p in shards[:2]] == [
      "translate_ende_wmt-train-00000-of-00032",
      "translate_ende_wmt-train-00001-of-00032"]


def test_records_hold_the_text_with_one_final_eos(multi30k_data, multi30k_raw):
  problem, data_dir, summary = multi30k_data
  vocab = problem.vocabulary(str(data_dir))
  examples = _records(problem.shard_files(str(data_dir), "dev")[0])
  assert len(examples) == 1014
  english = read_lines(multi30k_raw / "val.en.gz")
  german = read_lines(multi30k_raw / "val.de.gz")
  for side, text in (("inputs", english), ("targets", german)):
    rows = [e[side].numpy() for e in examples]
    for ids in rows:
      assert ids[-1] == 1 and (ids == 1).sum() == 1 and 0 not in ids
    decoded = vocab.decode(tf.ragged.constant(rows)).numpy()
    assert [d.decode("utf-8") for d in decoded] == [
        " ".join(t.split()) for t in text]
    assert sum(map(len, rows)) == summary["splits"]["dev"][
        side[:-1] + "_tokens"]
  assert problem.text_pairs(str(data_dir), "dev")[0] == (
      " ".join(english[0].split()), " ".join(german[0].split()))


def test_rerun_keeps_complete_shards_and_redoes_missing(multi30k_data,
                                                        multi30k_raw,
                                                        tmp_path):
  problem, data_dir, first = multi30k_data
  copy = tmp_path / "data"
  shutil.copytree(data_dir, copy)
  shard = problem.shard_files(str(copy), "train")[5]
  original = pathlib.Path(shard).read_bytes()
  os.remove(shard)
  pathlib.Path(shard + ".incomplete").write_bytes(b"half a shard")
  os.remove(problem.stored_text_files(str(copy), "test")[1])
  with pytest.raises(problem_lib.DataError, match="31 of 32"):
    problem.shard_files(str(copy), "train")
  again = problem.generate_data(str(copy), raw_data_dir=str(multi30k_raw),
                                vocab_size=4000)  # existing vocab is kept
  assert again["vocab"]["reused"] and again["vocab"]["size"] == 1000
  assert again["splits"]["train"]["reused_shards"] == 31
  assert again["splits"]["dev"]["reused_shards"] == 1
  assert pathlib.Path(shard).read_bytes() == original
  for split in ("train", "dev", "test"):
    for key in ("examples", "input_tokens", "target_tokens", "skipped"):
      assert again["splits"][split][key] == first["splits"][split][key]
  assert problem.text_pairs(str(copy), "test") == problem.text_pairs(
      str(data_dir), "test")
  assert not [n for n in os.listdir(copy) if "incomplete" in n]


def test_bad_lines_are_skipped_and_counted(tmp_path):
  source = shared_corpus("multi30k/raw")
  raw = tmp_path / "raw"
  raw.mkdir()
  english = read_lines(source / "train.en.gz", 200)
  german = read_lines(source / "train.de.gz", 200)
  english[10] = ""
  (raw / "train.en").write_text("\n".join(english) + "\n")
  (raw / "train.de").write_bytes(
      b"\n".join(b"\xff\xfe" if i == 20 else g.encode()
                 for i, g in enumerate(german)) + b"\n")
  problem = problem_lib.get_problem("translate_ende_wmt")
  summary = problem.generate_data(str(tmp_path / "data"),
                                  raw_data_dir=str(raw), vocab_size=300)
  train = summary["splits"]["train"]
  assert set(summary["splits"]) == {"train"}  # no dev/test files given
  assert train["skipped"] == {"empty line": 1, "undecodable bytes": 1}
  assert train["skipped_where"]["empty line"] == [f"{raw}/train.en:11"]
  assert train["skipped_where"]["undecodable bytes"] == [f"{raw}/train.de:21"]
  assert train["examples"] == 198


def test_text_files_hold_a_sample_a_line_and_five_places_a_reason(tmp_path):
  """write_split: whitespace inside a sample (a line break, a tab, two
  spaces) becomes one space in the text files, one sample a line; a skip
  reason keeps five of its places, across shards too; a side with no text
  (blank, or not a string) is skipped and counted."""
  from t2tlite.data.samples import Skipped
  from t2tlite.data.vocab import Vocabulary, train_sentencepiece
  vocab_path = str(tmp_path / "letters.model")
  train_sentencepiece(lambda: iter(["a b c d e f g"] * 20), vocab_path, 16)
  samples = [Skipped("bad", f"line {i}") for i in range(7)] + [
      {"inputs": "a b\nc", "targets": "d\te  f"},
      {"inputs": "g", "targets": "a"},
      {"inputs": " \n ", "targets": "a"}, {"inputs": "b", "targets": None}]
  texts = (str(tmp_path / "inputs.txt"), str(tmp_path / "targets.txt"))
  summary = records.write_split(
      iter(samples), Vocabulary.from_file(vocab_path),
      records.shard_paths(str(tmp_path), "letters", "train", 2),
      text_paths=texts)
  assert summary["examples"] == 2
  assert summary["skipped"] == {"bad": 7, "empty inputs or targets": 2}
  assert sorted(summary["skipped_where"]["empty inputs or targets"]) == [
      "sample 10", "sample 9"]
  where = summary["skipped_where"]["bad"]
  assert len(where) == 5 and set(where) <= {f"line {i}" for i in range(7)}
  with open(texts[0], encoding="utf-8") as f:
    assert f.read() == "a b c\ng\n"
  with open(texts[1], encoding="utf-8") as f:
    assert f.read() == "d e f\na\n"


def test_failure_mid_split_leaves_no_partial_shard(tmp_path):
  folder = shared_corpus("wsj_sample")
  raw = tmp_path / "treebank"
  raw.mkdir()
  shutil.copy(folder / "wsj_0001.mrg", raw)  # train (fallback split)
  text = (folder / "wsj_0002.mrg").read_text()  # dev, with a broken 2nd tree
  (raw / "wsj_0002.mrg").write_text(text + "\n( (S (NP (NNP Broken) )\n")
  problem = problem_lib.get_problem("parsing_wsj")
  with pytest.raises(trees.TreeError, match=r"wsj_0002.mrg: tree 2 "):
    problem.generate_data(str(tmp_path / "data"), raw_data_dir=str(raw),
                          vocab_size=60)
  left = sorted(os.listdir(tmp_path / "data"))
  assert "parsing_wsj-train-00007-of-00008" in left  # train was completed
  assert not [n for n in left if "-dev" in n or "incomplete" in n]


def _datagen_command():
  script = shutil.which("t2t-datagen", path=os.path.dirname(sys.executable)
                        ) or shutil.which("t2t-datagen")
  if script is None:
    pytest.skip("t2t-datagen is not installed (pip install -e .)")
  return [script]


@pytest.mark.timeout(180)
def test_cli_with_plugin_folder(tmp_path):
  result = subprocess.run(
      _datagen_command() + [f"--t2t_usr_dir={PLUGINS}",
                            "--problem=plugin_sort_digits",
                            f"--data_dir={tmp_path}"],
      capture_output=True, text=True, timeout=170)
  assert result.returncode == 0, result.stderr[-2000:]
  assert "plugin_sort_digits" in result.stdout
  assert re.search(r"train +300 ", result.stdout), result.stdout
  assert sorted(n for n in os.listdir(tmp_path) if n.endswith("-of-00002")) == [
      "plugin_sort_digits-train-00000-of-00002",
      "plugin_sort_digits-train-00001-of-00002"]


@pytest.mark.timeout(180)
def test_cli_reports_bad_input_without_traceback(tmp_path):
  result = subprocess.run(
      _datagen_command() + ["--problem=translate_ende_wmt",
                            f"--data_dir={tmp_path}/data",
                            f"--raw_data_dir={tmp_path}/missing"],
      capture_output=True, text=True, timeout=170)
  assert result.returncode == 1
  assert "t2t-datagen: error: --raw_data_dir=" in result.stderr
  assert "train.en" in result.stderr and "Traceback" not in result.stderr


def test_plugin_registers_problem_and_hparams(monkeypatch):
  # Built-ins register on first use: load them into the real registries,
  # not into the empty ones swapped in below.
  registry.problems.names(), registry.hparams_sets.names()
  registry.models.names()
  monkeypatch.setattr(registry, "problems",
                      registry.make_problem_registry(builtins=None))
  monkeypatch.setattr(registry, "hparams_sets",
                      registry.Registry("hparams set"))
  monkeypatch.setattr(registry, "models", registry.Registry("model"))
  monkeypatch.setattr(registry, "_loaded_usr_dirs", set())
  try:
    registry.import_usr_dir(str(PLUGINS))
    assert registry.problems.names() == [
        "plugin_copy_digits", "plugin_reverse_digits", "plugin_sort_digits",
        "plugin_sort_digits_scored"]
    hp = create_hparams("plugin_tiny", "batch_size=512")
    assert (hp.num_layers, hp.max_length, hp.batch_size) == (1, 32, 512)
    reverse = problem_lib.get_problem("plugin_sort_digits_rev")
    sample = next(reverse.generate_samples("dev", None))
    assert sample["targets"].split() == sorted(sample["inputs"].split())
  finally:  # the plugin's modules registered into the temporary registries
    for name in [m for m in sys.modules if m.startswith("t2t_usr_plugins")]:
      del sys.modules[name]


def test_problem_max_length_filters_training_examples_only(tmp_path):
  from t2tlite.problems.algorithmic import AlgorithmicReverse

  class ShortReverse(AlgorithmicReverse):
    num_samples = {"train": 400, "dev": 50, "test": 50}
    max_length = 8  # tokens, EOS included: at most 7 digits

  summary = ShortReverse().generate_data(str(tmp_path))
  train, dev = summary["splits"]["train"], summary["splits"]["dev"]
  long_train = sum(len(s["inputs"].split()) > 7 for s in
                   ShortReverse().generate_samples("train", None))
  assert train["skipped"] == {"longer than max_length=8": long_train}
  assert train["examples"] == 400 - long_train
  assert max(int(k) for k in train["lengths"]) == 8
  assert dev["examples"] == 50 and max(int(k) for k in dev["lengths"]) > 8


def _small_reverse_problem():
  """algorithmic_reverse with 200 training pairs, 20 dev and 20 test."""
  from t2tlite.problems.algorithmic import AlgorithmicReverse

  class SmallReverse(AlgorithmicReverse):
    num_samples = {"train": 200, "dev": 20, "test": 20}

  return SmallReverse


def test_new_vocabulary_regenerates_every_record(tmp_path):
  problem = _small_reverse_problem()()
  first = problem.generate_data(str(tmp_path))
  os.remove(problem.vocab_file(str(tmp_path)))
  second = problem.generate_data(str(tmp_path))
  assert not second["vocab"]["reused"]
  for split in ("train", "dev", "test"):
    assert second["splits"][split]["reused_shards"] == 0
    assert second["splits"][split]["examples"] == first["splits"][split][
        "examples"]
  third = problem.generate_data(str(tmp_path))
  assert third["vocab"]["reused"]
  assert all(s["reused_shards"] == s["shards"]
             for s in third["splits"].values())


_NAMES = "zero one two three four five six seven eight nine".split()


def _digit_names_problem():
  """Digits in, their reversed names out, the names in a word vocabulary."""
  from t2tlite.problems.algorithmic import AlgorithmicReverse

  class DigitNames(AlgorithmicReverse):
    name = "digit_names"
    num_shards = {"train": 2, "dev": 1, "test": 1}
    num_samples = {"train": 300, "dev": 20, "test": 20}
    target_vocab_type = "word"

    def generate_samples(self, split, tmp_dir, raw_data_dir=None):
      for sample in super().generate_samples(split, tmp_dir, raw_data_dir):
        yield {"inputs": sample["inputs"], "targets": " ".join(
            _NAMES[int(d)] for d in sample["targets"].split())}

  return DigitNames


def test_separate_target_vocabulary_encodes_each_side_with_its_own(tmp_path):
  problem = _digit_names_problem()()
  data_dir = str(tmp_path)
  summary = problem.generate_data(data_dir)
  inputs_vocab = problem.vocabulary(data_dir)
  targets_vocab = problem.vocabulary(data_dir, "targets")
  assert summary["vocab"]["file"] == os.path.join(data_dir,
                                                  "vocab.digit_names.model")
  assert summary["vocab"]["size"] == inputs_vocab.size == 24
  assert summary["vocab"]["targets"] == {
      "file": os.path.join(data_dir, "vocab.digit_names.targets.model"),
      "type": "word", "requested": None, "size": 13, "reused": False}
  assert "target vocabulary (trained):" in datagen.format_summary(summary)
  # Each vocabulary was trained on its own side only.
  assert sorted(p.decode() for p in targets_vocab.id_to_piece(
      list(range(3, 13))).numpy()) == sorted("▁" + n for n in _NAMES)
  assert b"\xe2\x96\x81nine" not in inputs_vocab.id_to_piece(
      list(range(24))).numpy().tolist()
  examples = _records(problem.shard_files(data_dir, "dev")[0])
  pairs = problem.text_pairs(data_dir, "dev")
  assert len(examples) == len(pairs) == 20
  for example, (source, target) in zip(examples, pairs):
    assert inputs_vocab.decode_ids(example["inputs"].numpy()) == source
    assert targets_vocab.decode_ids(example["targets"].numpy()) == target
    assert len(example["targets"]) == len(target.split()) + 1  # a word an id

  # The reversed problem reads the same files, each vocabulary on its side.
  backward = type(problem)(reverse=True)
  assert backward.vocabulary(data_dir).path == targets_vocab.path
  assert backward.vocabulary(data_dir, "targets").path == inputs_vocab.path

  # A new target vocabulary makes every record stale; the input one is kept.
  os.remove(problem.vocab_file(data_dir, "targets"))
  again = problem.generate_data(data_dir)
  assert again["vocab"]["reused"] and not again["vocab"]["targets"]["reused"]
  assert all(s["reused_shards"] == 0 for s in again["splits"].values())


def test_vocab_from_copies_a_runs_vocabularies_or_names_the_mismatch(
    tmp_path):
  """generate_data(vocab_from=RUN) encodes with RUN's vocabulary files (each
  side's, for a problem with two) copied into data_dir, and keeps records
  already encoded with them; another vocabulary in data_dir is replaced
  and its records rewritten. A source without a vocabulary, or with two
  for a problem that shares one (or the reverse), is a one-line DataError
  naming it, before anything is written."""
  from t2tlite.data import vocab_source
  SmallReverse = _small_reverse_problem()
  names = _digit_names_problem()()
  # Two runs' folders as the trainer leaves them: the shared (or input)
  # vocabulary as vocab.model, a target one as vocab.targets.model.
  one_run, two_run = tmp_path / "one_run", tmp_path / "two_run"
  for run, problem in ((one_run, SmallReverse()), (two_run, names)):
    problem.generate_data(str(tmp_path / f"data_{run.name}"))
    run.mkdir()
    shutil.copy(problem.vocab_file(str(tmp_path / f"data_{run.name}")),
                run / vocab_source.RUN_VOCAB_FILE)
  shutil.copy(names.vocab_file(str(tmp_path / "data_two_run"), "targets"),
              two_run / vocab_source.RUN_TARGET_VOCAB_FILE)

  for problem, source, message in (
      (SmallReverse(), two_run, "that run has an input and a target "
                                "vocabulary"),
      (names, one_run, "one shared vocabulary"),
      (SmallReverse(), tmp_path / "no_run", "vocab_from")):
    data_dir = tmp_path / f"refused_{problem.name}_{source.name}"
    with pytest.raises(problem_lib.DataError, match=message) as error:
      problem.generate_data(str(data_dir), vocab_from=str(source))
    assert str(source) in str(error.value) and "\n" not in str(error.value)
    assert not data_dir.exists() or not any(data_dir.glob("vocab.*"))

  data_dir = str(tmp_path / "child")
  summary = names.generate_data(data_dir, vocab_from=str(two_run))
  assert summary["vocab"]["copied_from"] == str(
      two_run / vocab_source.RUN_VOCAB_FILE)
  assert summary["vocab"]["targets"]["copied_from"] == str(
      two_run / vocab_source.RUN_TARGET_VOCAB_FILE)
  for side, name in (("inputs", vocab_source.RUN_VOCAB_FILE),
                     ("targets", vocab_source.RUN_TARGET_VOCAB_FILE)):
    assert vocab_source.same_file_contents(names.vocab_file(data_dir, side),
                                           str(two_run / name))
  again = names.generate_data(data_dir, vocab_from=str(two_run))
  assert all(s["reused_shards"] == s["shards"]
             for s in again["splits"].values())

  # The names problem's input vocabulary, trained on digit inputs alone,
  # is not the reversal's own (trained on both sides): it replaces it.
  data_dir = str(tmp_path / "own_then_adopted")
  problem = SmallReverse()
  problem.generate_data(data_dir)
  other = names.vocab_file(str(tmp_path / "data_two_run"))
  assert not vocab_source.same_file_contents(other,
                                             problem.vocab_file(data_dir))
  adopted = problem.generate_data(data_dir, vocab_from=other)
  assert adopted["vocab"]["copied_from"] == other
  assert vocab_source.same_file_contents(other, problem.vocab_file(data_dir))
  assert all(s["reused_shards"] == 0 for s in adopted["splits"].values())


def test_new_vocabulary_removes_the_records_of_extra_test_splits(tmp_path):
  names = ["p-test2017_flickr-00000-of-00001",
           "p-test2017_flickr-00000-of-00001.json",
           "p-test2017_flickr.inputs.txt", "p-train-00000-of-00002",
           "p-unknown-00000-of-00001", "q-test2017_flickr.inputs.txt"]
  for name in names:
    (tmp_path / name).write_text("x")
  datagen.remove_records(str(tmp_path), "p",
                          ("train", "dev", "test", "test2017_flickr"))
  assert sorted(p.name for p in tmp_path.iterdir()) == [
      "p-unknown-00000-of-00001", "q-test2017_flickr.inputs.txt"]


def test_records_write_their_features_in_key_order():
  # protobuf writes a map (the Example's features) in an order drawn at
  # random per process, so two runs over one corpus wrote different shards
  # (in about half of the runs "targets" came first); make_example sorts.
  for ids in ([5, 6, 1], [7, 1], [1]):
    serialized = records.make_example(ids, ids[::-1])
    assert serialized.index(b"inputs") < serialized.index(b"targets")
    assert records.parse_example(serialized)["inputs"].numpy().tolist() == ids


def test_a_shared_vocabulary_is_trained_on_both_sides(tmp_path):
  """Digits in, their names out, one vocabulary: the names' letters (on
  the target side only) are pieces of it, not UNK."""
  from t2tlite.data.vocab import UNK_ID

  class SharedDigitNames(_digit_names_problem()):
    name = "shared_digit_names"
    target_vocab_type = None
    vocab_size = 40
    num_shards = {"train": 1, "dev": 1, "test": 1}
    num_samples = {"train": 100, "dev": 5, "test": 5}

  problem = SharedDigitNames()
  summary = problem.generate_data(str(tmp_path))
  assert "targets" not in summary["vocab"]
  vocab = problem.vocabulary(str(tmp_path))
  for name in _NAMES:
    ids = vocab.encode_text(name, add_eos=False)
    assert UNK_ID not in ids and vocab.decode_ids(ids) == name


def test_a_separate_target_vocabulary_has_its_own_size(tmp_path):
  class SizedDigitNames(_digit_names_problem()):
    name = "sized_digit_names"
    target_vocab_type = "bpe"
    target_vocab_size = 30
    num_shards = {"train": 1, "dev": 1, "test": 1}
    num_samples = {"train": 100, "dev": 5, "test": 5}

  problem = SizedDigitNames()
  summary = problem.generate_data(str(tmp_path))
  assert summary["vocab"]["requested"] == summary["vocab"]["size"] == 24
  targets = summary["vocab"]["targets"]
  assert targets["requested"] == targets["size"] == 30
  assert problem.vocabulary(str(tmp_path), "targets").size == 30


def test_summary_report_names_each_vocabulary_and_the_skips():
  summary = {
      "problem": "p", "data_dir": "/d",
      "vocab": {"file": "/d/vocab.p.model", "type": "bpe", "size": 24,
                "requested": 32, "reused": True,
                "targets": {"file": "/d/vocab.p.targets.model",
                            "type": "word", "size": 13, "requested": None,
                            "reused": False}},
      "splits": {"train": {
          "examples": 1200, "input_tokens": 5000, "target_tokens": 6100,
          "skipped": {"empty line": 3},
          "skipped_where": {"empty line": ["a:1", "a:5", "a:9"]},
          "shards": 2, "reused_shards": 1}}}
  lines = datagen.format_summary(summary).splitlines()
  assert lines[:3] == [
      "p -> /d",
      "  input vocabulary (reused): /d/vocab.p.model, bpe, 24 pieces "
      "(requested 32)",
      "  target vocabulary (trained): /d/vocab.p.targets.model, word, "
      "13 pieces"]
  row = lines[4].split()
  assert row[:5] == ["train", "1,200", "5,000", "6,100", "2"]
  assert lines[4].endswith(" (1 kept)  3 empty line (e.g. a:1; a:5)")


def test_a_vocabulary_of_the_requested_size_names_no_request():
  summary = {
      "problem": "p", "data_dir": "/d",
      "vocab": {"file": "/d/vocab.p.model", "type": "bpe", "size": 32,
                "requested": 32, "reused": False},
      "splits": {"dev": {
          "examples": 5, "input_tokens": 20, "target_tokens": 21,
          "skipped": {}, "skipped_where": {}, "shards": 1,
          "reused_shards": 0}}}
  lines = datagen.format_summary(summary).splitlines()
  assert lines[1] == "  vocabulary (trained): /d/vocab.p.model, bpe, 32 pieces"
  assert lines[3].split() == ["dev", "5", "20", "21", "1", "none"]


def test_parallel_files_of_different_lengths_are_refused_either_way(
    tmp_path):
  from t2tlite.data import text_files
  from t2tlite.data.samples import DataError
  short, long = tmp_path / "train.en", tmp_path / "train.de"
  short.write_text("a\nb\n")
  long.write_text("c\nd\ne\n")
  for first, second in ((short, long), (long, short)):
    with pytest.raises(DataError, match="Misaligned") as error:
      next(text_files.read_parallel_lines(str(first), str(second)))
    counts = {first: 2 if first == short else 3,
              second: 2 if second == short else 3}
    for path, count in counts.items():
      assert f"{path} has {count} lines" in str(error.value)


def test_vocab_from_a_checkpoint_finds_its_run_folder(tmp_path):
  """RUN/ckpt-N, RUN/best/ckpt-N (or one of its files) and RUN/best all
  name RUN's vocabulary, and nothing above RUN is looked at; a bare .model
  file is itself."""
  from t2tlite.data import vocab_source
  run = tmp_path / "run"
  (run / "best").mkdir(parents=True)
  (run / vocab_source.RUN_VOCAB_FILE).write_bytes(b"model")
  for name in ("ckpt-7.index", "ckpt-7.data-00000-of-00001"):
    (run / name).write_bytes(b"x")
    (run / "best" / name).write_bytes(b"x")
  expected = vocab_source.VocabSource(
      inputs=str(run / vocab_source.RUN_VOCAB_FILE), run_folder=str(run))
  for path in (run, run / "ckpt-7", run / "best", run / "best" / "ckpt-7",
               run / "best" / "ckpt-7.index"):
    assert vocab_source.resolve(str(path)) == expected, path
  bare = tmp_path / "other.model"
  bare.write_bytes(b"model")
  assert vocab_source.resolve(str(bare)) == vocab_source.VocabSource(
      inputs=str(bare))
  with pytest.raises(vocab_source.VocabSourceError, match="vocab_from="):
    vocab_source.resolve(str(tmp_path / "nowhere" / "ckpt-7"))
  # A run without a vocabulary in a folder of runs that has one: not the
  # folder above the run's own.
  lost = run / "runs" / "lost"
  (lost / "best").mkdir(parents=True)
  (run / "runs" / vocab_source.RUN_VOCAB_FILE).write_bytes(b"model")
  with pytest.raises(vocab_source.VocabSourceError, match="vocab_from="):
    vocab_source.resolve(str(lost / "best" / "ckpt-7"))


def test_vocabulary_files_of_one_size_but_other_bytes_differ(tmp_path):
  from t2tlite.data import vocab_source
  a, b, c = (tmp_path / name for name in ("a.model", "b.model", "c.model"))
  a.write_bytes(b"pieces: x y z")
  b.write_bytes(b"pieces: x y w")
  c.write_bytes(b"pieces: x y z")
  assert not vocab_source.same_file_contents(str(a), str(b))
  assert vocab_source.same_file_contents(str(a), str(c))
