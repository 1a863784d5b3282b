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
import math
import os
import time

from absl import logging
import keras
import tensorflow as tf

from t2tlite import graph_options, models, run_dir
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


@dataclasses.dataclass
class _Loop:
  """What one `Trainer.train` loop keeps between its steps."""
  clock_start: float  # time.monotonic() when training started
  step: int
  window: progress.Window | None = None  # the next progress line's
  last_save: float = 0.0  # time.time() of the last checkpoint
  metrics: dict = dataclasses.field(default_factory=dict)  # the last eval's
  last_eval: int | None = None  # its step
  # Seconds spent in evaluations (after a budget's plan), and in the last
  # one (None before any: the time left counts steps only).
  eval_seconds: float = 0.0
  last_eval_seconds: float | None = None
  first_step_start: float | None = None  # time.time(), until it is done
  meter: budget.StepRateMeter | None = None  # timing a budget's steps


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
    self.planner = budget.Planner.for_config(
        config, hp.warmup_steps, hp.learning_rate_cooldown_steps)

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
    with graph_options.one_round():  # the same outputs, a shorter start
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
    """Makes a `budget.Plan` (made or re-made by `self.planner`) the run's:
    its length and cool-down, recorded in run.json by the chief."""
    self.set_train_steps(plan.train_steps, plan.cooldown_steps)
    self.config = dataclasses.replace(self.config, plan=plan)
    if self.chief:
      run_dir.record_plan(self.config.output_dir, plan.to_json())

  @property
  def _evaluates(self):
    return self.config.schedule == "train_and_evaluate"

  def _train_until(self, stop):
    """`train`, ending early with a checkpoint once `stop.requested`."""
    loop = _Loop(time.monotonic(), self.step)
    self._log_start(loop.step)
    if self._stopped_before(loop.step):
      return loop.metrics
    iterator = self._start(loop)
    while loop.step < self.config.train_steps:
      out, iterator = self._run_step(iterator)
      loop.step = self.step
      if loop.first_step_start is not None:
        self._first_step_done(loop)
      self._check_finite(loop.step, out)
      loop.window.add(out)
      if self._plan_due(loop):
        self._make_plan(loop)
        continue
      if not self.config.planning:
        self._log_progress_due(loop)
        if self._evaluation_due(loop.step) and self._evaluate_in_loop(loop):
          break  # early stopping
      self._save_or_stop(loop, stop)
      if (loop.step % self.config.log_every_steps == 0 and
          self.planner.may_replan(loop.step)):
        self._replan(loop)
    return self._finish(loop)

  def _log_start(self, step):
    if self.restored_from:
      logging.info("Resumed from %s at step %d (next learning rate %.4g)",
                   self.restored_from, step, self.next_learning_rate())
    config = self.config
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

  def _stopped_before(self, step):
    """Whether a resumed run had stopped early already (every worker
    takes the chief's answer)."""
    if self._evaluates and strategy_lib.any_workers(
        self.strategy, self.evaluator.patience_exhausted())[0]:
      self.evaluator.log_stopped_before()
      self.stopped_early = step
      return True
    return False

  def _start(self, loop):
    """Starts the input pipeline and the loop's clocks; returns the
    training iterator."""
    config = self.config
    # The last evaluation's duration, for the time left (a plan's timed
    # evaluation until one runs here).
    loop.last_eval_seconds = config.plan.eval_seconds if config.plan else None
    # The first step can take minutes (tracing, filling the shuffle buffer)
    # and the end tens of seconds: say what is happening meanwhile.
    logging.info("Building the input pipeline...")
    iterator = iter(self.make_dataset("train", True))
    loop.last_save = time.time()
    loop.window = progress.Window(loop.step)
    self.line_pacer = progress.LinePacer.for_budget(config.train_minutes * 60)
    if loop.step < config.train_steps:
      loop.first_step_start = time.time()
      logging.info("Tracing the training step and filling the shuffle buffer "
                   "(the first step takes longest)...")
    if config.planning:
      loop.meter = budget.StepRateMeter(
          budget.measure_seconds(config.train_minutes * 60))
    return iterator

  def _run_step(self, iterator):
    """One training step: (its outputs as floats, the iterator, a new one
    when a finite training set ended: the next epoch)."""
    while True:
      try:
        out = self.train_step(iterator)
        return {k: float(v) for k, v in out.items()}, iterator
      except tf.errors.OutOfRangeError:
        iterator = iter(self.make_dataset("train", True))

  def _first_step_done(self, loop):
    logging.info("First step done in %.1fs; training.",
                 time.time() - loop.first_step_start)
    loop.first_step_start = None
    if loop.meter:
      loop.meter.start(loop.step)

  def _check_finite(self, step, out):
    tokens = max(out["target_tokens"], 1.0)
    for name in ("loss", "nll"):  # label-smoothed, then the plain nll
      if not math.isfinite(out[name]):
        raise NonFiniteLossError(
            f"Step {step}: the training {name} is {out[name] / tokens}. "
            "Stopping without saving; the last good checkpoint "
            f"({self.manager.latest_checkpoint or 'none yet'}) is intact. "
            "Lower learning_rate_scale, raise warmup_steps, or use "
            "mixed_precision bfloat16 rather than float16.")

  # ---- the budget's plan ---------------------------------------------------

  def _plan_due(self, loop):
    """Whether the steps timed for a budget's plan suffice: the chief's
    meter decides, for every worker."""
    meter = loop.meter
    return bool(meter) and loop.step > meter.first_step and (
        strategy_lib.chief_values(self.strategy,
                                  [meter.step_done(loop.step)])[0])

  def _chief_clock(self, loop, seconds):
    """[seconds since training started, `seconds`] on the chief's clock:
    every worker plans from the chief's, so all reach the same plan, or
    the same error."""
    return strategy_lib.chief_values(
        self.strategy, [time.monotonic() - loop.clock_start, seconds])

  def _make_plan(self, loop):
    """Plans the run's length from the timed steps (and an evaluation timed
    here when the schedule evaluates) and applies the plan."""
    planner, step = self.planner, loop.step
    elapsed, step_seconds = self._chief_clock(loop, loop.meter.step_seconds())
    # Without evaluations first: a budget too short fails before anything
    # is written.
    planner.check(step, elapsed, step_seconds)
    eval_seconds = 0.0
    if planner.eval_every > 0:
      logging.info("Timing one evaluation to plan the run...")
      started = time.monotonic()
      loop.metrics, loop.last_eval = self.evaluate(), step
      eval_seconds = time.monotonic() - started
    elapsed, eval_seconds = self._chief_clock(loop, eval_seconds)
    self._apply_plan(planner.first_plan(step, elapsed, step_seconds,
                                        eval_seconds, loop.meter.first_step))
    loop.last_eval_seconds = eval_seconds
    loop.meter, loop.window = None, progress.Window(step)
    loop.eval_seconds = 0.0  # the re-estimates count evaluations from here

  def _replan(self, loop):
    """Re-estimates the plan from the rate since it was made, and applies
    a new one."""
    elapsed, eval_seconds = self._chief_clock(loop, loop.eval_seconds)
    plan = self.planner.replan(loop.step, elapsed, eval_seconds)
    if plan is not None:
      self._apply_plan(plan)

  # ---- logging, evaluating and saving in the loop ---------------------------

  def _evaluation_due(self, step):
    every = self.config.local_eval_frequency
    return self._evaluates and every > 0 and step % every == 0

  def _evaluate_in_loop(self, loop):
    """Evaluates at the loop's step; whether early stopping is due."""
    started = time.monotonic()
    loop.metrics, loop.last_eval = self.evaluate(), loop.step
    loop.last_eval_seconds = time.monotonic() - started
    loop.eval_seconds += loop.last_eval_seconds
    loop.window.leave_out(loop.last_eval_seconds)  # the line reports training
    if not self.evaluator.early_stop_due:
      return False
    self.evaluator.log_early_stopping(loop.step)
    self.stopped_early = loop.step
    return True

  def _save_or_stop(self, loop, stop):
    """Saves a checkpoint when one is due on any worker; raises
    preemption.Preempted after saving when any worker was told to stop."""
    config = self.config
    # No checkpoint before a budget is planned: a budget too short then
    # fails leaving none.
    save_due, stop_due = strategy_lib.any_workers(
        self.strategy,
        time.time() - loop.last_save >= config.save_checkpoints_secs and
        not config.planning, stop.requested)
    if save_due or stop_due:
      self.save()
      loop.last_save = time.time()
    if stop_due:
      raise preemption.Preempted(
          stop.requested or "signal to another worker", loop.step,
          os.path.join(config.output_dir, f"ckpt-{loop.step}"))

  def _finish(self, loop):
    """The final checkpoint, the budget's summary line and the final
    evaluation; returns the last evaluation's metrics."""
    step, config = loop.step, self.config
    if self._saved_step != step:
      self.save()
    if self.planner.planned_here:
      minutes = (time.monotonic() - loop.clock_start) / 60
      (logging.info if minutes <= config.train_minutes else logging.warning)(
          "Step %d (final checkpoint) after %.1f minutes of the "
          "%g-minute budget; %s.", step, minutes, config.train_minutes,
          self.planner.replan_log.summary(config.train_steps))
    if self._evaluates and loop.last_eval != step:
      logging.info("Final evaluation on %s...", config.eval_split)
      loop.metrics = self.evaluate()
    return loop.metrics

  def _log_progress_due(self, loop):
    """At a logged step (and the last): the progress line, paced, and its
    summaries; the next line's window starts. The time left counts the
    evaluations still due at the last one's duration (none before any)."""
    step, config = loop.step, self.config
    if step % config.log_every_steps and step != config.train_steps:
      return
    stats = loop.window.stats(step)
    eval_seconds = loop.last_eval_seconds
    evaluations = (progress.evaluations_due(
        step, config.train_steps, config.local_eval_frequency)
                   if self._evaluates and eval_seconds is not None else 0)
    left = progress.seconds_left(step, config.train_steps,
                                 stats["steps_per_sec"], evaluations,
                                 eval_seconds or 0.0)
    eta = (f"  ETA {progress.format_duration(left)}"
           if step < config.train_steps else "")
    if self.line_pacer.due(last=step >= config.train_steps):
      self.planner.show()  # a total changed since the last line: why
      logging.info(
          "step %d/%d  loss %.4f  nll %.4f  lr %.4g  grad_norm %.3f  "
          "%.2f steps/s  %.0f tokens/s%s", step, config.train_steps,
          stats["loss"], stats["nll"], stats["learning_rate"],
          stats["grad_norm"], stats["steps_per_sec"],
          stats["tokens_per_sec"], eta)
    self.summaries.write("", step, stats)
    loop.window = progress.Window(step)
