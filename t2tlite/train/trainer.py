"""The training of one run: `Trainer` builds the model and optimizer of an
output_dir, restores and saves its checkpoints, and runs the loop:
`Trainer.train()` trains up to `train_steps`, evaluating and checkpointing
on the way (SIGTERM or Ctrl-C end it early with a checkpoint), and
`Trainer.evaluate()` computes teacher-forced metrics on a split.

What the loop uses, each in its own module of this package:
  config.py       TrainConfig: how to run training
  run_hparams.py  the hparams of a run on a restart
  train_step.py   one optimizer update, distributed over the replicas
  evaluation.py   evaluations, the dev metric, the best checkpoints and
                  early stopping, and their files
  budget.py       --train_minutes: the run's plan and re-plans (Planner)
  summaries.py    the scalar summaries (TensorBoard event files)
  progress.py     the progress line's figures
  preemption.py   SIGTERM, SIGINT and lost workers
"""
import dataclasses
import functools
import math
import os
import time

from absl import logging
import keras
import tensorflow as tf

from t2tlite import models, run_dir
from t2tlite.train import budget
from t2tlite.train import evaluation
from t2tlite.train import preemption
from t2tlite.train import progress
from t2tlite.train import strategy as strategy_lib
from t2tlite.train import summaries
from t2tlite.train import train_step as train_step_lib
from t2tlite.train.schedules import build_optimizer, set_train_steps

# train_steps of a run whose length --train_minutes is still to plan.
_UNPLANNED = 2**31 - 1


class NonFiniteLossError(RuntimeError):
  """The training loss became NaN or infinite; nothing was saved after it."""


class Trainer:
  """Trains and evaluates one run.

  Args:
    hp: HParams of the model, optimizer and batches.
    config: TrainConfig.
    strategy: a tf.distribute.Strategy (see `t2tlite.train.strategy`).
    vocab_size: shared (or input) vocabulary size.
    make_dataset: `(split, training) -> tf.distribute.DistributedDataset` of
      {"inputs": int32 [batch, src_len], "targets": int32 [batch, tgt_len]}
      per replica; training datasets should repeat (a finite one restarts).
    target_vocab_size: the targets' own vocabulary size; None when shared.
    word_pointer: None, or the tables of the decoder's word pointer
      (`t2tlite.models.word_pointer_tables`).
    on_worker_lost: with several workers, called with the
      `preemption.WorkerLostError` as soon as a peer is found lost, possibly
      from another thread; it may end the process (see
      `preemption.reporting_lost_workers`). None logs the error.
    dev_metric: None, or a `dev_metric.DevMetric`: every evaluation then
      also decodes dev with the checkpoint of the step and scores it; the
      best checkpoints (config.keep_best_checkpoints) are kept in
      OUTPUT_DIR/best (`best.py`). With several workers, give it to each:
      every worker saves the checkpoint, the chief decodes, and all take
      its early-stopping decision.
    on_best: None, or called with the prefix of OUTPUT_DIR/best's
      checkpoint each time it improves (e.g. to export it).
    warm_start: None, or a `warm_start.WarmStart` (checked against a model
      built as this one): its weights are assigned when output_dir holds no
      checkpoint yet; a run that resumes ignores it (`warm_started` says
      which happened).
  """

  def __init__(self, hp, config, strategy, vocab_size, make_dataset,
               target_vocab_size=None, word_pointer=None, on_worker_lost=None,
               dev_metric=None, on_best=None, warm_start=None):
    if config.plan is not None:
      config = dataclasses.replace(config,
                                   train_steps=config.plan.train_steps)
      hp = hp.replace(train_steps=config.train_steps,
                      learning_rate_cooldown_steps=config.plan.cooldown_steps)
    elif config.planning:
      # Until the length is planned: no cool-down, or the ceiling's (the
      # plan of a fast machine, which a very short ceiling may reach first).
      steps = config.max_planned_steps or _UNPLANNED
      config = dataclasses.replace(config, train_steps=steps)
      hp = hp.replace(train_steps=steps)
    self.hp, self.config, self.strategy = hp, config, strategy
    self.on_worker_lost = on_worker_lost
    self.make_dataset = make_dataset
    self.chief = strategy_lib.is_chief(strategy)
    with strategy.scope():
      self.model = models.build_model(
          hp, vocab_size, dtype=config.keras_policy,
          model=config.model, target_vocab_size=target_vocab_size,
          word_pointer=word_pointer)
      self.base_optimizer = build_optimizer(hp)
      self.optimizer = (
          keras.optimizers.LossScaleOptimizer(self.base_optimizer)
          if config.mixed_precision == "float16" else self.base_optimizer)
      self.optimizer.build(self.model.trainable_variables)
    train_step_lib.let_trainer_all_reduce(self.base_optimizer)
    # The base optimizer (not a LossScaleOptimizer wrapper) is checkpointed, so
    # a run can resume with or without --mixed_precision=float16.
    self.checkpoint = run_dir.make_checkpoint(self.model, self.base_optimizer)
    directory = config.output_dir
    if not self.chief:  # other workers write, then delete, a private copy
      directory = os.path.join(
          config.output_dir, f"worker_tmp_{strategy_lib.task_id(strategy)}")
    self.manager = tf.train.CheckpointManager(
        self.checkpoint, directory, max_to_keep=config.keep_checkpoint_max)
    self.stopped_early = None  # the step train() stopped early at, if it did
    latest = self.restored_from = self._restore_newest_intact()
    self.warm_started = None  # the WarmStart applied, if one was
    if warm_start is not None:
      if latest:
        logging.info("Not warm-starting from %s: %s holds checkpoints, and "
                     "the run resumes from %s.", warm_start.parent.checkpoint,
                     config.output_dir, latest)
      else:
        warm_start.apply(self.model)
        self.warm_started = warm_start
        logging.info("%s", warm_start.describe())
    self._saved_step = self.step if latest else None
    self._saved_path = latest
    self.summaries = summaries.ScalarWriter(config.output_dir, self.chief)
    self.evaluator = evaluation.Evaluator(
        self.model, hp, config, strategy, make_dataset, self.summaries,
        self._checkpoint_at, dev_metric, on_best)
    self._train_step = train_step_lib.TrainStep(
        self.model, self.optimizer, strategy, hp, config.xla).function
    self.planner = budget.Planner(
        config, hp.warmup_steps, hp.learning_rate_cooldown_steps,
        lambda values: strategy_lib.chief_values(strategy, values),
        self.evaluate, self._apply_plan,
        record=functools.partial(run_dir.record_plan, config.output_dir)
        if self.chief else None)

  def _restore_newest_intact(self):
    """Restores the newest checkpoint of output_dir that can be read,
    saying which damaged ones it skipped; returns its prefix, or None.

    Raises:
      run_dir.DamagedCheckpointError: every checkpoint is damaged.
    """
    candidates = run_dir.checkpoints_newest_first(self.config.output_dir)
    for path in candidates:
      try:
        run_dir.restore(self.checkpoint,
                        path).assert_existing_objects_matched()
        return path
      except run_dir.DamagedCheckpointError as error:
        logging.warning("Skipping a damaged checkpoint: %s Resuming from an "
                        "older one.", error)
    if candidates:
      raise run_dir.DamagedCheckpointError(
          f"every checkpoint in {self.config.output_dir} is damaged "
          f"({', '.join(os.path.basename(p) for p in candidates)}); train "
          "in a new output_dir.")
    return None

  @property
  def step(self):
    """Optimizer updates applied so far."""
    return int(self.optimizer.iterations.numpy())

  def next_learning_rate(self):
    """The rate of the next update (eq. (3) at step + 1)."""
    return float(self.optimizer.learning_rate.numpy())

  def train_step(self, iterator):
    """One optimizer update on the next batches of `iterator` (a distributed
    iterator of `make_dataset("train", True)`): the step `train()` repeats,
    without its logging, checkpoints or evaluation.

    Returns:
      {"loss", "nll" (sums over the step's real target tokens), "target_tokens",
      "source_tokens", "grad_norm", "learning_rate"}: float32 scalar tensors.
    """
    return self._train_step(iterator)

  def evaluate(self, split=None):
    """Teacher-forced metrics of the current weights on a split
    (`evaluation.Evaluator.evaluate`; with a dev metric, also its score and
    the best checkpoints)."""
    return self.evaluator.evaluate(self.step, split)

  # ---- checkpoints ---------------------------------------------------------

  def save(self):
    """Writes a checkpoint numbered by the step (every worker must call it)."""
    step = self.step
    path = self.manager.save(checkpoint_number=step)
    self._saved_step, self._saved_path = step, path
    if self.chief:
      logging.info("Saved checkpoint %s", path)
    else:
      tf.io.gfile.rmtree(self.manager.directory)
    return path

  def _checkpoint_at(self, step):
    """The prefix of the checkpoint of `step`, the current step: saved
    first if need be (every worker must call it)."""
    if self._saved_step != step:
      self.save()
    return self._saved_path

  # ---- the loop --------------------------------------------------------------

  def train(self):
    """Trains up to train_steps, evaluating if the schedule says so.

    Returns:
      The last evaluation metrics ({} when the schedule is "train").
    Raises:
      NonFiniteLossError: the loss became NaN or infinite (the last good
        checkpoint is left as it was).
      preemption.Preempted: SIGTERM or SIGINT; every worker saved a
        checkpoint at the step reached.
      preemption.WorkerLostError: a peer worker died or stopped answering.
    """
    with preemption.StopSignals() as stop, preemption.reporting_lost_workers(
        self.strategy, self.config.output_dir,
        self.on_worker_lost) as peer_left:
      try:
        metrics = self._train_until(stop)
      except preemption.Preempted:
        # Every worker stops at the same step (any_workers): they leave
        # together, as after the last step.
        strategy_lib.leave_together(self.strategy, peer_left)
        raise
      # After the chief's own last work (its summaries, metrics.jsonl).
      strategy_lib.leave_together(self.strategy, peer_left)
      return metrics

  def set_train_steps(self, train_steps, cooldown_steps):
    """Fixes the run's length (a planned budget): the loop and the
    schedule's cool-down (of `cooldown_steps`) end at `train_steps`."""
    self.config = dataclasses.replace(self.config, train_steps=train_steps)
    self.hp = self.hp.replace(train_steps=train_steps)
    # The traced step reads the schedule's length: no new trace.
    set_train_steps(self.base_optimizer, train_steps, cooldown_steps)

  def _apply_plan(self, plan):
    """Fixes the run's length to a `budget.Plan` (made or re-made by
    `self.planner`)."""
    self.set_train_steps(plan.train_steps, plan.cooldown_steps)
    self.config = dataclasses.replace(self.config, plan=plan)

  def _train_until(self, stop):
    """`train`, ending early with a checkpoint once `stop.requested`."""
    clock_start = time.monotonic()
    config, start_step = self.config, self.step
    evaluate = config.schedule == "train_and_evaluate"
    if self.restored_from:
      logging.info("Resumed from %s at step %d (next learning rate %.4g)",
                   self.restored_from, start_step, self.next_learning_rate())
    if config.planning:
      logging.info(
          "Training for %g minutes on %d replica(s), %d x %d padded tokens "
          "per replica per step; the steps are planned from the measured "
          "rate.", config.train_minutes, self.strategy.num_replicas_in_sync,
          self.hp.gradient_accumulation_steps, self.hp.batch_size)
    else:
      logging.info(
          "Training to step %d on %d replica(s), %d x %d padded tokens per "
          "replica per step.", config.train_steps,
          self.strategy.num_replicas_in_sync,
          self.hp.gradient_accumulation_steps, self.hp.batch_size)
    metrics, step, last_eval = {}, start_step, None
    eval_seconds = 0.0  # spent in evaluations (after a budget's plan)
    # The last evaluation's duration, for the time left (a plan's timed
    # evaluation until one runs here).
    last_eval_seconds = config.plan.eval_seconds if config.plan else None
    if evaluate and strategy_lib.any_workers(  # a resumed run that stopped
        self.strategy, self.evaluator.patience_exhausted())[0]:
      self.evaluator.log_stopped_before()
      self.stopped_early = step
      return metrics
    # The first step can take minutes (tracing, filling the shuffle buffer)
    # and the end tens of seconds: say what is happening meanwhile.
    logging.info("Building the input pipeline...")
    iterator = iter(self.make_dataset("train", True))
    last_save = time.time()
    window = progress.Window(step)
    self.line_pacer = progress.LinePacer.for_budget(config.train_minutes * 60)
    first_step_start = time.time() if step < config.train_steps else None
    if first_step_start:
      logging.info("Tracing the training step and filling the shuffle buffer "
                   "(the first step takes longest)...")
    meter = budget.StepRateMeter(
        budget.measure_seconds(config.train_minutes * 60)) if (
            config.planning) else None
    while step < self.config.train_steps:
      try:
        out = self._train_step(iterator)
      except tf.errors.OutOfRangeError:  # a finite training set: next epoch
        iterator = iter(self.make_dataset("train", True))
        continue
      out = {k: float(v) for k, v in out.items()}
      step = self.step
      if first_step_start:
        logging.info("First step done in %.1fs; training.",
                     time.time() - first_step_start)
        first_step_start = None
        if meter:
          meter.start(step)
      loss = out["loss"] / max(out["target_tokens"], 1.0)
      if not math.isfinite(loss) or not math.isfinite(out["nll"]):
        raise NonFiniteLossError(
            f"Step {step}: the training loss is {loss}. Stopping without "
            f"saving; the last good checkpoint "
            f"({self.manager.latest_checkpoint or 'none yet'}) is intact. "
            "Lower learning_rate_scale, raise warmup_steps, or use "
            "mixed_precision bfloat16 rather than float16.")
      window.add(out)
      # The chief's meter decides when the plan is made, for every worker.
      if meter and step > meter.first_step and strategy_lib.chief_values(
          self.strategy, [meter.step_done(step)])[0]:
        metrics = self.planner.make_plan(step, clock_start, meter)
        last_eval = step if metrics else last_eval
        last_eval_seconds = self.config.plan.eval_seconds
        meter, config, window = None, self.config, progress.Window(step)
        eval_seconds = 0.0  # the re-estimates count evaluations from here
        continue
      if (step % config.log_every_steps == 0 or
          step == config.train_steps) and not config.planning:
        self._log_progress(step, window, evaluate, last_eval_seconds)
        window = progress.Window(step)
      # Not while a budget's steps are timed: the plan times an evaluation
      # of its own, and one in between would slow the measured rate.
      if evaluate and config.local_eval_frequency > 0 and (
          step % config.local_eval_frequency == 0) and not config.planning:
        started = time.monotonic()
        metrics, last_eval = self.evaluate(), step
        last_eval_seconds = time.monotonic() - started
        eval_seconds += last_eval_seconds
        window.leave_out(last_eval_seconds)  # the line reports training
        if self.evaluator.early_stop_due:
          self.evaluator.log_early_stopping(step)
          self.stopped_early = step
          break
      # No checkpoint before a budget is planned: a budget too short then
      # fails leaving none.
      save_due, stop_due = strategy_lib.any_workers(
          self.strategy,
          time.time() - last_save >= config.save_checkpoints_secs and
          not config.planning, stop.requested)
      if save_due or stop_due:
        self.save()
        last_save = time.time()
      if stop_due:
        raise preemption.Preempted(
            stop.requested or "signal to another worker", step,
            os.path.join(config.output_dir, f"ckpt-{step}"))
      if step % config.log_every_steps == 0 and self.planner.may_replan(
          step):
        self.planner.replan(step, time.monotonic() - clock_start,
                            eval_seconds)
        config = self.config
    if self._saved_step != step:
      self.save()
    if self.planner.planned_here:
      minutes = (time.monotonic() - clock_start) / 60
      (logging.info if minutes <= config.train_minutes else logging.warning)(
          "Step %d (final checkpoint) after %.1f minutes of the "
          "%g-minute budget; %s.", step, minutes, config.train_minutes,
          self.planner.replan_log.summary(config.train_steps))
    if evaluate and last_eval != step:
      logging.info("Final evaluation on %s...", config.eval_split)
      metrics = self.evaluate()
    return metrics

  def _log_progress(self, step, window, evaluate, eval_seconds):
    """Logs a progress line and its summaries. The time left counts the
    evaluations still due at `eval_seconds` each (the last one's; None
    before any: steps only)."""
    stats = window.stats(step)
    config = self.config
    evaluations = (progress.evaluations_due(
        step, config.train_steps, config.local_eval_frequency)
                   if evaluate and eval_seconds is not None else 0)
    left = progress.seconds_left(step, config.train_steps,
                                 stats["steps_per_sec"], evaluations,
                                 eval_seconds or 0.0)
    eta = (f"  ETA {progress.format_duration(left)}"
           if step < config.train_steps else "")
    if self.line_pacer.due(last=step >= config.train_steps):
      logging.info(
          "step %d/%d  loss %.4f  nll %.4f  lr %.4g  grad_norm %.3f  "
          "%.2f steps/s  %.0f tokens/s%s", step, self.config.train_steps,
          stats["loss"], stats["nll"], stats["learning_rate"],
          stats["grad_norm"], stats["steps_per_sec"],
          stats["tokens_per_sec"], eta)
    self.summaries.write("", step, stats)
