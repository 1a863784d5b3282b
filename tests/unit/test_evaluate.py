"""BLEU against sacrebleu's own figures, and bracket F1 against a hand count."""
import gzip
import os
import subprocess
import sys

import pytest
import sacrebleu

import command_flags
from corpora import SHARED_DATA, write_lines

from t2tlite.data import trees
from t2tlite.evaluate import bleu, moses_bleu, parsing_f1

MULTI30K_TOK = SHARED_DATA / "multi30k" / "tok"

TRANSLATIONS = ["The cat sat on the mat.",
                "A well-known man-made lake lies north of the city.",
                "He gave up smoking, finally!",
                "Zwei Männer spielen Fußball."]
REFERENCES = ["The cat is sitting on the mat.",
              "A well-known artificial lake lies to the north of the city.",
              "In the end, he gave up smoking!",
              "Zwei Männer spielen Fußball."]


def read_gz(path):
  with gzip.open(path, "rt", encoding="utf-8") as f:
    return f.read().splitlines()


def test_bleu_equals_sacrebleu(tmp_path):
  report = bleu.file_bleu(write_lines(tmp_path / "hyp", TRANSLATIONS),
                          write_lines(tmp_path / "ref", REFERENCES))
  expected = sacrebleu.corpus_bleu(TRANSLATIONS, [REFERENCES])
  assert report.cased.score == pytest.approx(expected.score, abs=1e-9)
  assert str(report.cased) == str(expected)
  lowercased = sacrebleu.corpus_bleu(TRANSLATIONS, [REFERENCES],
                                     lowercase=True)
  assert report.uncased.score == pytest.approx(lowercased.score, abs=1e-9)
  assert "case:mixed" in report.cased_signature
  assert "tok:13a" in report.cased_signature
  assert "case:lc" in report.uncased_signature
  assert report.lines()[0].startswith("BLEU = ")


def test_identical_files_score_100(tmp_path):
  report = bleu.corpus_bleu(REFERENCES, REFERENCES)
  assert report.cased.score == pytest.approx(100.0)
  assert report.tokenized_cased.score == pytest.approx(100.0)


def test_tokenized_bleu_splits_compounds():
  assert bleu.paper_tokenize("A well-known man-made lake.") == (
      "A well ##AT##-##AT## known man ##AT##-##AT## made lake .")
  # Split hyphens are separate tokens: a hypothesis with "man made" matches
  # the pieces "man" and "made" of the reference's "man-made".
  tokens = bleu.paper_tokenize("man-made").split()
  assert tokens == ["man", "##AT##-##AT##", "made"]
  # Tokenized BLEU equals sacrebleu on the pre-tokenized text.
  hyps = [bleu.paper_tokenize(t) for t in TRANSLATIONS]
  refs = [bleu.paper_tokenize(r) for r in REFERENCES]
  expected = sacrebleu.corpus_bleu(hyps, [refs], tokenize="none", force=True)
  assert bleu.corpus_bleu(TRANSLATIONS, REFERENCES).tokenized_cased.score == (
      pytest.approx(expected.score))


@pytest.mark.skipif(not os.path.isdir(MULTI30K_TOK),
                    reason="../shared/data/multi30k is absent")
def test_bleu_on_real_multi30k_lines():
  # The English and French sides are not translations of each other word
  # for word; the point is a realistic, non-trivial figure.
  with open(os.path.join(MULTI30K_TOK, "val.lc.norm.tok.en"),
            encoding="utf-8") as f:
    refs = [next(f).strip() for _ in range(50)]
  hyps = [" ".join(r.split()[:-2]) for r in refs]  # drop the last 2 tokens
  report = bleu.corpus_bleu(hyps, refs)
  assert report.cased.score == pytest.approx(
      sacrebleu.corpus_bleu(hyps, [refs]).score)
  assert 0 < report.cased.score < 100


@pytest.mark.timeout(120)
def test_t2t_bleu_command(tmp_path):
  hyp = write_lines(tmp_path / "hyp", TRANSLATIONS)
  ref = write_lines(tmp_path / "ref", REFERENCES)
  run = subprocess.run(
      [sys.executable, "-m", "t2tlite.bin.t2t_bleu", f"--translation={hyp}",
       f"--reference={ref}"], capture_output=True, text=True, check=True)
  first = run.stdout.splitlines()[0]
  assert first == str(sacrebleu.corpus_bleu(TRANSLATIONS, [REFERENCES]))
  assert "signature: nrefs:1|case:mixed" in run.stdout


@pytest.mark.skipif(not os.path.isdir(MULTI30K_TOK),
                    reason="../shared/data/multi30k is absent")
@pytest.mark.parametrize("language", ["en", "de"])
def test_moses_tokenize_reproduces_multi30k_tok_files(language):
  raw = read_gz(SHARED_DATA / "multi30k" / "raw" /
                f"test_2016_flickr.{language}.gz")
  tok = (MULTI30K_TOK / f"test_2016_flickr.lc.norm.tok.{language}"
         ).read_text(encoding="utf-8").splitlines()
  assert len(raw) == len(tok) == 1000
  assert moses_bleu.moses_tokenize(raw, language) == tok


def test_lowercase_tokenized_bleu_equals_sacrebleu_on_tokens():
  references = moses_bleu.moses_tokenize(REFERENCES, "en")
  assert references[2] == "in the end , he gave up smoking !"
  score = moses_bleu.lowercase_tokenized_bleu(TRANSLATIONS, references, "en")
  expected = sacrebleu.corpus_bleu(
      moses_bleu.moses_tokenize(TRANSLATIONS, "en"), [references],
      tokenize="none", force=True)
  assert score.score == pytest.approx(expected.score)
  assert 0 < score.score < 100
  assert moses_bleu.lowercase_tokenized_bleu(
      REFERENCES, references, "en").score == pytest.approx(100.0)


@pytest.mark.timeout(120)
def test_t2t_bleu_tokenized_reference(tmp_path):
  hyp = write_lines(tmp_path / "hyp", TRANSLATIONS)
  ref = write_lines(tmp_path / "ref", REFERENCES)
  tok = write_lines(tmp_path / "ref.tok",
                    moses_bleu.moses_tokenize(REFERENCES, "en"))
  command = [sys.executable, "-m", "t2tlite.bin.t2t_bleu",
             f"--translation={hyp}", f"--reference={ref}",
             f"--tokenized_reference={tok}"]
  run = subprocess.run(command + ["--language=en"], capture_output=True,
                       text=True, check=True)
  expected = moses_bleu.lowercase_tokenized_bleu(
      TRANSLATIONS, moses_bleu.moses_tokenize(REFERENCES, "en"), "en")
  assert run.stdout.splitlines()[-1] == (
      f"lowercased Moses-tokenized BLEU against {tok}: {expected}")
  no_language = subprocess.run(command, capture_output=True, text=True)
  assert no_language.returncode == 1
  assert "--tokenized_reference needs --language" in no_language.stderr


@pytest.mark.timeout(120)
def test_t2t_bleu_expands_a_leading_tilde(tmp_path):
  # `--flag=~/x` reaches the command unexpanded; it expands it.
  write_lines(tmp_path / "hyp", TRANSLATIONS)
  write_lines(tmp_path / "ref", REFERENCES)
  run = subprocess.run(
      [sys.executable, "-m", "t2tlite.bin.t2t_bleu", "--translation=~/hyp",
       "--reference=~/ref"], capture_output=True, text=True,
      env=dict(os.environ, HOME=str(tmp_path)))
  assert run.returncode == 0, run.stderr[-2000:]
  assert run.stdout.splitlines()[0] == str(
      sacrebleu.corpus_bleu(TRANSLATIONS, [REFERENCES]))


def test_t2t_bleu_misaligned_reference_names_both_flags(tmp_path):
  hyp = write_lines(tmp_path / "hyp", TRANSLATIONS)
  short = write_lines(tmp_path / "short", REFERENCES[:3])
  with command_flags.command_module(
      "t2tlite.bin.t2t_bleu", translation=hyp, reference=short,
      tokenized_reference=short) as command:
    for flag in ("reference", "tokenized_reference"):
      with pytest.raises(ValueError) as error:
        command.read_reference(flag, TRANSLATIONS)
      assert str(error.value).startswith(
          f"--translation={hyp} has 4 lines but --{flag}={short} has 3")
    assert command.read_reference("reference", TRANSLATIONS[:3]) == (
        REFERENCES[:3])


def test_t2t_bleu_scores_the_tokenized_reference_it_names(tmp_path,
                                                          capsys):
  hyp = write_lines(tmp_path / "hyp", TRANSLATIONS)
  ref = write_lines(tmp_path / "ref", REFERENCES)
  tokenized = moses_bleu.moses_tokenize(REFERENCES, "en")
  tok = write_lines(tmp_path / "ref.tok", tokenized)
  with command_flags.command_module(
      "t2tlite.bin.t2t_bleu", translation=hyp, reference=ref,
      tokenized_reference=tok, language="en") as command:
    command._run()
  lines = capsys.readouterr().out.splitlines()
  assert lines[0] == str(sacrebleu.corpus_bleu(TRANSLATIONS, [REFERENCES]))
  expected = sacrebleu.corpus_bleu(
      moses_bleu.moses_tokenize(TRANSLATIONS, "en"),
      [tokenized], tokenize="none", force=True)
  assert lines[-1] == (
      f"lowercased Moses-tokenized BLEU against {tok}: {expected}")


def test_misaligned_files_fail_naming_both(tmp_path):
  short = write_lines(tmp_path / "short", TRANSLATIONS[:2])
  ref = write_lines(tmp_path / "ref", REFERENCES)
  with pytest.raises(ValueError, match=r".*short has 2 lines "
                     r"but .*ref has 4"):
    bleu.file_bleu(short, ref)


GOLD = """
( (S (NP-SBJ (DT The) (NN cat)) (VP (VBD sat) (PP-LOC (IN on)
     (NP (DT the) (NN mat)))) (. .)) )
( (S (NP-SBJ-1 (PRP He)) (VP (VBD gave) (PRT (RP up)) (NP (-NONE- *T*-2)))
     (. .)) )
(TOP (S (NP (NNP John)) (VP (VBZ runs)) (. .)))
"""

PREDICTIONS = [
    # PP attached to "on" only; the object NP is a sibling of PP.
    "(S (NP XX XX )NP (VP XX (PP XX )PP (NP XX XX )NP )VP XX )S",
    # ADVP where the gold has PRT: equivalent labels.
    "(S (NP XX )NP (VP XX (ADVP XX )ADVP )VP XX )S",
    # Never closes (VP and (S: repaired by closing both at the end.
    "(S (NP XX )NP (VP XX XX",
]


def test_f1_equals_a_hand_count(tmp_path):
  gold = parsing_f1.read_reference_trees(
      [write_lines(tmp_path / "gold.mrg", [GOLD])])
  scores = parsing_f1.evaluate(PREDICTIONS, gold)
  # Hand count; word positions exclude the final "." (punctuation, deleted).
  # 1 "The cat sat on the mat": gold S(0,6) NP(0,2) VP(2,6) PP(3,6) NP(4,6);
  #   predicted S(0,6) NP(0,2) VP(2,6) PP(3,4) NP(4,6): 4 of 5 match.
  # 2 "He gave up": gold S(0,3) NP(0,1) VP(1,3) PRT(2,3) (the -NONE- NP is
  #   removed); predicted S(0,3) NP(0,1) VP(1,3) ADVP(2,3) = PRT: 4 of 4.
  # 3 "John runs": gold S(0,2) NP(0,1) VP(1,2) (TOP ignored); predicted,
  #   after repair, (S (NP John) (VP runs .)): S(0,2) NP(0,1) VP(1,2), since
  #   "." is deleted: 3 of 3.
  # Totals: matched 11, gold 12, predicted 12: P = R = F1 = 11/12.
  assert (scores.matched_brackets, scores.gold_brackets,
          scores.predicted_brackets) == (11, 12, 12)
  assert scores.precision == pytest.approx(11 / 12)
  assert scores.recall == pytest.approx(11 / 12)
  assert scores.f1 == pytest.approx(11 / 12)
  assert (scores.sentences, scores.exact_matches, scores.repaired,
          scores.unscored) == (3, 2, 1, 0)


def test_duplicate_brackets_match_as_multisets():
  # Gold (NP (NP the dog)): two NP(0,2); predicted one: recall 1/2.
  gold = next(trees.parse_trees("(NP (NP (DT the) (NN dog)))"))
  scores = parsing_f1.evaluate(["(NP XX XX )NP"], [gold])
  assert (scores.matched_brackets, scores.gold_brackets,
          scores.predicted_brackets) == (1, 2, 1)
  assert scores.precision == 1.0 and scores.recall == 0.5


def test_a_constituent_of_deleted_words_only_is_no_bracket():
  # PRN holds only the comma, which is punctuation and deleted (as is the
  # final "."): it spans no kept word, so it is not counted.
  tree = next(trees.parse_trees(
      "(S (NP (NNP John)) (VP (VBZ runs)) (PRN (, ,)) (. .))"))
  assert parsing_f1.brackets(tree, deleted={2, 3}) == {
      ("S", 0, 2): 1, ("NP", 0, 1): 1, ("VP", 1, 2): 1}


def test_bracketed_predictions_and_word_mismatch():
  gold = next(trees.parse_trees("(S (NP (NNP John)) (VP (VBZ runs)))"))
  same = parsing_f1.evaluate(["(S (NP (XX John)) (VP (XX runs)))"], [gold])
  assert same.f1 == 1.0 and same.repaired == 0
  other = parsing_f1.evaluate(["(S (NP (XX Mary)) (VP (XX runs)))"], [gold])
  assert (other.sentences, other.unscored) == (0, 1)


def test_extra_predicted_brackets_cost_precision_and_the_exact_match():
  gold = next(trees.parse_trees("(S (NP (NNP John)) (VP (VBZ runs)))"))
  # Every gold bracket, and a second VP over "runs".
  scores = parsing_f1.evaluate(["(S (NP XX )NP (VP (VP XX )VP )VP )S"],
                               [gold])
  assert (scores.matched_brackets, scores.gold_brackets,
          scores.predicted_brackets) == (3, 3, 4)
  assert scores.recall == 1.0 and scores.precision == 0.75
  assert scores.exact_matches == 0


def test_bracketed_predictions_are_normalized_as_gold_trees_are():
  # Function tags are stripped and empty elements removed, as in the gold.
  gold = trees.normalize(next(trees.parse_trees(
      "(S (NP-SBJ (NNP John)) (VP (VBZ runs)))")))
  scores = parsing_f1.evaluate(
      ["(S (NP-SBJ-1 (XX John)) (VP (XX runs) (NP (-NONE- *T*-1))))"],
      [gold])
  assert (scores.sentences, scores.unscored, scores.exact_matches) == (
      1, 0, 1)
  assert scores.f1 == 1.0


WSJ = SHARED_DATA / "wsj_sample"


@pytest.mark.skipif(not os.path.isdir(WSJ),
                    reason="../shared/data/wsj_sample is absent")
def test_gold_sequences_score_100_on_real_trees():
  paths = [os.path.join(WSJ, f"wsj_{n:04d}.mrg") for n in range(160, 163)]
  gold = parsing_f1.read_reference_trees(paths)
  sequences = [trees.linearize(t, pos_tags=False)[1] for t in gold]
  scores = parsing_f1.evaluate(sequences, gold)
  assert scores.sentences == len(gold) > 20
  assert scores.f1 == 1.0 and scores.repaired == 0
  assert scores.exact_matches == len(gold)


def test_linearized_reference_is_rejected(tmp_path):
  path = write_lines(tmp_path / "targets.txt", ["(S (NP XX )NP )S"])
  with pytest.raises(ValueError, match="linearized sequences"):
    parsing_f1.read_reference_trees([path])


@pytest.mark.timeout(120)
def test_t2t_parse_eval_command(tmp_path):
  gold = write_lines(tmp_path / "gold.mrg", [GOLD])
  pred = write_lines(tmp_path / "pred.txt", PREDICTIONS)
  run = subprocess.run(
      [sys.executable, "-m", "t2tlite.bin.t2t_parse_eval",
       f"--prediction={pred}", f"--reference={gold}"],
      capture_output=True, text=True, check=True)
  assert run.stdout.startswith("Bracketing F1 = 91.67 (precision 91.67, "
                               "recall 91.67")
  assert "repaired into trees: 1" in run.stdout
