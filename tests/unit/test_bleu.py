"""t2tlite.evaluate.bleu's tokenized figures and report lines against a
hand count."""
import pytest

from t2tlite.evaluate import bleu

# Only the first word's case differs. Tokenized (13a, the compound split):
# "the cat sat on the well ##AT##-##AT## known mat ." - 10 tokens, all but
# the first matched cased: n-gram precisions 9/10, 8/9, 7/8, 6/7, whose
# geometric mean is 0.6 ** (1 / 4).
HYPOTHESIS = "the cat sat on the well-known mat."
REFERENCE = "The cat sat on the well-known mat."
CASED = 100 * 0.6 ** 0.25


def test_tokenized_bleu_lowercases_only_the_uncased_figure():
  report = bleu.corpus_bleu([HYPOTHESIS], [REFERENCE])
  assert report.tokenized_cased.score == pytest.approx(CASED, abs=1e-6)
  assert report.tokenized_uncased.score == pytest.approx(100.0)


def test_report_lines_put_each_tokenized_figure_by_its_name():
  last = bleu.corpus_bleu([HYPOTHESIS], [REFERENCE]).lines()[-1]
  assert last.endswith(f"cased {CASED:.2f}, uncased 100.00")
