r"""t2t-trainer: trains (and evaluates) a model on a problem.

    t2t-trainer --problem=algorithmic_reverse --hparams_set=transformer_tiny \
        --data_dir=~/t2t_data --output_dir=~/t2t_train/reverse --generate_data

Running the same command again resumes from the latest checkpoint in
output_dir with the hparams saved there; --warm_start_from=RUN starts a new
run from another run's weights (fine-tuning, transfer: docs/fine_tuning.md).
With several workers in TF_CONFIG, run the same command on each worker.

Exit codes: 0 done; 1 bad input; 75 preempted (SIGTERM or Ctrl-C: a checkpoint
was saved at the step reached); 69 a worker was lost (resume from the newest
checkpoint); 130 a second Ctrl-C. Restart on 75 and 69.
"""
import os
import shlex
import sys

from absl import flags
from absl import logging

from t2tlite import models
from t2tlite import registry
from t2tlite.bin import common_flags
from t2tlite.bin import console
from t2tlite.bin import lazy
from t2tlite.bin import precision_flags
from t2tlite.train import budget
from t2tlite.train import peer_watch

# TensorFlow loads when these are first used, after the flags are parsed.
datagen = lazy.module("t2tlite.data.datagen")
dev_metric_lib = lazy.module("t2tlite.train.dev_metric")
preemption = lazy.module("t2tlite.train.preemption")
problem_lib = lazy.module("t2tlite.problem")
run_dir = lazy.module("t2tlite.run_dir")
strategy_lib = lazy.module("t2tlite.train.strategy")
train_config = lazy.module("t2tlite.train.config")
run_hparams = lazy.module("t2tlite.train.run_hparams")
trainer_lib = lazy.module("t2tlite.train.trainer")
warm_start_lib = lazy.module("t2tlite.train.warm_start")
vocab_source = lazy.module("t2tlite.data.vocab_source")

# The peer watch's bounds past --worker_timeout_secs, for its help.
_WATCH_LAG_SECS = peer_watch.bound_secs(0)
_REFUSED_BOUND_SECS = peer_watch.refused_bound_secs(
    peer_watch.DEFAULT_WORKER_TIMEOUT_SECS)

flags.adopt_module_key_flags(common_flags)
flags.DEFINE_string("model", models.DEFAULT_MODEL, "Registered model "
                    "(plugins may add models). Recorded in run.json, so a "
                    "restart, t2t-decoder and t2t-exporter rebuild the same "
                    "one.")
flags.DEFINE_string("hparams_set", None, "Registered hparams set, e.g. "
                    "transformer_base, transformer_big, transformer_tiny. On a "
                    "restart it may be left out (the saved hparams are used).")
flags.DEFINE_string("hparams", "", "Overrides of the hparams set, "
                    "\"name=value,name=value\" (e.g. \"dropout=0.2,"
                    "gradient_accumulation_steps=8\").")
flags.DEFINE_bool("generate_data", False, "Run datagen for --problem into "
                  "--data_dir first and print its summary, as t2t-datagen "
                  "does (complete files are kept, so this is cheap when the "
                  "data exists).")
flags.DEFINE_integer("train_steps", None, "Optimizer updates to train to "
                     "(default: the hparams' train_steps). A restart with a "
                     "larger value trains further. With --train_minutes: the "
                     "most steps the budget's plan may hold (a fast machine "
                     "then ends early).", lower_bound=1)
flags.DEFINE_integer("eval_steps", 100, "Evaluation batches per replica at "
                     "most; 0 evaluates the whole dev split.", lower_bound=0)
flags.DEFINE_integer("local_eval_frequency", 1000, "Evaluate on dev every "
                     "this many steps (train_and_evaluate), and at the end; 0 "
                     "= only at the end.", lower_bound=0)
flags.DEFINE_integer("keep_checkpoint_max", 20, "Checkpoints kept; older ones "
                     "are deleted (20 lets you average the last 20, as the "
                     "paper did for big models).", lower_bound=1)
flags.DEFINE_integer("save_checkpoints_secs", 600, "Write a checkpoint at "
                     "least this often, in seconds (the paper: every 10 "
                     "minutes), and at the end.", lower_bound=0)
flags.DEFINE_integer("log_step_count_steps", 100, "Print progress and write "
                     "training summaries every this many steps (their loss "
                     "is the mean over those steps); with --train_minutes, "
                     "a progress line at most every eighth of the budget.",
                     lower_bound=1)
flags.DEFINE_enum("schedule", "train_and_evaluate",
                  ["train", "train_and_evaluate", "evaluate"],
                  "train; train_and_evaluate (evaluate on dev every "
                  "--local_eval_frequency steps and at the end); evaluate "
                  "(the latest checkpoint, once; in a new output_dir with "
                  "--warm_start_from, the parent's weights on this data).")
flags.DEFINE_integer("worker_gpu", 0, "Devices to train on: 0 = every "
                     "visible GPU (or the CPU); N = the first N GPUs "
                     "(MirroredStrategy). On a machine without GPUs, N > 1 "
                     "splits the CPU into N logical devices, to test "
                     "multi-device training (no speedup).", lower_bound=0)
flags.DEFINE_integer("worker_timeout_secs",
                     peer_watch.DEFAULT_WORKER_TIMEOUT_SECS,
                     "With several workers (TF_CONFIG): a peer that answers "
                     "no health probe for this long (frozen, cut off) is "
                     "lost, and the others exit with code 69 (within this + "
                     f"{_WATCH_LAG_SECS:g} s). A peer whose address refuses "
                     "connections (it died) is lost once it has refused for "
                     f"{peer_watch.REFUSED_GRACE_SECS:g} s (exit 69 within "
                     f"{_REFUSED_BOUND_SECS:g} s). A collective waits twice "
                     f"this + {_WATCH_LAG_SECS:g} s for a peer that answers "
                     "but does not join.", lower_bound=1)
flags.DEFINE_bool("xla", False, "Compile each replica's forward and backward "
                  "pass with XLA (jit_compile).")
precision_flags.define_compute_flag("training")
flags.declare_key_flag("mixed_precision")
flags.DEFINE_integer("random_seed", None, "Seed of the weight initialization, "
                     "dropout and data shuffling: a seeded run reads the same "
                     "batches in the same order every time.")
flags.DEFINE_bool("registry_help", False, "List the registered problems, "
                  "hparams sets and models, and exit.")
# Export: the run ends with a model TF Serving can serve.
flags.DEFINE_bool("export_saved_model", False, "When training ends, export "
                  "the newest checkpoint as a SavedModel under "
                  "OUTPUT_DIR/export/<version> (as t2t-exporter does, with "
                  "the default decode hparams).")

# The problem's own metric on dev (t2tlite.train.dev_metric).
flags.DEFINE_bool("dev_metric", True, "At every evaluation, also decode dev "
                  "with the checkpoint of that step (the problem's decode "
                  "defaults, as t2t-decoder) and score it with the problem's "
                  "metric (BLEU, bracket F1, exact match), as t2t-bleu / "
                  "t2t-parse-eval would; the best checkpoint is kept in "
                  "OUTPUT_DIR/best and every score appended to "
                  "OUTPUT_DIR/metrics.jsonl. Problems without a metric skip "
                  "it (an error when this flag is given explicitly).")
flags.DEFINE_integer("eval_decode_samples", 0, "Decode only the first N dev "
                     "lines for the dev metric; 0 = all of dev.",
                     lower_bound=0)
flags.DEFINE_string("eval_decode_hparams", "", "Overrides of the problem's "
                    "decode defaults for the dev metric (as t2t-decoder's "
                    "--decode_hparams, e.g. \"beam_size=1\").")
flags.DEFINE_integer("early_stopping_patience", 0, "Stop training after this "
                     "many evaluations without a better dev metric; 0 = "
                     "never.", lower_bound=0)
flags.DEFINE_float("train_minutes", None, "Train for this many minutes "
                   "instead of a fixed number of steps: the steps are "
                   "planned from the step rate measured over the first ones "
                   "(and one timed evaluation), so that the warm-up, the "
                   "learning-rate cool-down and the evaluations end within "
                   "the budget; until the cool-down starts the plan is "
                   "re-estimated from the rate since; it is kept in "
                   "run.json and a restart continues it. --train_steps "
                   "caps the plan.", lower_bound=0.01)
flags.DEFINE_integer("keep_best_checkpoints", 1, "How many of the best "
                     "checkpoints by the dev metric OUTPUT_DIR/best keeps "
                     "(on a tie the earlier step stays); its 'checkpoint' "
                     "file names the best, so --checkpoint_path="
                     "OUTPUT_DIR/best loads it, and t2t-avg-checkpoints "
                     "--checkpoint_path=OUTPUT_DIR/best --n=N averages the "
                     "N best.", lower_bound=1)
flags.DEFINE_bool("export_best", False, "Export OUTPUT_DIR/best as a "
                  "SavedModel (OUTPUT_DIR/export_best/<version>) each time "
                  "it improves.")

# Reuse of a trained model (t2tlite.train.warm_start).
flags.DEFINE_string("warm_start_from", None, "Start from another run's "
                    "weights: a run folder (its newest checkpoint), its best/ "
                    "(RUN/best), or a checkpoint prefix. Weights only: the "
                    "optimizer, the step and the learning-rate schedule start "
                    "anew under this run's hparams. With --generate_data the "
                    "data is encoded with the parent's vocabulary. Ignored, "
                    "with a log line, when output_dir already holds "
                    "checkpoints (the run resumes).")
flags.DEFINE_string("warm_start_variables", None, "With --warm_start_from: "
                    "read only the variables whose names match this regex "
                    "from their start (e.g. \"encoder|embedding\"); the "
                    "others keep their fresh initialisation.")
flags.DEFINE_bool("warm_start_map_vocab", False, "With --warm_start_from: "
                  "this run has a vocabulary of its own; embedding rows of "
                  "pieces both vocabularies hold come from the parent, the "
                  "others are initialised as new.")
flags.DEFINE_string("vocab_from", None, "With --generate_data: encode with "
                    "another run's vocabulary (a run folder, or a "
                    "sentencepiece .model file) instead of training one; "
                    "default with --warm_start_from: the parent's, unless "
                    "--warm_start_map_vocab.")

FLAGS = flags.FLAGS
# The flags recorded in run.json (the ones this command defines or shares).
_RECORDED_FLAGS = (
    "model", "problem", "hparams_set", "hparams", "data_dir", "output_dir",
    "generate_data", "tmp_dir", "raw_data_dir", "t2t_usr_dir", "train_steps",
    "eval_steps", "local_eval_frequency", "keep_checkpoint_max",
    "save_checkpoints_secs", "schedule", "worker_gpu", "xla",
    "mixed_precision", "random_seed", "log_step_count_steps",
    "worker_timeout_secs", "dev_metric", "eval_decode_samples",
    "eval_decode_hparams", "early_stopping_patience", "export_best",
    "keep_best_checkpoints", "train_minutes", "warm_start_from",
    "warm_start_variables", "warm_start_map_vocab", "vocab_from")
_PATH_FLAGS = ("output_dir", "data_dir", "tmp_dir", "raw_data_dir",
               "t2t_usr_dir", "warm_start_from", "vocab_from")


def registry_help():
  lines = []
  for title, reg in (("Problems (each also as NAME_rev)", registry.problems),
                     ("Hparams sets", registry.hparams_sets),
                     ("Models", registry.models)):
    lines.append(f"{title}:")
    lines.extend(f"  {name}" for name in reg.names() or ["(none)"])
  return "\n".join(lines)


def _saved_run(output_dir):
  """run.json of an existing run in output_dir, or {}."""
  try:
    info = run_dir.read_run_info(output_dir)
  except FileNotFoundError:
    return {}
  return {**info.flags, "problem": info.problem, "model": info.model}


def _resolve_setup(output_dir):
  """(problem, model name, hparams, data_dir, the saved run's flags or {}),
  from the flags and any saved run."""
  saved = _saved_run(output_dir)
  if saved.get("t2t_usr_dir") and not FLAGS.t2t_usr_dir:
    registry.import_usr_dir(saved["t2t_usr_dir"])  # a restart's plugins
  problem_name = FLAGS.problem or saved.get("problem")
  data_dir = FLAGS.data_dir or saved.get("data_dir")
  if not problem_name or not data_dir:
    raise console.CommandError(
        "--problem and --data_dir are required (a restart may leave them "
        "out: they are read from run.json).")
  if saved and problem_name != saved["problem"]:
    raise console.CommandError(
        f"{output_dir} holds a run of --problem={saved['problem']}, not "
        f"{problem_name}; use another --output_dir.")
  common_flags.check_data_dir(data_dir)
  model = saved.get("model", FLAGS.model)
  if FLAGS["model"].present and saved and FLAGS.model != model:
    raise console.CommandError(
        f"{output_dir} holds a run of --model={model}, not {FLAGS.model}; "
        "use another --output_dir.")
  registry.models.get(model)  # an unknown name fails with close matches
  problem = problem_lib.get_problem(problem_name)
  try:
    hp = run_hparams.resolve_hparams(output_dir, FLAGS.hparams_set,
                                     FLAGS.hparams, FLAGS.train_steps)
  except run_hparams.HParamsConflictError:
    raise
  except (ValueError, TypeError) as error:
    raise console.CommandError(str(error)) from None
  return problem, model, hp, data_dir, saved


def _longest_train_example(problem, data_dir, hp):
  """Tokens of the longest training example the model sees (EOS included;
  longer ones are dropped), from the datagen statistics."""
  lengths = problem.split_stats(data_dir, "train")["lengths"]
  return max((int(k) for k in lengths if int(k) <= hp.max_length),
             default=None)


def _check_evaluation(problem, data_dir):
  """Fails fast (one line) when the schedule evaluates and dev is missing,
  or when a dev metric is asked for and the problem has none."""
  if FLAGS.schedule == "train":
    if FLAGS.early_stopping_patience:
      raise console.CommandError(
          "--early_stopping_patience needs --schedule=train_and_evaluate "
          "(it counts evaluations).")
    return
  try:
    problem.shard_files(data_dir, "dev")
  except problem_lib.DataError as error:
    raise console.CommandError(
        f"--schedule={FLAGS.schedule} evaluates on dev, but {error}") from None
  wants_metric = (FLAGS["dev_metric"].present and FLAGS.dev_metric) or (
      FLAGS.early_stopping_patience > 0) or FLAGS.export_best or (
          FLAGS.keep_best_checkpoints > 1)
  if wants_metric:
    if not FLAGS.dev_metric:
      raise console.CommandError(
          "--early_stopping_patience, --export_best and "
          "--keep_best_checkpoints need --dev_metric.")
    try:
      dev_metric_lib.check_metric(problem)
    except dev_metric_lib.MetricError as error:
      raise console.CommandError(str(error)) from None


def _budget(output_dir, saved_flags):
  """(train_minutes, its ceiling on the steps or 0, the saved budget.Plan or
  None) of the run: a restart continues the plan in run.json (or plans it,
  with the first start's flags, if that ended before planning)."""
  saved = run_dir.read_plan(output_dir)
  if saved is None:
    if FLAGS.train_minutes:
      minutes, ceiling = FLAGS.train_minutes, FLAGS.train_steps
    elif FLAGS.train_steps:  # a run by steps
      minutes, ceiling = None, None
    else:
      minutes = saved_flags.get("train_minutes")
      ceiling = saved_flags.get("train_steps")
    if minutes:
      try:
        budget.check_budget(minutes)
      except budget.BudgetError as error:
        raise console.CommandError(str(error)) from None
    return minutes or 0.0, ceiling or 0, None
  plan = budget.Plan.from_json(saved)
  if FLAGS.train_minutes and FLAGS.train_minutes != plan.train_minutes:
    raise console.CommandError(
        f"{output_dir} holds a run planned for --train_minutes="
        f"{plan.train_minutes:g} ({plan.train_steps} steps); a restart "
        "continues that plan: leave out --train_minutes, or use another "
        "--output_dir.")
  if FLAGS.train_steps:
    raise console.CommandError(
        f"{output_dir} holds a run planned for --train_minutes="
        f"{plan.train_minutes:g} ({plan.train_steps} steps); --train_steps "
        "cannot change it.")
  logging.info("Continuing the plan of run.json: %d steps (--train_minutes=%g"
               ").", plan.train_steps, plan.train_minutes)
  return plan.train_minutes, plan.max_steps, plan


def _warm_start_parent(output_dir):
  """The `warm_start.Parent` of --warm_start_from, or None: not asked for,
  or output_dir holds checkpoints already (the run resumes; said in the
  log)."""
  if not FLAGS.warm_start_from:
    if FLAGS.warm_start_variables or FLAGS.warm_start_map_vocab:
      raise console.CommandError(
          "--warm_start_variables and --warm_start_map_vocab need "
          "--warm_start_from.")
    return None
  held = run_dir.checkpoints_newest_first(output_dir)
  if held:
    logging.info("The warm start from %s is not applied: %s holds "
                 "checkpoints (%s), and the run resumes from them.",
                 FLAGS.warm_start_from, output_dir, os.path.basename(held[0]))
    return None
  try:
    return warm_start_lib.parent_of(FLAGS.warm_start_from,
                                    FLAGS.warm_start_variables,
                                    FLAGS.warm_start_map_vocab)
  except warm_start_lib.WarmStartError as error:
    raise console.CommandError(f"--{error}") from None


def _vocab_from(parent):
  """What datagen encodes with: --vocab_from, else a warm start's parent
  (without --warm_start_map_vocab), else None (its own vocabulary)."""
  if FLAGS.vocab_from or parent is None or parent.map_vocab:
    return FLAGS.vocab_from
  if parent.run_folder is None:
    logging.warning("--warm_start_from=%s is in no run folder, so its "
                    "vocabulary is unknown: the data keeps its own.",
                    parent.checkpoint)
  return parent.run_folder


def _prepare_warm_start(parent, problem, data_dir, hp, model, vocab_size,
                        target_vocab_size, word_pointer):
  """Reads and checks the parent's weights against a model built as this
  run's, before the run writes anything (`warm_start.prepare`)."""
  run_vocab = vocab_source.VocabSource(
      inputs=problem.vocab_file(data_dir),
      targets=(None if target_vocab_size is None else
               problem.vocab_file(data_dir, "targets")))
  check_model = models.build_model(hp, vocab_size, model=model,
                                   target_vocab_size=target_vocab_size,
                                   word_pointer=word_pointer)
  try:
    return warm_start_lib.prepare(parent, check_model, run_vocab)
  except warm_start_lib.WarmStartError as error:
    raise console.CommandError(f"--{error}") from None


def _make_dev_metric(problem, output_dir, data_dir, choice):
  """The DevMetric of the run, or None (no metric, or not asked for). Every
  worker of a cluster makes it (and so checks the dev text); the chief
  decodes."""
  if (FLAGS.schedule == "train" or not FLAGS.dev_metric or
      not problem.metric):
    if FLAGS.schedule != "train" and FLAGS.dev_metric and not problem.metric:
      logging.info("Problem %s declares no dev metric: evaluations are "
                   "teacher-forced only.", problem.name)
    return None
  try:
    return dev_metric_lib.DevMetric(
        problem, output_dir, data_dir, samples=FLAGS.eval_decode_samples,
        decode_hparams=FLAGS.eval_decode_hparams,
        dtype=choice.keras_policy)
  except dev_metric_lib.MetricError as error:
    raise console.CommandError(str(error)) from None


def _train(output_dir):
  # Names, hparams and data_dir are checked before the strategy starts and
  # the data is read (fast failures).
  problem, model, hp, data_dir, saved = _resolve_setup(output_dir)
  train_minutes, max_planned_steps, plan = _budget(output_dir, saved)
  parent = _warm_start_parent(output_dir)
  # The strategy first: auto's check runs TensorFlow ops, and the
  # multi-worker runtime must be configured before the first op.
  strategy = strategy_lib.make_strategy(
      FLAGS.worker_gpu, worker_timeout_secs=FLAGS.worker_timeout_secs)
  choice = precision_flags.chosen("Training")
  chief = strategy_lib.is_chief(strategy)
  if FLAGS.random_seed is not None:
    import keras
    keras.utils.set_random_seed(FLAGS.random_seed)
  if FLAGS.generate_data:
    if chief:  # t2t-datagen's summary: what the run will train on
      print(datagen.format_summary(problem.generate_data(
          data_dir, FLAGS.tmp_dir, raw_data_dir=FLAGS.raw_data_dir,
          vocab_from=_vocab_from(parent))), flush=True)
    else:
      logging.info("Waiting for the chief to generate the data in %s...",
                   data_dir)
    with preemption.reporting_lost_workers(strategy, output_dir,
                                           _exit_worker_lost):
      strategy_lib.wait_for_all_workers(strategy)  # others wait for the data
  _check_evaluation(problem, data_dir)
  vocab = problem.vocabulary(data_dir)
  # None: the targets share the input vocabulary (one embedding matrix).
  target_vocab = (vocab if problem.shares_vocabulary else
                  problem.vocabulary(data_dir, "targets"))
  target_vocab_size = (None if problem.shares_vocabulary else
                       target_vocab.size)
  try:
    word_pointer = models.word_pointer_tables(hp, problem, vocab, target_vocab)
  except ValueError as e:
    raise console.CommandError(str(e)) from None
  warm_start = parent and _prepare_warm_start(
      parent, problem, data_dir, hp, model, vocab.size, target_vocab_size,
      word_pointer)
  if chief:
    recorded = {name: FLAGS[name].value for name in _RECORDED_FLAGS}
    # What a restart without --problem/--data_dir/--hparams_set falls back on.
    # Absolute, so that the decoder and exporter load it from anywhere.
    recorded["t2t_usr_dir"] = (os.path.abspath(FLAGS.t2t_usr_dir)
                               if FLAGS.t2t_usr_dir else
                               saved.get("t2t_usr_dir"))
    recorded.update(model=model, problem=problem.name, data_dir=data_dir,
                    output_dir=output_dir,
                    hparams_set=FLAGS.hparams_set or saved.get("hparams_set"),
                    precision=choice.to_json(),
                    train_minutes=train_minutes or None,
                    # A budget's ceiling, kept for a restart before planning.
                    train_steps=FLAGS.train_steps or max_planned_steps or None)
    run_dir.write_run_info(
        output_dir, hp, problem.name, vocab.size, problem.vocab_file(data_dir),
        flags=recorded, model=model,
        longest_train_example=_longest_train_example(problem, data_dir, hp),
        target_vocab_size=target_vocab_size,
        target_vocab_source=(None if target_vocab_size is None else
                             problem.vocab_file(data_dir, "targets")),
        parent=warm_start.parent.to_json() if warm_start else None,
        target_languages=problem.target_languages)
  config = train_config.TrainConfig(
      output_dir=output_dir, train_steps=hp.train_steps,
      schedule=FLAGS.schedule, eval_steps=FLAGS.eval_steps,
      local_eval_frequency=FLAGS.local_eval_frequency,
      save_checkpoints_secs=FLAGS.save_checkpoints_secs,
      keep_checkpoint_max=FLAGS.keep_checkpoint_max, xla=FLAGS.xla,
      mixed_precision=choice.precision,
      log_every_steps=FLAGS.log_step_count_steps, model=model,
      early_stopping_patience=FLAGS.early_stopping_patience,
      keep_best_checkpoints=FLAGS.keep_best_checkpoints,
      train_minutes=train_minutes, max_planned_steps=max_planned_steps,
      plan=plan)
  dev_metric = _make_dev_metric(problem, output_dir, data_dir, choice)

  def make_dataset(split, training):
    return problem.distributed_dataset(strategy, data_dir, split, hp, training,
                                       seed=FLAGS.random_seed)

  trainer = trainer_lib.Trainer(hp, config, strategy, vocab.size, make_dataset,
                                target_vocab_size=target_vocab_size,
                                word_pointer=word_pointer,
                                on_worker_lost=_exit_worker_lost,
                                dev_metric=dev_metric,
                                on_best=_export_best if FLAGS.export_best
                                else None, warm_start=warm_start)
  if FLAGS.schedule == "evaluate":
    # With a warm start: the parent's weights on this run's data, at step 0
    # (what fine-tuning starts from).
    if not trainer.restored_from and not trainer.warm_started:
      raise console.CommandError(
          f"--schedule=evaluate: no checkpoint in {output_dir} (name another "
          "run's with --warm_start_from to evaluate it on this data).")
    with preemption.reporting_lost_workers(strategy, output_dir,
                                           _exit_worker_lost) as peer_left:
      trainer.evaluate()
      strategy_lib.leave_together(strategy, peer_left)
  else:
    # The last evaluation's figures are its log lines (and
    # eval_results.json, metrics.jsonl), printed once.
    trainer.train()
  if trainer.stopped_early is not None and chief:
    print(f"stopped early at step {trainer.stopped_early}: no better dev "
          f"{dev_metric.name} in {FLAGS.early_stopping_patience} evaluations")
  if FLAGS.export_saved_model and chief:
    _export_saved_model(output_dir)


def _export_best(checkpoint_prefix):
  """--export_best: exports the new best checkpoint."""
  from t2tlite.export.exporter import export_saved_model
  output_dir = os.path.dirname(os.path.dirname(checkpoint_prefix))
  path = export_saved_model(output_dir,
                            export_dir=os.path.join(output_dir, "export_best"),
                            checkpoint_path=checkpoint_prefix)
  logging.info("Exported the best checkpoint as %s", path)


def _export_saved_model(output_dir):
  """--export_saved_model, after training."""
  from t2tlite.export.exporter import export_saved_model
  path = export_saved_model(output_dir)
  logging.info("Exported the SavedModel %s", path)
  print(f"exported {path}")


def _run():
  if not FLAGS["verbosity"].present:
    logging.set_verbosity(logging.INFO)
  common_flags.load_plugins()
  if FLAGS.registry_help:
    print(registry_help())
    return
  try:
    _train(FLAGS.output_dir)
  except preemption.Preempted as stopped:
    sys.stderr.write(f"t2t-trainer: {stopped}\n")
    return preemption.PREEMPTED_EXIT_CODE
  return 0


def _exit_worker_lost(lost):
  """Says which worker was lost and how to resume, then exits 69 at once.

  Called from the thread that found the loss: the peer watch's while the
  main thread may still wait on a collective, which would otherwise end in
  TensorFlow's abort of the pending collectives. A normal exit would wait for
  the lost peer at the runtime's shutdown barrier; nothing is left to write.
  """
  command = shlex.join(["t2t-trainer"] + sys.argv[1:])
  if lost.tf_error is not None:
    logging.debug("TensorFlow's error: %s", lost.tf_error)
  sys.stderr.write(f"t2t-trainer: error: {lost}\nResume with, on every "
                   f"worker:\n  {command}\n(--verbosity=1 shows "
                   "TensorFlow's error, if a collective failed.)\n")
  sys.stderr.flush()
  logging.flush()
  os._exit(preemption.WORKER_LOST_EXIT_CODE)


def main():
  console.run(_run, __name__, path_flags=_PATH_FLAGS,
              required=["output_dir"], info_flags=["registry_help"],
              renamed={"overrides": "hparams"},
              errors=lambda: (console.CommandError, registry.RegistryError,
                              problem_lib.DataError, FileNotFoundError,
                              run_hparams.HParamsConflictError,
                              trainer_lib.NonFiniteLossError,
                              dev_metric_lib.MetricError, budget.BudgetError,
                              warm_start_lib.WarmStartError,
                              run_dir.DamagedCheckpointError))


if __name__ == "__main__":
  main()
