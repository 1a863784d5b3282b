"""Penn Treebank trees: round trip of every WSJ sample tree through the
Vinyals et al. linearization, normalisation, malformed trees, parsing_wsj."""
import os

import pytest

import t2tlite.problems  # noqa: F401  (registers the built-in problems)
from corpora import shared_corpus
from t2tlite.data import trees
from t2tlite.data.samples import DataError, Skipped
from t2tlite.data.vocab import UNK_ID
from t2tlite.problem import get_problem
from t2tlite.problems import parsing

PAPER_EXAMPLE = "(S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))"


@pytest.fixture(scope="module")
def sample_trees():
  folder = shared_corpus("wsj_sample")
  paths = sorted(str(p) for p in folder.glob("*.mrg"))
  return [t for p in paths for t in trees.read_trees(p)]


def test_every_sample_tree_round_trips(sample_trees):
  assert len(sample_trees) > 3000
  for tree in sample_trees:
    gold = trees.normalize(tree)
    assert gold is not None
    for pos_tags in (True, False):
      words, target = trees.linearize(gold, pos_tags=pos_tags)
      assert words == gold.words()
      back = trees.delinearize(target, words)
      expected = gold if pos_tags else trees.replace_tags(gold)
      assert str(back) == str(expected)


def test_normalisation_and_linearization():
  raw = next(trees.parse_trees(
      "( (S (NP-SBJ-1 (NNP John) ) (VP (VBZ has) (S (NP-SBJ (-NONE- *-1) ) )"
      " (NP=2 (DT a) (NN dog) (-LRB- -LRB-) ) ) (. .) ) )"))
  tree = trees.normalize(raw)
  assert str(tree) == ("(S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog) "
                       "(-LRB- -LRB-))) (. .))")
  words, target = trees.linearize(next(trees.parse_trees(PAPER_EXAMPLE)))
  assert words == ["John", "has", "a", "dog", "."]
  assert target == "(S (NP NNP )NP (VP VBZ (NP DT NN )NP )VP . )S"
  assert trees.linearize(trees.normalize(raw), pos_tags=False)[1] == (
      "(S (NP XX )NP (VP XX (NP XX XX XX )NP )VP XX )S")


def test_unlabelled_outer_bracket_of_several_trees_becomes_top():
  raw = next(trees.parse_trees("( (S (NN a)) (S (-NONE- *) (NN b)) )"))
  tree = trees.normalize(raw)
  assert str(tree) == "(TOP (S (NN a)) (S (NN b)))"
  # It survives the round trip, as every normalized tree must.
  words, target = trees.linearize(tree)
  assert words == ["a", "b"]
  assert target == "(TOP (S NN )S (S NN )S )TOP"
  assert trees.delinearize(target, words) == tree


@pytest.mark.parametrize("text, where, what", [
    ("(S (NP (DT a)) (VP (VB b)))\n(S (NP (NN c))", "tree 2 (line 2)",
     "never closed"),
    ("(S (NP (DT a)))\n(S (NP (NN c))))", "after tree 2 (line 2)",
     "without a matching"),
    ("(S (NP (DT a)))\nstray (S (NN c))", "after tree 1 (line 2)",
     "outside any bracket"),
    ("(S (NP (DT a)))\n\n(S (NP (NN c d)))", "tree 2 (line 3)",
     "several words"),
    ("(S (NP (DT a)))\n(S (NP (NN c) word))", "tree 2 (line 2)",
     "mixes words"),
    ("(S (NP (DT a)))\n(S (NP ))", "tree 2 (line 2)", "empty constituent"),
    ("(S (NP (DT a)))\n(S ((NN c)))", "tree 2 (line 2)", "without a label"),
    # An unclosed tree is named by the line it starts on.
    ("(S (NP (DT a)))\n(S (NP (NN c))\n(VP (VB d))", "tree 2 (line 2)",
     "never closed"),
])
def test_malformed_tree_names_file_and_tree_number(tmp_path, text, where,
                                                   what):
  path = tmp_path / "wsj_0999.mrg"
  path.write_text(text)
  with pytest.raises(trees.TreeError) as error:
    list(trees.read_trees(str(path)))
  assert f"{path}: {where}: " in str(error.value)
  assert what in str(error.value)
  assert isinstance(error.value, DataError)


def test_delinearize_strict_and_repaired():
  words = ["John", "has", "a", "dog", "."]
  with pytest.raises(ValueError, match="never closed"):
    trees.delinearize("(S (NP NNP )NP VBZ DT NN .", words)
  repaired = trees.delinearize("(S (NP NNP )NP VBZ DT NN . )S )VP", words,
                               strict=False)
  assert str(repaired) == ("(S (NP (NNP John)) (VBZ has) (DT a) (NN dog) "
                           "(. .))")
  short = trees.delinearize("(S (NP NNP )NP VBZ )S", words, strict=False)
  assert short.words() == words
  with pytest.raises(ValueError, match="more tags"):
    trees.delinearize("(S XX XX )S", ["one"])
  two_roots = trees.delinearize("(S XX )S (S XX )S", ["a", "b"], strict=False)
  assert str(two_roots) == "(TOP (S (XX a)) (S (XX b)))"


def test_sample_folder_split():
  folder = shared_corpus("wsj_sample")
  files = parsing.split_files(str(folder))
  names = {s: [os.path.basename(p) for p in paths]
           for s, paths in files.items()}
  assert names["train"][0] == "wsj_0001.mrg"
  assert names["train"][-1] == "wsj_0159.mrg" and len(names["train"]) == 159
  assert names["dev"] == [f"wsj_{n:04d}.mrg" for n in range(160, 180)]
  assert names["test"] == []


def test_standard_sections_split(tmp_path):
  for section, number in ((1, 100), (2, 200), (21, 2199), (22, 2201),
                          (23, 2301), (24, 2401)):
    folder = tmp_path / f"{section:02d}"
    folder.mkdir(exist_ok=True)
    (folder / f"wsj_{number:04d}.mrg").write_text(PAPER_EXAMPLE)
  files = parsing.split_files(str(tmp_path))
  names = {s: [os.path.basename(p) for p in paths]
           for s, paths in files.items()}
  assert names == {"train": ["wsj_0200.mrg", "wsj_2199.mrg"],
                   "dev": ["wsj_2201.mrg"], "test": ["wsj_2301.mrg"]}


def test_missing_treebank_folder(tmp_path):
  problem = get_problem("parsing_wsj")
  with pytest.raises(DataError) as error:
    problem.available_splits(None, str(tmp_path / "treebank"))
  assert "does not exist" in str(error.value)
  assert ".mrg" in str(error.value) and "LDC" in str(error.value)
  with pytest.raises(DataError, match="holds no .mrg file"):
    problem.available_splits(None, str(tmp_path))
  with pytest.raises(DataError, match="needs raw_data_dir"):
    problem.available_splits(None, None)
  # Read directly (as a plugin's problem built on it would), the same line.
  with pytest.raises(DataError, match="needs raw_data_dir"):
    next(problem.generate_samples("train", None))


def test_parsing_datagen_and_postprocess(tmp_path):
  folder = shared_corpus("wsj_sample")
  problem = get_problem("parsing_wsj")
  summary = problem.generate_data(str(tmp_path), raw_data_dir=str(folder),
                                  vocab_size=1000)
  assert set(summary["splits"]) == {"train", "dev"}
  dev_files = parsing.split_files(str(folder))["dev"]
  gold = [trees.normalize(t) for p in dev_files for t in trees.read_trees(p)]
  assert summary["splits"]["dev"]["examples"] == len(gold)
  assert summary["splits"]["dev"]["skipped"] == {}
  pairs = problem.text_pairs(str(tmp_path), "dev")
  assert len(pairs) == len(gold)
  # The targets' closed vocabulary: one id per tree symbol seen in training,
  # UNK for the (rare) others.
  symbols = problem.vocabulary(str(tmp_path), "targets")
  known = {p.decode("utf-8").lstrip("\u2581") for p in symbols.id_to_piece(
      list(range(3, symbols.size))).numpy()}
  complete = 0
  for (words, target), tree in zip(pairs, gold):
    ids = symbols.encode_text(target, add_eos=False)
    assert [i == UNK_ID for i in ids] == [t not in known
                                          for t in target.split()]
    if UNK_ID not in ids:
      assert symbols.decode_ids(ids) == target
      complete += 1
    assert problem.postprocess(target, inputs=words) == str(tree)
  assert complete > 0.9 * len(pairs)
  reverse = get_problem("parsing_wsj_rev")
  assert reverse.postprocess(pairs[0][0]) == pairs[0][0]


def _split_names(folder):
  files = parsing.split_files(str(folder))
  return {s: [os.path.basename(p) for p in paths]
          for s, paths in files.items()}


def test_upper_case_treebank_names_are_sections(tmp_path):
  for name in ("02/WSJ_0200.MRG", "22/Wsj_2201.Mrg", "23/wsj_2301.mrg"):
    (tmp_path / name).parent.mkdir()
    (tmp_path / name).write_text(PAPER_EXAMPLE)
  assert _split_names(tmp_path) == {"train": ["WSJ_0200.MRG"],
                                    "dev": ["Wsj_2201.Mrg"],
                                    "test": ["wsj_2301.mrg"]}


def test_the_test_section_alone_is_only_a_test_split(tmp_path):
  for number in (2300, 2301):
    (tmp_path / f"wsj_{number}.mrg").write_text(PAPER_EXAMPLE)
  assert _split_names(tmp_path) == {
      "train": [], "dev": [], "test": ["wsj_2300.mrg", "wsj_2301.mrg"]}


def test_a_single_file_treebank_is_all_train(tmp_path):
  (tmp_path / "mine.mrg").write_text(PAPER_EXAMPLE)
  assert _split_names(tmp_path) == {"train": ["mine.mrg"], "dev": [],
                                    "test": []}


def test_fallback_split_orders_files_by_name_not_folder(tmp_path):
  # The last file by name is dev wherever it lies.
  for number in range(1, 10):
    folder = tmp_path / ("a" if number == 9 else "b")
    folder.mkdir(exist_ok=True)
    (folder / f"wsj_{number:04d}.mrg").write_text(PAPER_EXAMPLE)
  names = _split_names(tmp_path)
  assert names["train"] == [f"wsj_{n:04d}.mrg" for n in range(1, 9)]
  assert names["dev"] == ["wsj_0009.mrg"]


def test_tree_of_empty_elements_is_skipped_by_its_number(tmp_path):
  path = tmp_path / "wsj_0001.mrg"
  path.write_text(f"( {PAPER_EXAMPLE} )\n( (S (-NONE- *T*-1)) )\n"
                  "( (NP (NN dog)) )\n")
  samples = list(get_problem("parsing_wsj").generate_samples(
      "train", None, str(tmp_path)))
  assert samples[0]["inputs"] == "John has a dog ."
  assert samples[1] == Skipped("tree with only empty elements",
                               f"{path}: tree 2")
  assert samples[2] == {"inputs": "dog", "targets": "(NP NN )NP"}


def test_outer_root_bracket_is_removed_whatever_its_label():
  for root in ("", "ROOT", "TOP"):
    raw = next(trees.parse_trees(f"({root} (S (NP (NN a)) (VP (VBZ b))))"))
    assert str(trees.normalize(raw)) == "(S (NP (NN a)) (VP (VBZ b)))", root


def test_strict_delinearize_refuses_a_closing_of_another_label():
  with pytest.raises(ValueError, match=r"\)VP closes \(NP"):
    trees.delinearize("(S (NP NNP )VP VBZ )S", ["John", "has"])
  # Repaired, it closes the innermost bracket.
  repaired = trees.delinearize("(S (NP NNP )VP VBZ )S", ["John", "has"],
                               strict=False)
  assert str(repaired) == "(S (NP (NNP John)) (VBZ has))"


def test_repaired_words_beyond_the_tags_join_the_root():
  words = ["John", "has", "a", "dog", "."]
  short = trees.delinearize("(S (NP NNP )NP VBZ )S", words, strict=False)
  assert str(short) == ("(S (NP (NNP John)) (VBZ has) (XX a) (XX dog) "
                        "(XX .))")
