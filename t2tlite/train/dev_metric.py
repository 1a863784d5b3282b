"""The problem's own metric on dev, by decoding a checkpoint as t2t-decoder
does and scoring as t2t-bleu / t2t-parse-eval do.

    metric = DevMetric(problem, output_dir, data_dir, samples=500)
    result = metric.score("OUTPUT_DIR/ckpt-1000")
    result.name, result.value, result.scores   # "bleu", 27.3, {...}

The checkpoint is loaded into a freshly built model and decoded by
t2t-decoder's road (`run_decoding.load_run`, its Decoder under the
problem's constraint) with the problem's decode defaults, and scored with
`t2tlite.evaluate`: the same code paths as the commands, so the figure
logged in training is the one a user gets from
`t2t-decoder --checkpoint_path=...` then `t2t-bleu` (or `t2t-parse-eval`)
on the same dev lines at the same precision.
"""
import dataclasses
import time

from absl import logging

from t2tlite import problem as problem_lib
from t2tlite import problem_decoding
from t2tlite import run_decoding
from t2tlite.data import languages, trees
from t2tlite.decode import describe, machine
from t2tlite.evaluate import bleu, parsing_f1

BUILT_IN = ("bleu", "bracket_f1", "exact_match")


class MetricError(ValueError):
  """A dev metric that cannot be computed (no metric, no dev text)."""


@dataclasses.dataclass(frozen=True)
class MetricResult:
  """One scoring of a checkpoint.

  name: the problem's metric (higher is better); value: its score;
  scores: every figure by name (the metric's included); sentences: dev
  lines decoded; seconds: decoding and scoring time.
  """
  name: str
  value: float
  scores: dict
  sentences: int
  seconds: float


def bleu_scores(outputs, pairs):
  """t2t-bleu's figures: sacreBLEU cased ("bleu") and uncased, and the
  tokenized BLEU (13a, compounds split), cased and uncased."""
  report = bleu.corpus_bleu(outputs, [target for _, target in pairs])
  return {"bleu": report.cased.score, "bleu_uncased": report.uncased.score,
          "bleu_tokenized": report.tokenized_cased.score,
          "bleu_tokenized_uncased": report.tokenized_uncased.score}


def bracket_f1_scores(outputs, pairs):
  """t2t-parse-eval's F1 (percent) against the gold trees that the dev
  targets linearize (the words from the inputs)."""
  gold = [trees.delinearize(target, source.split(), strict=True)
          for source, target in pairs]
  scores = parsing_f1.evaluate(outputs, gold)
  return {"bracket_f1": 100 * scores.f1,
          "bracket_precision": 100 * scores.precision,
          "bracket_recall": 100 * scores.recall}


def exact_match_scores(outputs, pairs):
  """Percent of outputs equal to their targets (whitespace-normalised)."""
  same = sum(" ".join(out.split()) == " ".join(target.split())
             for out, (_, target) in zip(outputs, pairs))
  return {"exact_match": 100.0 * same / max(len(pairs), 1)}


_SCORERS = {"bleu": bleu_scores, "bracket_f1": bracket_f1_scores,
            "exact_match": exact_match_scores}


def score_outputs(problem, outputs, pairs):
  """{name: score} of decoded `outputs` against `pairs`, by the problem's
  metric (a built-in one, or the problem's `score_outputs`; a mixture's:
  `mixture_scores`)."""
  if problem.target_languages:
    return mixture_scores(problem, outputs, pairs)
  scorer = _SCORERS.get(problem.metric)
  scores = (scorer(outputs, pairs) if scorer else
            problem.score_outputs(outputs, pairs))
  if problem.metric not in scores:
    raise MetricError(f"problem {problem.name}: score_outputs returned "
                      f"{sorted(scores)}, without its metric "
                      f"{problem.metric!r}")
  return {k: float(v) for k, v in scores.items()}


def mixture_scores(mixture, outputs, pairs):
  """A mixture's figures: each member's, named `<figure>/<member>`, on
  its own lines (by their tags), and the mean of the members' metrics as
  the mixture's (`<metric>/mean`)."""
  scores, values = {}, []
  for view in mixture.views:
    mine = [(out, (languages.strip_tag(source, {view.language: view.tag}),
                   target))
            for out, (source, target) in zip(outputs, pairs)
            if languages.line_language(source, {view.language: view.tag})]
    if not mine:
      continue
    member = score_outputs(view.member, [out for out, _ in mine],
                           [pair for _, pair in mine])
    scores.update({f"{k}/{view.member.name}": v for k, v in member.items()})
    values.append(member[view.member.metric])
  scores[mixture.metric] = sum(values) / max(len(values), 1)
  return scores


def check_metric(problem):
  """Raises MetricError (one line) when the problem declares no metric."""
  if not problem.metric:
    raise MetricError(
        f"problem {problem.name} declares no dev metric (Problem.metric is "
        "None): set metric to bleu, bracket_f1, exact_match or its own name "
        "with score_outputs, or leave out the flags that need one "
        "(--early_stopping_patience, --dev_metric).")


class DevMetric:
  """Decodes and scores dev with the checkpoints of a run.

  Args:
    problem: a `t2tlite.problem.Problem` with a `metric`.
    output_dir: the run (hparams.json, run.json and the vocabularies must be
      there when `score` is called).
    data_dir: where datagen kept the dev text.
    split: the split decoded.
    samples: decode the first `samples` lines; <= 0: all of them.
    decode_hparams: overrides of the problem's decode defaults, as
      t2t-decoder's --decode_hparams.
    dtype: the Keras dtype policy of the decoding model (None: float32), as
      t2t-decoder's --mixed_precision gives.
  Raises:
    MetricError: no metric, or the split's text is missing.
  """

  def __init__(self, problem, output_dir, data_dir, split="dev", samples=0,
               decode_hparams="", dtype=None):
    check_metric(problem)
    self.problem, self.output_dir, self.dtype = problem, output_dir, dtype
    try:
      pairs = problem.text_pairs(data_dir, split)
    except problem_lib.DataError as error:
      raise MetricError(f"the dev metric needs the {split} text: "
                        f"{error}") from None
    if not pairs:
      raise MetricError(f"the dev metric needs the {split} text, but "
                        f"{problem.text_files(data_dir, split)[0]} is empty")
    self.pairs = problem.sample_pairs(pairs, samples)
    self.hp = problem_decoding.decode_hparams(problem.name, decode_hparams)
    # Settled once; TensorFlow's threads stay training's.
    self.settled = machine.settle(self.hp)

  @property
  def name(self):
    return self.problem.metric

  def score(self, checkpoint_path):
    """MetricResult of the checkpoint (a prefix such as OUTPUT_DIR/ckpt-7)."""
    start = time.time()
    decoder = run_decoding.load_run(self.output_dir, checkpoint_path,
                                    dtype=self.dtype).decoder(self.settled)
    outputs, _ = decoder.decode_lines([source for source, _ in self.pairs],
                                      progress=False)
    scores = score_outputs(self.problem, outputs, self.pairs)
    seconds = time.time() - start
    logging.info("dev %s of %s: %.2f (%d sentences decoded, %s, %.1fs)",
                 self.name, checkpoint_path, scores[self.name],
                 len(self.pairs), describe.describe(self.hp), seconds)
    return MetricResult(self.name, scores[self.name], scores,
                        len(self.pairs), seconds)
