"""The dev metric's scorers give what t2t-bleu and t2t-parse-eval give, and a
plugin problem's own metric is used."""
import pytest

from corpora import shared_corpus
from t2tlite import registry
from t2tlite.data import trees
from t2tlite.evaluate import bleu, parsing_f1
from t2tlite.problem import get_problem
from t2tlite.train import dev_metric

PLUGINS = "tests/support/plugins"


def test_bleu_is_t2t_bleus_figures():
  pairs = [("a", "Die Katze sieht den Hund ."), ("b", "Ein rotes Haus .")]
  outputs = ["Die Katze sieht einen Hund .", "ein rotes Haus ."]
  scores = dev_metric.score_outputs(get_problem("translate_ende_wmt"),
                                    outputs, pairs)
  report = bleu.corpus_bleu(outputs, [t for _, t in pairs])
  assert scores == {"bleu": report.cased.score,
                    "bleu_uncased": report.uncased.score,
                    "bleu_tokenized": report.tokenized_cased.score,
                    "bleu_tokenized_uncased": report.tokenized_uncased.score}
  assert 0 < scores["bleu"] < scores["bleu_uncased"]


def test_bracket_f1_of_dev_targets_is_t2t_parse_evals_of_the_mrg():
  path = shared_corpus("wsj_sample") / "wsj_0001.mrg"
  gold = parsing_f1.read_reference_trees([str(path)])
  pairs = []
  for tree in gold:
    words, target = trees.linearize(tree)
    pairs.append((" ".join(words), target))
  # The first output loses its outermost NP bracket pair: F1 below 100.
  first = pairs[0][1].split()
  damaged = " ".join(first[:1] + first[2:first.index(")NP", 3)] +
                     first[first.index(")NP", 3) + 1:])
  outputs = [damaged] + [target for _, target in pairs[1:]]
  scores = dev_metric.score_outputs(get_problem("parsing_wsj"), outputs,
                                    pairs)
  expected = parsing_f1.evaluate(outputs, gold)
  assert scores["bracket_f1"] == pytest.approx(100 * expected.f1)
  assert 0 < scores["bracket_f1"] < 100
  # A lost bracket costs recall, not precision.
  assert scores["bracket_precision"] == pytest.approx(
      100 * expected.precision)
  assert scores["bracket_recall"] == pytest.approx(100 * expected.recall)
  assert scores["bracket_recall"] < scores["bracket_precision"]


def test_exact_match():
  scores = dev_metric.score_outputs(
      get_problem("algorithmic_reverse"), ["3 2 1", "5 4", "9"],
      [("1 2 3", "3 2 1"), ("4 5", "5 4"), ("8", "8")])
  assert scores == {"exact_match": pytest.approx(200 / 3)}


def test_exact_match_ignores_spacing():
  scores = dev_metric.score_outputs(
      get_problem("algorithmic_reverse"), ["3  2 1 ", " 5 4", "9"],
      [("1 2 3", "3 2 1"), ("4 5", "5 4"), ("8", "8")])
  assert scores == {"exact_match": pytest.approx(200 / 3)}


def test_a_plugin_problem_scores_its_own_metric():
  registry.import_usr_dir(PLUGINS)
  problem = get_problem("plugin_sort_digits_scored")
  scores = dev_metric.score_outputs(problem, ["1 2 3", "4"],
                                    [("3 1 2", "1 2 3"), ("5", "5")])
  assert scores == {"same_digits": 50.0}
  with pytest.raises(dev_metric.MetricError, match="declares no dev metric"):
    dev_metric.check_metric(get_problem("plugin_sort_digits"))


def test_a_mixture_scores_each_member_on_its_untagged_lines():
  """Each member scores its own lines with their tag removed (the plugin's
  same_digits reads the source); the mean is over members with lines."""
  registry.import_usr_dir(PLUGINS)
  mixture = get_problem("plugin_sort_digits_scored+plugin_copy_digits")
  sort, copy = "<2plugin_sort_digits_scored>", "<2cp>"
  pairs = [(f"{sort} 3 1 2", "1 2 3"), (f"{copy} 1 2", "1 2"),
           (f"{sort} 5 4", "4 5"), (f"{copy} 7", "7"),
           (f"{sort} 9 8", "8 9")]
  outputs = ["2 1 3", "1 2", "4", "8", "8 9"]
  scores = dev_metric.score_outputs(mixture, outputs, pairs)
  assert scores == {
      "same_digits/plugin_sort_digits_scored": pytest.approx(200 / 3),
      "exact_match/plugin_copy_digits": 50.0,
      "mean": pytest.approx((200 / 3 + 50) / 2)}
  copy_only = [1, 3]
  scores = dev_metric.score_outputs(mixture,
                                    [outputs[i] for i in copy_only],
                                    [pairs[i] for i in copy_only])
  assert scores == {"exact_match/plugin_copy_digits": 50.0, "mean": 50.0}


def test_a_scorer_must_return_the_problems_metric():
  registry.import_usr_dir(PLUGINS)
  problem = get_problem("plugin_sort_digits_scored")
  problem.metric = "sorted_digits"
  with pytest.raises(dev_metric.MetricError, match=r"without its metric "
                     r"'sorted_digits'"):
    dev_metric.score_outputs(problem, ["1 2"], [("2 1", "1 2")])


def test_a_malformed_gold_tree_is_an_error_not_a_score():
  with pytest.raises(ValueError, match="cannot delinearize"):
    dev_metric.score_outputs(get_problem("parsing_wsj"), ["(S NN )S"],
                             [("dog", "(S NN )NP")])


def _dev_text(data_dir, problem, inputs, targets):
  for path, lines in zip(problem.text_files(str(data_dir), "dev"),
                         (inputs, targets)):
    with open(path, "w", encoding="utf-8") as f:
      f.writelines(line + "\n" for line in lines)


def test_dev_metric_keeps_the_first_samples_and_the_decode_overrides(
    tmp_path):
  problem = get_problem("algorithmic_reverse")
  lines = ["1 2", "3 4 5", "6"]
  _dev_text(tmp_path, problem, lines, [line[::-1] for line in lines])
  metric = dev_metric.DevMetric(problem, str(tmp_path / "run"),
                                str(tmp_path), samples=2,
                                decode_hparams="beam_size=3")
  assert metric.name == "exact_match"
  assert metric.pairs == [("1 2", "2 1"), ("3 4 5", "5 4 3")]
  assert metric.hp.beam_size == 3
  every = dev_metric.DevMetric(problem, str(tmp_path / "run"),
                               str(tmp_path), samples=0)
  assert len(every.pairs) == 3


def test_dev_metric_without_dev_text_is_a_metric_error(tmp_path):
  problem = get_problem("algorithmic_reverse")
  inputs_path = problem.text_files(str(tmp_path), "dev")[0]
  with pytest.raises(dev_metric.MetricError,
                     match="needs the dev text: .*does not exist"):
    dev_metric.DevMetric(problem, str(tmp_path / "run"), str(tmp_path))
  _dev_text(tmp_path, problem, [], [])
  with pytest.raises(dev_metric.MetricError) as error:
    dev_metric.DevMetric(problem, str(tmp_path / "run"), str(tmp_path))
  assert str(error.value).endswith(f"{inputs_path} is empty")
