"""The training loop: distributed steps, checkpoints, summaries, evaluation.

One optimizer update ("step"):
  each replica takes `gradient_accumulation_steps` batches of at most
  `batch_size` padded tokens, sums the label-smoothed cross-entropy of their
  real target tokens and divides by the number of real target tokens in the
  whole step (all replicas, all accumulated batches); the gradients are summed
  over the accumulated batches and all-reduced (summed) over replicas. So the
  update is that of one big batch's per-token mean loss, whatever the split
  into replicas and accumulation steps.

`Trainer` holds the model, optimizer and checkpoint manager of an output_dir;
`Trainer.train()` trains up to `train_steps`, evaluating and checkpointing on
the way (SIGTERM or Ctrl-C end it early with a checkpoint: `preemption.py`),
and `Trainer.evaluate()` computes teacher-forced metrics on a split.
"""
import dataclasses
import json
import math
import os
import time

from absl import logging
import keras
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from t2tlite import files, models, run_dir
from t2tlite.hparams_lib import HParams, create_hparams
from t2tlite.train import best as best_lib
from t2tlite.train import budget
from t2tlite.train import preemption
from t2tlite.train import progress
from t2tlite.train import strategy as strategy_lib
from t2tlite.train.losses import smoothed_cross_entropy, token_accuracy
from t2tlite.train.schedules import build_optimizer, set_train_steps

SCHEDULES = ("train", "train_and_evaluate", "evaluate")
MIXED_PRECISION = {None: None, "float32": None, "bfloat16": "mixed_bfloat16",
                   "float16": "mixed_float16"}
EVAL_RESULTS_FILE = "eval_results.json"
EVAL_SUBDIR = "eval"
_SUM = tf.distribute.ReduceOp.SUM
# train_steps of a run whose length --train_minutes is still to plan.
_UNPLANNED = 2**31 - 1
_MEAN = tf.distribute.ReduceOp.MEAN
# What tensorboard's tf.summary.scalar writes, without needing the tensorboard
# package at training time (TensorFlow 2.21 does not install it).
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
    data_class=summary_pb2.DATA_CLASS_SCALAR).SerializeToString()


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """How to run training (the trainer's flags, as plain values).

  Attributes:
    output_dir: checkpoints, summaries and run files.
    train_steps: optimizer updates to reach (a restart continues up to it).
    schedule: "train", "train_and_evaluate" or "evaluate" (the latest
      checkpoint, once).
    eval_steps: evaluation batches (per replica) at most; <= 0 = whole split.
    local_eval_frequency: evaluate every this many steps in
      train_and_evaluate (and at the end); <= 0 = only at the end.
    save_checkpoints_secs: checkpoint at least this often (and at the end).
    keep_checkpoint_max: checkpoints kept (older ones are deleted).
    xla: compile the per-replica computation with XLA.
    mixed_precision: None or "float32", "bfloat16", or "float16" (with
      dynamic loss scaling); `t2tlite.precision.choose` picks one.
    log_every_steps: console and summary frequency.
    eval_split: the split evaluated.
    model: the registered model name (t2tlite.registry.models).
    early_stopping_patience: with a dev metric, stop training after this
      many evaluations without a better score; 0 = never.
    keep_best_checkpoints: with a dev metric, how many of the best
      checkpoints OUTPUT_DIR/best keeps (`best.py`), >= 1.
    train_minutes: > 0: plan train_steps from the measured step rate so
      that the run ends within this many minutes (`budget.py`); train_steps
      is then ignored, unless `plan` holds a plan already made.
    max_planned_steps: with train_minutes, plan at most this many steps
      (`budget.plan_train_steps`' max_steps); 0 = as many as fit.
    plan: None, or the `budget.Plan` a resumed run continues (its
      train_steps is then the run's).
  """
  output_dir: str
  train_steps: int
  schedule: str = "train_and_evaluate"
  eval_steps: int = 100
  local_eval_frequency: int = 1000
  save_checkpoints_secs: float = 600.0
  keep_checkpoint_max: int = 20
  xla: bool = False
  mixed_precision: str | None = None
  log_every_steps: int = 100
  eval_split: str = "dev"
  model: str = models.DEFAULT_MODEL
  early_stopping_patience: int = 0
  keep_best_checkpoints: int = 1
  train_minutes: float = 0.0
  max_planned_steps: int = 0
  plan: budget.Plan | None = None

  @property
  def planning(self):
    """Whether train() must still plan the run's length."""
    return self.train_minutes > 0 and self.plan is None

  def __post_init__(self):
    if self.schedule not in SCHEDULES:
      raise ValueError(f"schedule={self.schedule!r}: expected one of "
                       f"{', '.join(SCHEDULES)}")
    if self.mixed_precision not in MIXED_PRECISION:
      raise ValueError(f"mixed_precision={self.mixed_precision!r}: expected "
                       "float32, bfloat16 or float16 (or None)")
    for name in ("train_steps", "keep_checkpoint_max", "log_every_steps",
                 "keep_best_checkpoints"):
      if getattr(self, name) <= 0:
        raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
    if self.early_stopping_patience < 0:
      raise ValueError("early_stopping_patience must be >= 0, got "
                       f"{self.early_stopping_patience}")


class NonFiniteLossError(RuntimeError):
  """The training loss became NaN or infinite; nothing was saved after it."""


class HParamsConflictError(ValueError):
  """A restart asked for hparams different from those the run was started with."""


def resolve_hparams(output_dir, hparams_set=None, overrides="",
                    train_steps=None):
  """The hparams of a run: those saved in output_dir, or the requested ones.

  On a restart (output_dir holds hparams.json), the saved hparams are used; a
  requested set and overrides must give the same values. `train_steps` (the
  --train_steps flag) may change on a restart, to train a run further.

  Raises:
    HParamsConflictError: the requested hparams differ from the saved ones.
    ValueError: no saved hparams and no hparams_set.
  """
  path = os.path.join(output_dir, run_dir.HPARAMS_FILE)
  saved = None
  if tf.io.gfile.exists(path):
    with tf.io.gfile.GFile(path) as f:
      saved = HParams.from_json(f.read())
  requested = None
  if hparams_set:
    requested = create_hparams(hparams_set, overrides)
  elif overrides and saved is not None:  # overrides of the saved hparams
    requested = saved.override(overrides)
  if requested is None and saved is None:
    raise ValueError(f"hparams_set is required: {output_dir} holds no "
                     f"{run_dir.HPARAMS_FILE} to continue from.")
  if requested is not None and saved is not None:
    differ = [f"{k}: saved {v!r}, requested {requested.to_dict()[k]!r}"
              for k, v in saved.to_dict().items()
              if k != "train_steps" and requested.to_dict()[k] != v]
    if differ:
      raise HParamsConflictError(
          f"{output_dir} was trained with other hparams than requested "
          f"(hparams_set={hparams_set or '(the saved one)'}, overrides="
          f"{overrides!r}):\n  " +
          "\n  ".join(differ) +
          f"\nTo continue the run, leave out hparams_set and overrides (the "
          f"saved {run_dir.HPARAMS_FILE} is used); to train with the new "
          f"values, use another output_dir.")
  hp = saved or requested
  return hp.replace(train_steps=train_steps) if train_steps else hp


def _dense(grad, variable):
  if grad is None:
    return tf.zeros_like(variable)
  return tf.convert_to_tensor(grad)


def _sum_dicts(a, b):
  return {k: a[k] + b[k] for k in a}


def _let_trainer_all_reduce(optimizer):
  """Stops a Keras 3 optimizer from all-reducing gradients itself.

  The trainer all-reduces them before `apply_gradients` (to log the global
  gradient norm, and so that a float16 LossScaleOptimizer checks the same
  gradients on every replica). Keras 3 has no `experimental_aggregate_
  gradients=False` (keras-team/keras#19308), so the TF backend's summing hook
  is replaced on this instance by the identity.
  """
  if not hasattr(optimizer, "_all_reduce_sum_gradients"):
    raise RuntimeError("This Keras version's optimizer has no "
                       "_all_reduce_sum_gradients; the trainer needs updating.")
  optimizer._all_reduce_sum_gradients = lambda grads_and_vars: grads_and_vars


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
  """

  def __init__(self, hp, config, strategy, vocab_size, make_dataset,
               target_vocab_size=None, word_pointer=None, on_worker_lost=None,
               dev_metric=None, on_best=None):
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
    self.dev_metric, self.on_best = dev_metric, on_best
    self.make_dataset = make_dataset
    self.chief = strategy_lib.is_chief(strategy)
    self.multi_worker = strategy_lib.is_multi_worker(strategy)
    with strategy.scope():
      self.model = models.build_model(
          hp, vocab_size, dtype=MIXED_PRECISION[config.mixed_precision],
          model=config.model, target_vocab_size=target_vocab_size,
          word_pointer=word_pointer)
      self.base_optimizer = build_optimizer(hp)
      self.optimizer = (
          keras.optimizers.LossScaleOptimizer(self.base_optimizer)
          if config.mixed_precision == "float16" else self.base_optimizer)
      self.optimizer.build(self.model.trainable_variables)
    _let_trainer_all_reduce(self.base_optimizer)
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
    # Whether the last evaluation found early stopping due (the chief's
    # decision, on every worker).
    self.early_stop_due = False
    latest = self.restored_from = self._restore_newest_intact()
    self._saved_step = self.step if latest else None
    self._saved_path = latest
    if config.early_stopping_patience and dev_metric is None:
      raise ValueError("early_stopping_patience needs a dev metric")
    self.best = best_lib.read_best(config.output_dir)
    self.evaluations_since_best = best_lib.evaluations_since_best(
        best_lib.read_metrics(config.output_dir),
        dev_metric.name if dev_metric else None,
        self.best["step"] if self.best else None)
    # XLA compiles the per-replica forward and backward pass. Evaluation is not
    # compiled: inside its while loop, XLA on several replicas reads variables
    # from the wrong device ("Trying to access resource ... located in device").
    # The steps without AutoGraph (their loops are over Python lists and
    # ranges): converting the model's Python code took seconds at every
    # start. The evaluation loop keeps it (a tf.range loop, a break), for
    # itself only (_eval_replica_fn).
    self._micro_step = tf.function(self._micro_step_fn,
                                   jit_compile=config.xla, autograph=False)
    self._train_step = tf.function(self._train_step_fn, autograph=False)
    self._eval_loop = tf.function(self._eval_loop_fn)
    self._writers = {}

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

  # ---- the distributed train step -------------------------------------------

  def _micro_step_fn(self, batch, denominator):
    """Gradients of one batch's share of the step loss (per replica)."""
    targets = batch["targets"]
    with tf.GradientTape() as tape:
      logits = self.model(batch, training=True)
      smoothed, nll, weights = smoothed_cross_entropy(
          logits, targets, self.hp.label_smoothing)
      loss = tf.reduce_sum(smoothed) / denominator
      if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
        loss = self.optimizer.scale_loss(loss)
    variables = self.model.trainable_variables
    grads = [_dense(g, v) for g, v in
             zip(tape.gradient(loss, variables), variables)]
    sums = {"loss": tf.reduce_sum(smoothed), "nll": tf.reduce_sum(nll),
            "target_tokens": tf.reduce_sum(weights),
            "source_tokens": tf.reduce_sum(
                tf.cast(batch["inputs"] != 0, tf.float32))}
    return grads, sums

  def _replica_train_step(self, batches):
    context = tf.distribute.get_replica_context()
    local_tokens = tf.add_n([tf.reduce_sum(tf.cast(b["targets"] != 0,
                                                   tf.float32))
                             for b in batches])
    denominator = tf.maximum(context.all_reduce(_SUM, local_tokens), 1.0)
    learning_rate = tf.cast(self.optimizer.learning_rate, tf.float32)
    grads = sums = None
    for batch in batches:
      if grads is not None:  # one batch at a time: bounded activation memory
        with tf.control_dependencies(grads):
          batch = tf.nest.map_structure(tf.identity, batch)
      batch_grads, batch_sums = self._micro_step(batch, denominator)
      grads = batch_grads if grads is None else [
          a + b for a, b in zip(grads, batch_grads)]
      sums = batch_sums if sums is None else _sum_dicts(sums, batch_sums)
    grads = context.all_reduce(_SUM, grads)
    grad_norm = tf.linalg.global_norm(grads)
    if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
      grad_norm /= tf.cast(self.optimizer.dynamic_scale, tf.float32)
    self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
    return sums, {"grad_norm": grad_norm, "learning_rate": learning_rate}

  def _train_step_fn(self, iterator):
    batches = tuple(next(iterator)
                    for _ in range(self.hp.gradient_accumulation_steps))
    sums, same = self.strategy.run(self._replica_train_step, args=(batches,))
    out = {k: self.strategy.reduce(_SUM, v, axis=None) for k, v in sums.items()}
    out.update({k: self.strategy.reduce(_MEAN, v, axis=None)
                for k, v in same.items()})
    return out

  # ---- evaluation ------------------------------------------------------------

  # Called from the AutoGraph-converted evaluation loop, but not converted
  # itself: the model's code needs no conversion (see __init__).
  @tf.autograph.experimental.do_not_convert
  def _eval_replica_fn(self, batch):
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
    keys = ("loss", "nll", "tokens", "correct_tokens", "sequences",
            "correct_sequences")
    totals = {k: tf.constant(0.0) for k in keys}
    for _ in tf.range(max_batches):
      optional = iterator.get_next_as_optional()
      if not optional.has_value():
        break
      per_replica = self.strategy.run(self._eval_replica_fn,
                                      args=(optional.get_value(),))
      totals = _sum_dicts(totals, {
          k: self.strategy.reduce(_SUM, per_replica[k], axis=None)
          for k in keys})
    return totals

  def evaluate(self, split=None):
    """Teacher-forced metrics of the current weights on a split.

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
    step = self.step
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
    self._summaries(EVAL_SUBDIR, step, scalars)
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
    if self._saved_step != step:
      self.save()
    if not self.chief:
      return {}
    result = self.dev_metric.score(self._saved_path)
    # On a tie the earlier step stays the best.
    improved = self.best is None or result.value > self.best["value"]
    path = best_lib.keep_best(self.config.output_dir, self._saved_path, step,
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

  # ---- checkpoints and summaries --------------------------------------------

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

  def _summaries(self, subdir, step, scalars):
    if not self.chief:
      return
    if subdir not in self._writers:
      self._writers[subdir] = tf.summary.create_file_writer(
          os.path.join(self.config.output_dir, subdir))
    with self._writers[subdir].as_default(step=step):
      for name, value in scalars.items():
        tf.summary.write(name, tf.constant(value, tf.float32),
                         metadata=_SCALAR_METADATA)
    self._writers[subdir].flush()

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
        self.strategy, self.config.output_dir, self.on_worker_lost):
      try:
        metrics = self._train_until(stop)
      except preemption.Preempted:
        # Every worker stops at the same step (any_workers): they leave
        # together, as after the last step.
        strategy_lib.leave_together(self.strategy)
        raise
      # After the chief's own last work (its summaries, metrics.jsonl).
      strategy_lib.leave_together(self.strategy)
      return metrics

  def set_train_steps(self, train_steps, cooldown_steps):
    """Fixes the run's length (a planned budget): the loop and the
    schedule's cool-down (of `cooldown_steps`) end at `train_steps`."""
    self.config = dataclasses.replace(self.config, train_steps=train_steps)
    self.hp = self.hp.replace(train_steps=train_steps)
    # The traced step reads the schedule's length: no new trace.
    set_train_steps(self.base_optimizer, train_steps, cooldown_steps)

  def _plan(self, step, clock_start, meter):
    """Plans the run's length after the measured steps (see budget.py):
    times one evaluation if the schedule evaluates, fixes train_steps and
    records the plan in run.json."""
    config = self.config
    budget_seconds = config.train_minutes * 60
    # Every worker plans from the chief's clock (strategy.chief_values), so
    # all reach the same plan, or the same error.
    elapsed, step_seconds = strategy_lib.chief_values(
        self.strategy, [time.monotonic() - clock_start, meter.step_seconds()])
    every = (config.local_eval_frequency
             if config.schedule == "train_and_evaluate" else 0)
    # Without evaluations first: a budget too short fails before anything
    # is written.
    ceiling = config.max_planned_steps
    budget.plan_train_steps(budget_seconds, elapsed, step, step_seconds,
                            self.hp.warmup_steps,
                            self.hp.learning_rate_cooldown_steps,
                            max_steps=ceiling)
    eval_seconds, metrics = 0.0, {}
    if every > 0:
      logging.info("Timing one evaluation to plan the run...")
      started = time.monotonic()
      metrics = self.evaluate()
      eval_seconds = time.monotonic() - started
    elapsed, eval_seconds = strategy_lib.chief_values(
        self.strategy, [time.monotonic() - clock_start, eval_seconds])
    total = budget.plan_train_steps(
        budget_seconds, elapsed, step, step_seconds, self.hp.warmup_steps,
        self.hp.learning_rate_cooldown_steps, every, eval_seconds,
        max_steps=ceiling)
    cooldown = budget.cooldown_steps_for(
        total, self.hp.warmup_steps, self.hp.learning_rate_cooldown_steps)
    plan = budget.Plan(train_minutes=config.train_minutes, train_steps=total,
                       planned_at_step=step, planned_after_seconds=elapsed,
                       step_seconds=step_seconds, eval_seconds=eval_seconds,
                       cooldown_steps=cooldown, max_steps=ceiling)
    self.set_train_steps(total, cooldown)
    self.config = dataclasses.replace(self.config, plan=plan)
    self.replan_log = budget.ReplanLog(total)
    if self.chief:
      run_dir.record_plan(config.output_dir, plan.to_json())
    logging.info(
        "Planned %d steps for --train_minutes=%g: %.2f steps/s measured over "
        "steps %d-%d, %.1fs an evaluation; warm-up %d, cool-down over the "
        "last %d steps%s.", total, config.train_minutes, 1 / step_seconds,
        meter.first_step, step, eval_seconds, self.hp.warmup_steps, cooldown,
        "" if cooldown == self.hp.learning_rate_cooldown_steps else
        f" (shortened from {self.hp.learning_rate_cooldown_steps} to fit)")
    fitting = budget.steps_that_fit(budget_seconds, elapsed, step,
                                    step_seconds, every, eval_seconds)
    if fitting > total:
      logging.info("The budget would hold about %d steps; the ceiling of %d "
                   "(--train_steps) ends the run early.", fitting, total)
    return metrics

  def _may_replan(self, step, start_step):
    """Whether a budgeted run may re-estimate its plan after `step`: this
    process made the plan (a resumed run's clock started later), enough
    steps were taken since, and the cool-down has not started."""
    plan, hp = self.config.plan, self.hp
    return (plan is not None and start_step < plan.planned_at_step and
            step - plan.planned_at_step >= budget.MEASURE_STEPS and
            step < self.config.train_steps and
            not budget.cooldown_started(step, self.config.train_steps,
                                        hp.warmup_steps,
                                        hp.learning_rate_cooldown_steps))

  def _replan(self, step, elapsed, eval_seconds):
    """Re-estimates the plan from the step rate since it was made
    (`budget.replanned_train_steps`); a change moves the run's end and its
    cool-down, and is recorded in run.json.

    Args:
      step: optimizer steps done.
      elapsed: seconds since training started.
      eval_seconds: seconds spent in evaluations since the plan was made.
    """
    plan, hp = self.config.plan, self.hp
    # The chief's clock, as for the plan.
    elapsed, eval_seconds = strategy_lib.chief_values(
        self.strategy, [elapsed, eval_seconds])
    step_seconds = max(elapsed - plan.planned_after_seconds - eval_seconds,
                       1e-6) / (step - plan.planned_at_step)
    every = (self.config.local_eval_frequency
             if self.config.schedule == "train_and_evaluate" else 0)
    total = budget.replanned_train_steps(
        plan.train_minutes * 60, elapsed, step, step_seconds,
        plan.train_steps, hp.warmup_steps, hp.learning_rate_cooldown_steps,
        every, plan.eval_seconds, plan.max_steps)
    if total is None:
      return
    cooldown = budget.cooldown_steps_for(total, hp.warmup_steps,
                                         hp.learning_rate_cooldown_steps)
    self.set_train_steps(total, cooldown)
    self.config = dataclasses.replace(self.config, plan=dataclasses.replace(
        plan, train_steps=total, cooldown_steps=cooldown,
        replanned_at_step=step))
    if self.chief:
      run_dir.record_plan(self.config.output_dir,
                          self.config.plan.to_json())
    logged = self.replan_log.logged  # the plan the log last showed
    if self.replan_log.replanned(total):
      logging.info(
          "Re-planned %d steps for --train_minutes=%g (was %d): %.2f "
          "steps/s since step %d; cool-down over the last %d steps.", total,
          plan.train_minutes, logged, 1 / step_seconds,
          plan.planned_at_step, cooldown)

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
        self.strategy, self.patience_exhausted())[0]:
      best = (f" (best {self.best['value']:.2f} at step "
              f"{self.best['step']})" if self.best else "")
      logging.info("Early stopping: no better dev %s in the last %d "
                   "evaluations%s; not training further.",
                   self.dev_metric.name, self.evaluations_since_best, best)
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
        metrics = self._plan(step, clock_start, meter)
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
        if self.early_stop_due:
          if self.chief:
            logging.info(
                "Early stopping at step %d: no better dev %s in %d "
                "evaluations (best %.2f at step %d, kept in %s).", step,
                self.dev_metric.name, self.evaluations_since_best,
                self.best["value"], self.best["step"],
                os.path.join(config.output_dir, best_lib.BEST_DIR))
          else:
            logging.info("Early stopping at step %d (the chief's dev "
                         "metric).", step)
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
      if step % config.log_every_steps == 0 and self._may_replan(
          step, start_step):
        self._replan(step, time.monotonic() - clock_start, eval_seconds)
        config = self.config
    if self._saved_step != step:
      self.save()
    if config.plan is not None and start_step < config.plan.planned_at_step:
      minutes = (time.monotonic() - clock_start) / 60
      (logging.info if minutes <= config.train_minutes else logging.warning)(
          "Step %d (final checkpoint) after %.1f minutes of the "
          "%g-minute budget; %s.", step, minutes, config.train_minutes,
          self.replan_log.summary(config.train_steps))
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
    self._summaries("", step, stats)
