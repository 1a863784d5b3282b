"""Evaluation of a run: teacher-forced metrics on a split, the dev metric
(decoding dev with the checkpoint of the step, `dev_metric.py`), the best
checkpoints (`best.py`), early stopping, and their files:

    OUTPUT_DIR/eval/             the evaluation summaries
    OUTPUT_DIR/eval_results.json the last evaluation's metrics
    OUTPUT_DIR/metrics.jsonl     one line per evaluation (`best.py`)
    OUTPUT_DIR/best/             the best checkpoints by the dev metric
"""
import json
import math
import os
import time

from absl import logging
import tensorflow as tf

from t2tlite import files
from t2tlite.train import best as best_lib
from t2tlite.train import strategy as strategy_lib
from t2tlite.train.losses import smoothed_cross_entropy, token_accuracy
from t2tlite.train.train_step import SUM, sum_dicts

EVAL_RESULTS_FILE = "eval_results.json"
EVAL_SUBDIR = "eval"


class Evaluator:
  """Evaluates a run's model; keeps its best checkpoints and decides early
  stopping.

  Args:
    model: the model trained (built in strategy.scope()).
    hp: HParams; their label_smoothing.
    config: the TrainConfig; its output_dir, eval_split, eval_steps,
      early_stopping_patience and keep_best_checkpoints.
    strategy: a tf.distribute.Strategy.
    make_dataset: as `Trainer`'s (an evaluation dataset ends).
    summaries: a `summaries.ScalarWriter` of the run.
    checkpoint_at: `step -> prefix` of the checkpoint of `step` (the
      current one), saved first if need be; every worker calls it.
    dev_metric, on_best: as `Trainer`'s.
  Raises:
    ValueError: early_stopping_patience without a dev metric.
  """

  def __init__(self, model, hp, config, strategy, make_dataset, summaries,
               checkpoint_at, dev_metric=None, on_best=None):
    self.model, self.hp, self.config, self.strategy = (
        model, hp, config, strategy)
    self.make_dataset, self.summaries = make_dataset, summaries
    self.checkpoint_at = checkpoint_at
    self.dev_metric, self.on_best = dev_metric, on_best
    self.chief = strategy_lib.is_chief(strategy)
    # Whether the last evaluation found early stopping due (the chief's
    # decision, on every worker).
    self.early_stop_due = False
    if config.early_stopping_patience and dev_metric is None:
      raise ValueError("early_stopping_patience needs a dev metric")
    self.best = best_lib.read_best(config.output_dir)
    self.evaluations_since_best = best_lib.evaluations_since_best(
        best_lib.read_metrics(config.output_dir),
        dev_metric.name if dev_metric else None,
        self.best["step"] if self.best else None)
    # Not compiled with XLA: inside its while loop, XLA on several replicas
    # reads variables from the wrong device ("Trying to access resource ...
    # located in device"). The evaluation loop keeps AutoGraph (a tf.range
    # loop, a break), for itself only (_eval_replica_fn).
    self._eval_loop = tf.function(self._eval_loop_fn)

  # Called from the AutoGraph-converted evaluation loop, but not converted
  # itself: the model's code needs no conversion (see train_step.py).
  @tf.autograph.experimental.do_not_convert
  def _eval_replica_fn(self, batch):
    """Teacher-forced sums of one batch (per replica).

    Args:
      batch: {"inputs": int32 [batch, src_len], "targets": int32 [batch,
        tgt_len]}, 0 = padding.
    Returns:
      {"loss", "nll", "tokens", "correct_tokens", "sequences" (rows with a
      real target token), "correct_sequences"}: float32 [] sums.
    """
    targets = batch["targets"]
    logits = self.model(batch, training=False)
    smoothed, nll, weights = smoothed_cross_entropy(logits, targets,
                                                    self.hp.label_smoothing)
    correct, _ = token_accuracy(logits, targets)
    row_tokens = tf.reduce_sum(weights, axis=1)
    row_correct = tf.reduce_sum(correct, axis=1)
    return {"loss": tf.reduce_sum(smoothed), "nll": tf.reduce_sum(nll),
            "tokens": tf.reduce_sum(weights),
            "correct_tokens": tf.reduce_sum(correct),
            "sequences": tf.reduce_sum(tf.cast(row_tokens > 0, tf.float32)),
            "correct_sequences": tf.reduce_sum(tf.cast(
                (row_tokens > 0) & (row_correct == row_tokens), tf.float32))}

  def _eval_loop_fn(self, iterator, max_batches):
    """`_eval_replica_fn`'s sums over every replica and at most
    `max_batches` (int32 []) batches of a distributed `iterator`, or until
    it ends."""
    keys = ("loss", "nll", "tokens", "correct_tokens", "sequences",
            "correct_sequences")
    totals = {k: tf.constant(0.0) for k in keys}
    for _ in tf.range(max_batches):
      optional = iterator.get_next_as_optional()
      if not optional.has_value():
        break
      per_replica = self.strategy.run(self._eval_replica_fn,
                                      args=(optional.get_value(),))
      totals = sum_dicts(totals, {
          k: self.strategy.reduce(SUM, per_replica[k], axis=None)
          for k in keys})
    return totals

  def evaluate(self, step, split=None):
    """Teacher-forced metrics of the current weights (of optimizer step
    `step`) on a split (None: config.eval_split).

    Returns:
      {"step", "loss" (label-smoothed, per token), "nll", "perplexity",
      "accuracy" (per token), "sequence_accuracy" (every token of the target
      right), "tokens", "sequences"}; also written as summaries under
      output_dir/eval and to output_dir/eval_results.json.
    """
    split = split or self.config.eval_split
    start = time.time()
    max_batches = self.config.eval_steps if self.config.eval_steps > 0 else (
        2**31 - 1)
    iterator = iter(self.make_dataset(split, False))
    totals = {k: float(v) for k, v in
              self._eval_loop(iterator, tf.constant(max_batches)).items()}
    tokens, sequences = max(totals["tokens"], 1.0), max(totals["sequences"],
                                                         1.0)
    metrics = {
        "step": step, "split": split,
        "loss": totals["loss"] / tokens, "nll": totals["nll"] / tokens,
        "perplexity": math.exp(min(totals["nll"] / tokens, 50.0)),
        "accuracy": totals["correct_tokens"] / tokens,
        "sequence_accuracy": totals["correct_sequences"] / sequences,
        "tokens": int(totals["tokens"]), "sequences": int(totals["sequences"]),
    }
    logging.info(
        "eval %s at step %d: loss %.4f  nll %.4f  accuracy %.4f  "
        "sequence_accuracy %.4f  (%d sequences, %.1fs)", split, step,
        metrics["loss"], metrics["nll"], metrics["accuracy"],
        metrics["sequence_accuracy"], metrics["sequences"],
        time.time() - start)
    scalars = {k: metrics[k] for k in ("loss", "nll", "accuracy",
                                       "sequence_accuracy")}
    if self.dev_metric is not None:
      dev = self._score_dev(step)  # {} on the workers other than the chief
      metrics.update(dev)
      scalars.update(dev.get("scores", {}))
      # The other workers wait here while the chief decodes dev, however
      # long that takes, and all take its early-stopping decision.
      self.early_stop_due, = strategy_lib.any_workers(
          self.strategy, self.patience_exhausted(),
          timeout_secs=strategy_lib.UNBOUNDED_SECS)
    self.summaries.write(EVAL_SUBDIR, step, scalars)
    if self.chief:
      files.atomic_write_text(
          os.path.join(self.config.output_dir, EVAL_RESULTS_FILE),
          json.dumps(metrics, indent=2, sort_keys=True))
      record = {"step": step, "wall_time": time.time(),
                "loss": metrics["loss"], "split": split}
      record.update(metrics.get("scores", {}))
      best_lib.append_metrics(self.config.output_dir, record)
    return metrics

  def _score_dev(self, step):
    """Decodes and scores dev with the checkpoint of `step` (saved first if
    need be, by every worker) and keeps it in OUTPUT_DIR/best when it ranks
    among the config's keep_best_checkpoints best so far. Only the chief
    decodes: the checkpoint is the same everywhere.

    Returns:
      {"metric": name, name: score, "scores": every figure,
      "best_step", "best_value"}; {} on the other workers.
    """
    checkpoint = self.checkpoint_at(step)
    if not self.chief:
      return {}
    result = self.dev_metric.score(checkpoint)
    # On a tie the earlier step stays the best.
    improved = self.best is None or result.value > self.best["value"]
    path = best_lib.keep_best(self.config.output_dir, checkpoint, step,
                              result.name, result.value, result.scores,
                              keep=self.config.keep_best_checkpoints)
    if path is not None:
      self.best = best_lib.read_best(self.config.output_dir)
    if improved:
      self.evaluations_since_best = 0
    else:
      self.evaluations_since_best += 1
    best_dir = os.path.join(self.config.output_dir, best_lib.BEST_DIR)
    kept = (f", kept in {best_dir}" if improved else
            f", kept in {best_dir} among the "
            f"{self.config.keep_best_checkpoints} best" if path else "")
    logging.info(
        "dev %s at step %d: %.2f (%s; best %.2f at step %d%s)", result.name,
        step, result.value,
        ", ".join(f"{k} {v:.2f}" for k, v in result.scores.items()
                  if k != result.name) or f"{result.sentences} sentences",
        self.best["value"], self.best["step"], kept)
    if improved and self.on_best is not None:
      self.on_best(path)
    return {"metric": result.name, result.name: result.value,
            "scores": result.scores, "best_step": self.best["step"],
            "best_value": self.best["value"]}

  def patience_exhausted(self):
    """Whether early stopping is due: patience evaluations without a better
    dev score."""
    patience = self.config.early_stopping_patience
    return bool(patience) and self.evaluations_since_best >= patience

  def log_stopped_before(self):
    """Says that early stopping was due already (a resumed run that
    stopped)."""
    best = (f" (best {self.best['value']:.2f} at step "
            f"{self.best['step']})" if self.best else "")
    logging.info("Early stopping: no better dev %s in the last %d "
                 "evaluations%s; not training further.",
                 self.dev_metric.name, self.evaluations_since_best, best)

  def log_early_stopping(self, step):
    """Says why training stops at `step` (early_stop_due)."""
    if self.chief:
      logging.info(
          "Early stopping at step %d: no better dev %s in %d "
          "evaluations (best %.2f at step %d, kept in %s).", step,
          self.dev_metric.name, self.evaluations_since_best,
          self.best["value"], self.best["step"],
          os.path.join(self.config.output_dir, best_lib.BEST_DIR))
    else:
      logging.info("Early stopping at step %d (the chief's dev "
                   "metric).", step)
