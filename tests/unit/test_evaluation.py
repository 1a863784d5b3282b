"""The evaluation of a run: its teacher-forced metrics, and with a dev
metric, the best checkpoints and early stopping's patience."""
import dataclasses
import math
import os

import numpy as np
import pytest
import tensorflow as tf

from t2tlite.train import best as best_lib
from t2tlite.train import evaluation
from t2tlite.train import strategy as strategy_lib
from t2tlite.train.dev_metric import MetricResult

import train_helpers


@pytest.fixture(scope="module")
def strategy():
  return strategy_lib.make_strategy(0, tf_config="")


def test_evaluation_metrics_of_a_model_that_predicts_the_targets(
    tmp_path, strategy):
  trainer = train_helpers.tiny_trainer(str(tmp_path), strategy, eval_steps=2)
  vocab = train_helpers.SYNTHETIC_VOCAB
  # Logits of 10 on the target, 0 elsewhere, at every position.
  trainer.evaluator.model = lambda batch, training: tf.one_hot(
      batch["targets"], vocab) * 10.0
  metrics = trainer.evaluate()
  batches = train_helpers.reverse_dataset(tf.distribute.InputContext())
  tokens = sum(int(np.count_nonzero(b["targets"]))
               for b in batches.take(2))
  log_p_target = -math.log1p((vocab - 1) * math.exp(-10.0))
  log_p_other = log_p_target - 10.0
  eps = trainer.hp.label_smoothing
  assert eps > 0
  smoothed = -((1 - eps + eps / vocab) * log_p_target +
               (vocab - 1) * eps / vocab * log_p_other)
  assert (metrics["tokens"], metrics["sequences"]) == (tokens, 2 * 8)
  assert metrics["accuracy"] == metrics["sequence_accuracy"] == 1.0
  assert metrics["nll"] == pytest.approx(-log_p_target, rel=1e-4)
  assert metrics["perplexity"] == pytest.approx(math.exp(-log_p_target))
  assert metrics["loss"] == pytest.approx(smoothed, rel=1e-4)


class ScriptedMetric:
  """A dev metric whose scores are set in advance (its decoding is
  tested in test_dev_metric.py); records the checkpoints it scores."""
  name = "bleu"

  def __init__(self, values):
    self.values, self.scored = list(values), []

  def score(self, checkpoint):
    self.scored.append(checkpoint)
    value = self.values.pop(0)
    return MetricResult("bleu", value, {"bleu": value, "chrf": 50.0}, 8, 0.0)


def _evaluator(trainer, dev_metric, on_best=None, **config):
  """An Evaluator of the trainer's run with `dev_metric`, and `config`'s
  changes to its TrainConfig."""
  return evaluation.Evaluator(
      trainer.model, trainer.hp, dataclasses.replace(trainer.config,
                                                     **config),
      trainer.strategy, trainer.make_dataset, trainer.summaries,
      trainer._checkpoint_at, dev_metric, on_best)


def test_dev_scores_keep_the_best_and_count_patience(tmp_path, strategy):
  output_dir = str(tmp_path)
  trainer = train_helpers.tiny_trainer(output_dir, strategy, eval_steps=1)
  metric = ScriptedMetric([10.0, 5.0, 12.0, 11.0, 9.0])
  exported = []
  evaluator = _evaluator(trainer, metric, exported.append,
                         early_stopping_patience=2, keep_best_checkpoints=2)
  seen = []  # (best step, evaluations since the best, early stop due)
  for step in (1, 2, 3, 4):
    trainer.optimizer.iterations.assign(step)  # as if trained to `step`
    metrics = evaluator.evaluate(trainer.step)
    seen.append((metrics["best_step"], evaluator.evaluations_since_best,
                 evaluator.early_stop_due))
  assert seen == [(1, 0, False), (1, 1, False), (3, 0, False),
                  (3, 1, False)]
  # Each evaluation scores the checkpoint of its own step.
  assert metric.scored == [os.path.join(output_dir, f"ckpt-{step}")
                           for step in (1, 2, 3, 4)]
  # Only a new best is exported, not one kept as the second best.
  best_dir = os.path.join(output_dir, best_lib.BEST_DIR)
  assert exported == [os.path.join(best_dir, "ckpt-1"),
                      os.path.join(best_dir, "ckpt-3")]
  # A resumed run counts the evaluations since its best from metrics.jsonl.
  resumed = _evaluator(trainer, metric, early_stopping_patience=2)
  assert resumed.evaluations_since_best == 1
  assert not resumed.patience_exhausted()
  trainer.optimizer.iterations.assign(5)
  evaluator.evaluate(trainer.step)  # a second one below the best: stop
  assert evaluator.early_stop_due


def test_a_run_stopped_early_resumes_without_training(tmp_path, strategy):
  # Patience 1: the second evaluation's lower score stops the run at step
  # 2; a restart finds its patience spent in metrics.jsonl and trains no
  # further.
  output_dir = str(tmp_path)

  def trainer_with(metric):
    trainer = train_helpers.tiny_trainer(output_dir, strategy,
                                         train_steps=6, eval_steps=1,
                                         local_eval_frequency=1)
    trainer.evaluator = _evaluator(trainer, metric,
                                   early_stopping_patience=1)
    return trainer

  first = trainer_with(ScriptedMetric([10.0, 5.0]))
  first.train()
  assert (first.step, first.stopped_early) == (2, 2)
  resumed = trainer_with(ScriptedMetric([]))
  assert resumed.train() == {}
  assert (resumed.step, resumed.stopped_early) == (2, 2)
  assert resumed.manager.latest_checkpoint == os.path.join(output_dir,
                                                           "ckpt-2")
