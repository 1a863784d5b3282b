"""The trainer: hparams on restart, NaN stop, mixed precision and XLA,
evaluation metrics and summaries, and the t2t-trainer command line."""
import collections
import json
import math
import os
import re
import pathlib
import shutil
import types

from absl.testing import flagsaver
import keras
import numpy as np
import pytest
import tensorflow as tf

import t2tlite
from t2tlite import problem as problem_lib
from t2tlite import registry, run_dir
from t2tlite.bin import console
from t2tlite.models.transformer import Transformer
from t2tlite.train import run_hparams
from t2tlite.train import strategy as strategy_lib
from t2tlite.train import trainer as trainer_lib
from t2tlite.train.config import TrainConfig
from t2tlite.train.evaluation import EVAL_RESULTS_FILE
from checkpoint_state import write_checkpoint_state
import command_flags
import train_helpers

# Every flag t2t-trainer documents (tensor2tensor's names).
TRAINER_FLAGS = (
    "model", "problem", "hparams_set", "hparams", "data_dir", "output_dir",
    "generate_data", "tmp_dir", "raw_data_dir", "t2t_usr_dir", "train_steps",
    "eval_steps", "local_eval_frequency", "keep_checkpoint_max",
    "save_checkpoints_secs", "schedule", "worker_gpu", "xla",
    "mixed_precision", "random_seed", "registry_help", "log_step_count_steps")


@pytest.fixture(scope="module")
def strategy():
  return strategy_lib.make_strategy(0, tf_config="")


def _write_hparams(output_dir, hp):
  os.makedirs(output_dir, exist_ok=True)
  with open(os.path.join(output_dir, run_dir.HPARAMS_FILE), "w") as f:
    f.write(hp.to_json())


def test_resolve_hparams_new_run_and_restart(tmp_path):
  output_dir = str(tmp_path)
  hp = run_hparams.resolve_hparams(output_dir, "transformer_tiny",
                                   "dropout=0.2,d_ff=100", train_steps=7)
  assert hp.dropout == 0.2 and hp.train_steps == 7
  _write_hparams(output_dir, hp)
  # The same request, or none, continues with the saved hparams; train_steps
  # may grow.
  assert run_hparams.resolve_hparams(output_dir, "transformer_tiny",
                                     "dropout=0.2,d_ff=100") == hp
  assert run_hparams.resolve_hparams(output_dir, None, "",
                                     train_steps=20) == hp.replace(
                                         train_steps=20)
  with pytest.raises(run_hparams.HParamsConflictError) as error:
    run_hparams.resolve_hparams(output_dir, "transformer_tiny", "d_ff=100")
  default = t2tlite.create_hparams("transformer_tiny").dropout
  assert f"dropout: saved 0.2, requested {default}" in str(error.value)
  assert "use another output_dir" in str(error.value)
  # Overrides alone apply to the saved hparams.
  assert run_hparams.resolve_hparams(output_dir, None, "d_ff=100") == hp
  with pytest.raises(run_hparams.HParamsConflictError,
                     match="d_ff: saved 100, requested 64") as error:
    run_hparams.resolve_hparams(output_dir, None, "d_ff=64")
  assert "hparams_set=(the saved one)" in str(error.value)
  with pytest.raises(ValueError, match="hparams_set is required"):
    run_hparams.resolve_hparams(str(tmp_path / "new"), None, "")


def test_nan_loss_stops_without_saving_the_bad_state(tmp_path, strategy,
                                                    float32_run):
  output_dir = _copy_of_run(float32_run, tmp_path)
  assert train_helpers.latest_step(output_dir) == 3
  # An absurd learning rate makes the weights, then the loss, overflow.
  trainer = train_helpers.tiny_trainer(
      output_dir, strategy, "learning_rate_scale=1e30", train_steps=50,
      save_checkpoints_secs=0)
  assert trainer.step == 3
  with pytest.raises(trainer_lib.NonFiniteLossError) as error:
    trainer.train()
  message = str(error.value)
  assert "Stopping without saving" in message and "is intact" in message
  bad_step = int(message.split(":")[0].split()[-1])
  last_saved = train_helpers.latest_step(output_dir)
  assert 3 <= last_saved < bad_step
  reader = tf.train.load_checkpoint(os.path.join(output_dir,
                                                 f"ckpt-{last_saved}"))
  for name in reader.get_variable_to_shape_map():
    if name.startswith("model/"):
      assert np.all(np.isfinite(reader.get_tensor(name))), name


def _weights(trainer):
  return [w.numpy().copy() for w in trainer.model.weights]


def _distance(weights, others):
  """The L2 distance between two lists of arrays, taken as one vector."""
  return math.sqrt(sum(float(np.sum((a - b) ** 2))
                       for a, b in zip(weights, others, strict=True)))


Float32Run = collections.namedtuple("Float32Run",
                                    "initial trained losses folder")


@pytest.fixture(scope="module")
def float32_run(tmp_path_factory, strategy):
  """The tiny model trained 3 steps in float32 without XLA, the reference
  of the other modes: its initial and trained weights, {step: loss}, and
  its folder (read it; `_copy_of_run` to resume it)."""
  output_dir = str(tmp_path_factory.mktemp("float32"))
  # No evaluation: the tests read the training losses and weights.
  trainer = train_helpers.tiny_trainer(output_dir, strategy, train_steps=3,
                                       mixed_precision="float32",
                                       schedule="train")
  initial = _weights(trainer)
  trainer.train()
  return Float32Run(initial, _weights(trainer),
                    train_helpers.read_scalars(output_dir)["loss"],
                    output_dir)


def _copy_of_run(float32_run, tmp_path):
  """A copy of the float32 run's folder (its checkpoint at step 3), for a
  test that resumes it."""
  output_dir = str(tmp_path / "run")
  shutil.copytree(float32_run.folder, output_dir)
  return output_dir


@pytest.fixture(scope="module")
def mode_runs(tmp_path_factory, strategy):
  """mode_runs(mixed_precision, xla): the tiny model trained 3 steps as
  float32_run is, in that mode, once per module: (its Trainer, its weights
  before training, its folder). The float16 run's checkpoint is resumed in
  float32 by test_a_run_resumed_before_its_plan_continues_the_plan."""
  runs = {}

  def run(mixed_precision, xla):
    if (mixed_precision, xla) not in runs:
      output_dir = str(tmp_path_factory.mktemp(mixed_precision or "xla"))
      trainer = train_helpers.tiny_trainer(
          output_dir, strategy, train_steps=3,
          mixed_precision=mixed_precision, xla=xla, schedule="train")
      initial = _weights(trainer)
      trainer.train()
      runs[mixed_precision, xla] = (trainer, initial, output_dir)
    return runs[mixed_precision, xla]

  return run


# The same 3 steps from the same weights on the same batches as float32
# (tolerances of about 3x the gaps measured on a Xeon with avx512_bf16):
# each step's loss within LOSS_RTOL of float32's, and the weights where
# float32's took them, within UPDATE_RTOL of the distance they moved (which
# a mode that skipped or misscaled its updates would not be). bfloat16 keeps
# 8 bits of mantissa (losses 1e-4 apart, weights 6% of the update), float16
# 11 (1e-4, 4%); XLA computes in float32 (1e-7, 1e-6).
@pytest.mark.parametrize("mixed_precision,xla,loss_rtol,update_rtol", [
    ("bfloat16", False, 1e-3, 0.15), ("float16", False, 1e-3, 0.15),
    (None, True, 1e-5, 1e-4)])
def test_mixed_precision_and_xla_train_as_float32_does(
    float32_run, mode_runs, mixed_precision, xla, loss_rtol, update_rtol):
  initial, trained, float32_losses, _ = float32_run
  trainer, mode_initial, output_dir = mode_runs(mixed_precision, xla)
  if mixed_precision:
    assert trainer.model.dtype_policy.compute_dtype == mixed_precision
    assert all(w.dtype == "float32" for w in trainer.model.weights)
  assert _distance(mode_initial, initial) == 0.0
  losses = train_helpers.read_scalars(output_dir)["loss"]
  assert sorted(losses) == [1, 2, 3]
  for step, loss in float32_losses.items():
    assert losses[step] == pytest.approx(loss, rel=loss_rtol), step
  moved = _distance(trained, initial)
  assert moved > 0
  assert _distance(_weights(trainer), trained) <= update_rtol * moved
  if mixed_precision == "float16":
    assert isinstance(trainer.optimizer,
                      keras.optimizers.LossScaleOptimizer)


def test_evaluation_metrics_and_summaries(tmp_path, strategy):
  output_dir = str(tmp_path)
  # Evaluations every 2 steps, and at the last (5) with the last summaries.
  trainer = train_helpers.tiny_trainer(output_dir, strategy, train_steps=5,
                                       local_eval_frequency=2, eval_steps=3,
                                       log_every_steps=2)
  metrics = trainer.train()
  assert metrics["step"] == 5 and metrics["sequences"] == 3 * 8
  assert 0.0 <= metrics["sequence_accuracy"] <= metrics["accuracy"] <= 1.0
  assert metrics["perplexity"] == pytest.approx(math.exp(metrics["nll"]))
  assert metrics["loss"] > metrics["nll"] * 0.9
  with open(os.path.join(output_dir, EVAL_RESULTS_FILE)) as f:
    assert json.load(f) == metrics
  train = train_helpers.read_scalars(output_dir)
  assert set(train) == {"loss", "nll", "learning_rate", "grad_norm",
                        "steps_per_sec", "tokens_per_sec"}
  assert sorted(train["loss"]) == [2, 4, 5]
  evaluation = train_helpers.read_scalars(os.path.join(output_dir, "eval"))
  assert set(evaluation) == {"loss", "nll", "accuracy", "sequence_accuracy"}
  assert sorted(evaluation["loss"]) == [2, 4, 5]
  # eval_steps batches of the endless set at each evaluation.
  assert trainer.evaluate()["sequences"] == 3 * 8


@pytest.mark.parametrize("field, message", [
    (dict(keep_best_checkpoints=0),
     "keep_best_checkpoints must be positive, got 0"),
    (dict(early_stopping_patience=-1),
     "early_stopping_patience must be >= 0, got -1"),
    (dict(schedule="train_evaluate"),
     "schedule='train_evaluate': expected one of train, "
     "train_and_evaluate, evaluate"),
])
def test_config_refuses_a_field_out_of_its_range(tmp_path, field, message):
  with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
    TrainConfig(output_dir=str(tmp_path), train_steps=1, **field)
  # The bound itself passes.
  if "early_stopping_patience" in field:
    TrainConfig(output_dir=str(tmp_path), train_steps=1,
                early_stopping_patience=0)


def test_eval_steps_0_evaluates_the_whole_split(tmp_path, strategy):
  # The evaluation loop ends with a finite dataset (5 batches of 8 rows).
  trainer = train_helpers.tiny_trainer(str(tmp_path), strategy, batches=5,
                                       eval_steps=0)
  metrics = trainer.evaluate()
  assert (metrics["step"], metrics["sequences"]) == (0, 5 * 8)


def test_sequence_accuracy_counts_fully_correct_rows(strategy, tmp_path):
  trainer = train_helpers.tiny_trainer(str(tmp_path), strategy)
  targets = tf.constant([[5, 6, 1, 0], [7, 8, 9, 1], [0, 0, 0, 0]])
  # Logits favouring the targets everywhere except row 1, position 2.
  predicted = targets.numpy().copy()
  predicted[1, 2] = 4
  logits = tf.one_hot(predicted, train_helpers.SYNTHETIC_VOCAB) * 10.0

  class Fixed:
    def __call__(self, batch, training):
      return logits

  trainer.evaluator.model = Fixed()
  sums = trainer.evaluator._eval_replica_fn({"inputs": targets,
                                             "targets": targets})
  assert float(sums["tokens"]) == 7 and float(sums["correct_tokens"]) == 6
  assert float(sums["sequences"]) == 2
  assert float(sums["correct_sequences"]) == 1


def test_trainer_builds_the_registered_model(tmp_path, strategy,
                                             monkeypatch):
  class PluginModel(Transformer):
    pass

  models = registry.Registry("model")
  models.add("plugin_model", PluginModel)
  monkeypatch.setattr(registry, "models", models)
  trainer = train_helpers.tiny_trainer(str(tmp_path), strategy,
                                       model="plugin_model")
  assert type(trainer.model) is PluginModel


@pytest.fixture(scope="module")
def command_line_runs(tmp_path_factory):
  """Outputs of several quick t2t-trainer invocations, run in parallel."""
  folder = tmp_path_factory.mktemp("cli")
  trainer = train_helpers.console_script("t2t-trainer")
  common = [f"--data_dir={folder}/data", f"--output_dir={folder}/train"]
  runs = {
      "help": [trainer, "--help"],
      "registry": [trainer, "--registry_help"],
      "bad_flag": [trainer, "--problem=algorithmic_reverse",
                   "--hparams_set=transformer_tiny", "--train_stepz=3"] +
                  common,
      "bad_problem": [trainer, "--problem=algorithmic_revers",
                      "--hparams_set=transformer_tiny"] + common,
      "bad_hparams_set": [trainer, "--problem=algorithmic_reverse",
                          "--hparams_set=transformer_tinny"] + common,
  }
  outputs = {}
  with train_helpers.processes() as started:
    for name, args in runs.items():
      started.append(train_helpers.start(args, folder / f"{name}.txt"))
    for name, proc in zip(runs, started):
      proc.wait(timeout=150)
      outputs[name] = (proc.returncode, (folder / f"{name}.txt").read_text())
  return outputs


@pytest.mark.timeout(200)
def test_help_documents_every_flag(command_line_runs):
  code, output = command_line_runs["help"]
  assert code == 0
  for flag in TRAINER_FLAGS:
    assert f"--{flag}:" in output or f"--[no]{flag}:" in output, flag
  assert "--problem=algorithmic_reverse --hparams_set=transformer_tiny \\" in (
      output)


@pytest.mark.timeout(200)
def test_registry_help_lists_problems_and_hparams_sets(command_line_runs):
  code, output = command_line_runs["registry"]
  assert code == 0, output[-3000:]
  assert "  algorithmic_reverse" in output and "  transformer_big" in output
  assert "Models:\n  transformer\n" in output


# (A misspelled hparam fails as a misspelled hparams set does, through
# resolve_hparams: its message is checked in test_hparams.py.)
@pytest.mark.timeout(200)
@pytest.mark.parametrize("run,expected", [
    ("bad_flag", "Unknown command line flag 'train_stepz'"),
    ("bad_problem", "Unknown problem 'algorithmic_revers'. Did you mean: "
                    "algorithmic_reverse"),
    ("bad_hparams_set", "Unknown hparams set 'transformer_tinny'. Did you "
                        "mean: transformer_tiny"),
])
def test_misspelled_names_fail_at_once(command_line_runs, run, expected):
  code, output = command_line_runs[run]
  assert code != 0
  assert expected in output, output[-3000:]
  assert "Training to step" not in output


# A 9-second budget, spent by design.
def test_a_budget_is_replanned_before_its_cooldown(tmp_path, strategy,
                                                   monkeypatch):
  # Any re-estimate that differs replaces the plan here: the rate of the
  # steps timed for the plan differs from the later one.
  # A budget of 9 s with a reserve of 1 s holds hundreds of tiny steps;
  # a re-plan may come at every 10th step (the log's) from 20 steps after
  # the plan to the cool-down's 10 last steps, so even a loaded machine's
  # 70 steps leave it chances.
  from t2tlite.train import budget
  monkeypatch.setattr(budget, "REPLAN_MIN_CHANGE", 0.0)
  monkeypatch.setattr(budget, "RESERVE_SECONDS", 1.0)
  output_dir = str(tmp_path)
  (tmp_path / "run.json").write_text("{}")  # the commands write it first
  trainer = train_helpers.tiny_trainer(
      output_dir, strategy, "warmup_steps=10,learning_rate_cooldown_steps=10",
      schedule="train", train_minutes=0.15, log_every_steps=10)
  train_step = trainer._train_step
  trainer.train()
  plan = trainer.config.plan
  assert plan.replanned_at_step > plan.planned_at_step
  # The plan and its re-plans moved the cool-down without tracing the
  # training step again.
  assert trainer._train_step is train_step
  assert train_step.experimental_get_tracing_count() == 1
  assert json.loads((tmp_path / "run.json").read_text())["plan"] == (
      plan.to_json())
  assert trainer.step == plan.train_steps
  rates = train_helpers.read_scalars(output_dir)["learning_rate"]
  hp = trainer.hp
  def noam(step):
    return hp.learning_rate_scale * hp.d_model**-0.5 * min(
        step**-0.5, step * hp.warmup_steps**-1.5)
  # The steps before the last re-plan kept the uncooled rate; the schedule
  # ended with the plan's cool-down.
  for step, rate in rates.items():
    if step <= plan.replanned_at_step:
      assert rate == pytest.approx(noam(step), rel=1e-3), step
  assert rates[plan.train_steps] == pytest.approx(
      noam(plan.train_steps) / plan.cooldown_steps, rel=1e-3)


def test_a_ceiling_ends_a_budgeted_run_of_a_fast_machine(tmp_path, strategy,
                                                         monkeypatch, caplog):
  # The plan after 20 timed steps; a five-minute budget holds hundreds of
  # tiny steps on any CPU, even one the other worker loads (half a minute
  # may not), the ceiling 50.
  from t2tlite.train import budget
  monkeypatch.setattr(budget, "MAX_MEASURE_SECONDS", 0.0)
  caplog.set_level("INFO", logger="absl")
  output_dir = str(tmp_path)
  (tmp_path / "run.json").write_text("{}")
  budget_minutes = 5.0
  trainer = train_helpers.tiny_trainer(
      output_dir, strategy, "warmup_steps=10,learning_rate_cooldown_steps=30",
      schedule="train", train_minutes=budget_minutes, max_planned_steps=50,
      log_every_steps=10)
  trainer.train()
  plan = trainer.config.plan
  assert (plan.train_steps, plan.max_steps, trainer.step) == (50, 50, 50)
  assert budget.steps_that_fit(budget_minutes * 60, plan.planned_after_seconds,
                               plan.planned_at_step, plan.step_seconds) > 50
  assert json.loads((tmp_path / "run.json").read_text())["plan"] == (
      plan.to_json())
  # The schedule's whole cool-down, ending at the ceiling.
  hp = trainer.hp
  rates = train_helpers.read_scalars(output_dir)["learning_rate"]
  top = hp.learning_rate_scale * hp.d_model**-0.5 * 50**-0.5
  assert rates[50] == pytest.approx(top / 30, rel=1e-3)
  # Progress lines are paced over the five minutes (these few seconds show
  # one of the steps logged before the last); the last step's always shows.
  assert any(record.getMessage().startswith("step 50/50 ")
             for record in caplog.records)


def test_a_run_resumed_before_its_plan_continues_the_plan(tmp_path, strategy,
                                                         mode_runs):
  # A checkpoint older than the plan in run.json (a process preempted while
  # timing its steps, the next one planned and was lost before saving): the
  # resumed run trains to the plan's end, neither re-planning (its clock is
  # not the planning process's) nor summarising a plan it did not make.
  # The checkpoint is the float16 run's: it resumes in float32 (the base
  # optimizer is checkpointed, whatever the loss scaling).
  from t2tlite.train import budget
  output_dir = str(tmp_path / "run")
  shutil.copytree(mode_runs("float16", False)[2], output_dir)
  run_json = pathlib.Path(output_dir) / "run.json"
  run_json.write_text("{}")
  plan = budget.Plan(train_minutes=1.0, train_steps=40, planned_at_step=8,
                     planned_after_seconds=10.0, step_seconds=0.1,
                     eval_seconds=0.0, cooldown_steps=10)
  run_dir.record_plan(output_dir, plan.to_json())
  trainer = train_helpers.tiny_trainer(
      output_dir, strategy, "warmup_steps=10,learning_rate_cooldown_steps=10",
      schedule="train", train_minutes=1.0, plan=plan)
  assert trainer.step == 3
  trainer.train()
  assert trainer.step == 40
  assert train_helpers.latest_step(output_dir) == 40
  assert trainer.config.plan == plan
  assert json.loads(run_json.read_text())["plan"] == plan.to_json()


@pytest.fixture
def trainer_command():
  """The t2t-trainer module imported in this process, its flags at their
  defaults (a test sets them with flagsaver)."""
  with command_flags.command_module("t2tlite.bin.t2t_trainer") as module:
    yield module


def test_data_dir_may_be_missing_but_not_a_file(trainer_command, tmp_path):
  check = trainer_command.common_flags.check_data_dir
  check(str(tmp_path))
  check(str(tmp_path / "new"))  # --generate_data makes it
  a_file = tmp_path / "data.txt"
  a_file.write_text("")
  with pytest.raises(console.CommandError) as error:
    check(str(a_file))
  assert str(error.value).startswith(
      f"--data_dir={a_file} is a file; expected a folder")


def test_a_missing_usr_dir_is_named_by_its_flag(trainer_command, tmp_path):
  gone = str(tmp_path / "plugins")
  with flagsaver.flagsaver(t2t_usr_dir=gone):
    with pytest.raises(FileNotFoundError) as error:
      trainer_command.common_flags.load_plugins()
  assert str(error.value).startswith(f"--t2t_usr_dir={gone}: ")


def test_longest_train_example_keeps_lengths_up_to_max_length(
    trainer_command):
  class Problem:

    def split_stats(self, data_dir, split):
      assert (data_dir, split) == ("data", "train")
      return {"lengths": {"3": 40, "8": 2, "9": 1}}

  longest = trainer_command._longest_train_example
  assert longest(Problem(), "data", types.SimpleNamespace(max_length=8)) == 8
  assert longest(Problem(), "data", types.SimpleNamespace(max_length=7)) == 3
  assert longest(Problem(), "data",
                 types.SimpleNamespace(max_length=2)) is None


def test_data_vocabulary_follows_the_warm_start_parent(trainer_command):
  vocab_from = trainer_command._vocab_from
  parent = types.SimpleNamespace(run_folder="/runs/parent", map_vocab=False,
                                 checkpoint="/runs/parent/ckpt-5")
  assert vocab_from(None) is None
  assert vocab_from(parent) == "/runs/parent"
  # A mapped vocabulary: the run trains one of its own.
  mapped = types.SimpleNamespace(**{**vars(parent), "map_vocab": True})
  assert vocab_from(mapped) is None
  with flagsaver.flagsaver(vocab_from="/runs/other"):
    assert vocab_from(parent) == "/runs/other"
    assert vocab_from(None) == "/runs/other"


def test_warm_start_options_need_warm_start_from(trainer_command, tmp_path):
  parent_of = trainer_command._warm_start_parent
  assert parent_of(str(tmp_path)) is None
  for option in ({"warm_start_variables": "encoder"},
                 {"warm_start_map_vocab": True}):
    with flagsaver.flagsaver(**option):
      with pytest.raises(console.CommandError,
                         match="need --warm_start_from"):
        parent_of(str(tmp_path))


def test_a_restart_continues_the_saved_plan(trainer_command, tmp_path):
  from t2tlite.train import budget
  budget_of = trainer_command._budget
  # No plan yet: the flags, else the first start's (a restart before it
  # planned), else a run by steps.
  fresh = str(tmp_path / "fresh")
  with flagsaver.flagsaver(train_minutes=5.0, train_steps=70):
    assert budget_of(fresh, {}) == (5.0, 70, None)
  saved = {"train_minutes": 4.0, "train_steps": 60}
  assert budget_of(fresh, saved) == (4.0, 60, None)
  with flagsaver.flagsaver(train_steps=30):
    assert budget_of(fresh, saved) == (0.0, 0, None)
  assert budget_of(fresh, {}) == (0.0, 0, None)
  output_dir = tmp_path / "run"
  output_dir.mkdir()
  (output_dir / "run.json").write_text("{}")
  plan = budget.Plan(train_minutes=4.0, train_steps=40, planned_at_step=8,
                     planned_after_seconds=10.0, step_seconds=0.1,
                     eval_seconds=0.0, cooldown_steps=10, max_steps=60)
  run_dir.record_plan(str(output_dir), plan.to_json())
  assert budget_of(str(output_dir), saved) == (4.0, 60, plan)
  with flagsaver.flagsaver(train_minutes=4.0):
    assert budget_of(str(output_dir), saved) == (4.0, 60, plan)
  with flagsaver.flagsaver(train_minutes=2.0):
    with pytest.raises(console.CommandError, match="leave out --train_minutes"):
      budget_of(str(output_dir), saved)
  with flagsaver.flagsaver(train_steps=80):
    with pytest.raises(console.CommandError,
                       match="--train_steps cannot change it"):
      budget_of(str(output_dir), saved)


def test_evaluation_flags_are_checked_before_training(trainer_command):
  class Problem:
    name = "no_metric"
    metric = None
    has_dev = True

    def shard_files(self, data_dir, split):
      assert split == "dev"
      if not self.has_dev:
        raise problem_lib.DataError(f"no dev files in {data_dir}")
      return [f"{data_dir}/dev-00000-of-00001"]

  check = trainer_command._check_evaluation
  problem = Problem()
  check(problem, "data")  # the defaults need no metric
  with flagsaver.flagsaver(schedule="train"):
    check(problem, "data")
  with flagsaver.flagsaver(schedule="train", early_stopping_patience=3):
    with pytest.raises(console.CommandError,
                       match="--early_stopping_patience needs "
                             "--schedule=train_and_evaluate"):
      check(problem, "data")
  for option in ({"keep_best_checkpoints": 2}, {"export_best": True},
                 {"early_stopping_patience": 3}):
    with flagsaver.flagsaver(**option):
      with pytest.raises(console.CommandError,
                         match="problem no_metric declares no dev metric"):
        check(problem, "data")
    with flagsaver.flagsaver(dev_metric=False, **option):
      with pytest.raises(console.CommandError, match="need --dev_metric"):
        check(problem, "data")
  problem.has_dev = False
  with pytest.raises(console.CommandError,
                     match="--schedule=train_and_evaluate evaluates on dev, "
                           "but no dev files"):
    check(problem, "data")
  with flagsaver.flagsaver(schedule="train"):
    check(problem, "data")


def test_an_explicit_dev_metric_needs_a_problem_metric(trainer_command):
  problem = types.SimpleNamespace(name="no_metric", metric=None,
                                  shard_files=lambda data_dir, split: [])
  check = trainer_command._check_evaluation
  with flagsaver.flagsaver(dev_metric=True):
    check(problem, "data")  # the default value asks for nothing
    trainer_command.FLAGS["dev_metric"].present = 1  # given on the line
    with pytest.raises(console.CommandError,
                       match="problem no_metric declares no dev metric"):
      check(problem, "data")


def test_a_too_short_budget_is_refused_before_training(trainer_command,
                                                       tmp_path):
  budget_of = trainer_command._budget
  fresh = str(tmp_path / "fresh")
  with flagsaver.flagsaver(train_minutes=0.01):
    with pytest.raises(console.CommandError,
                       match="--train_minutes=0.01 is too short"):
      budget_of(fresh, {})
  # A restart before planning checks the first start's budget too.
  with pytest.raises(console.CommandError, match="is too short"):
    budget_of(fresh, {"train_minutes": 0.01})


def test_registry_help_lists_each_registry_under_its_title(
    trainer_command):
  sections, title = {}, None
  for line in trainer_command.registry_help().splitlines():
    if line.startswith("  "):
      sections[title].append(line.strip())
    else:
      title = line.rstrip(":")
      sections[title] = []
  assert list(sections) == ["Problems (each also as NAME_rev)",
                            "Hparams sets", "Models"]
  assert sections["Problems (each also as NAME_rev)"] == (
      registry.problems.names())
  assert "transformer_tiny" in sections["Hparams sets"]
  assert "transformer" not in sections["Hparams sets"]
  assert sections["Models"] == registry.models.names()


def test_a_new_run_needs_problem_and_data_dir(trainer_command, tmp_path):
  new_run = str(tmp_path / "run")
  for given in ({"problem": "algorithmic_reverse"},
                {"data_dir": str(tmp_path / "data")}):
    with flagsaver.flagsaver(**given):
      with pytest.raises(console.CommandError,
                         match="--problem and --data_dir are required"):
        trainer_command._resolve_setup(new_run)


def _fake_checkpoint(folder, step):
  """A folder whose 'checkpoint' file names ckpt-<step>, its index present
  (what finding a checkpoint looks at; no variables are read)."""
  folder.mkdir(parents=True, exist_ok=True)
  write_checkpoint_state(folder, [f"ckpt-{step}"])
  (folder / f"ckpt-{step}.index").write_bytes(b"")
  return str(folder / f"ckpt-{step}")


def test_a_warm_start_applies_to_a_new_run_only(trainer_command, tmp_path):
  parent = _fake_checkpoint(tmp_path / "parent", 5)
  own = tmp_path / "resumed"
  _fake_checkpoint(own, 3)
  parent_of = trainer_command._warm_start_parent
  with flagsaver.flagsaver(warm_start_from=str(tmp_path / "parent")):
    started = parent_of(str(tmp_path / "new"))
    assert (started.checkpoint, started.step) == (parent, 5)
    assert parent_of(str(own)) is None  # it resumes from its own


def test_a_bad_warm_start_from_is_named_by_its_flag(trainer_command,
                                                    tmp_path):
  nowhere = str(tmp_path / "nowhere")
  with flagsaver.flagsaver(warm_start_from=nowhere):
    with pytest.raises(console.CommandError) as error:
      trainer_command._warm_start_parent(str(tmp_path / "run"))
  assert str(error.value).startswith(
      f"--warm_start_from={nowhere}: no such folder or checkpoint")


def test_the_dev_metric_follows_the_schedule_and_samples(trainer_command,
                                                         tmp_path):
  problem = problem_lib.get_problem("algorithmic_reverse")
  inputs, targets = problem.stored_text_files(str(tmp_path), "dev")
  pathlib.Path(inputs).write_text("1 2\n3\n4 5 6\n")
  pathlib.Path(targets).write_text("2 1\n3\n6 5 4\n")
  choice = types.SimpleNamespace(keras_policy=None)

  def make():
    return trainer_command._make_dev_metric(problem, str(tmp_path / "run"),
                                            str(tmp_path), choice)

  assert make().pairs == [("1 2", "2 1"), ("3", "3"), ("4 5 6", "6 5 4")]
  with flagsaver.flagsaver(eval_decode_samples=2):
    assert make().pairs == [("1 2", "2 1"), ("3", "3")]
  for nothing_decoded in ({"schedule": "train"}, {"dev_metric": False}):
    with flagsaver.flagsaver(**nothing_decoded):
      assert make() is None


def test_a_non_finite_nll_stops_training(tmp_path, strategy):
  trainer = train_helpers.tiny_trainer(str(tmp_path), strategy)
  finite = {"loss": 6.0, "nll": 5.0, "target_tokens": 3.0}
  trainer._check_finite(1, finite)
  for key in ("loss", "nll"):
    with pytest.raises(trainer_lib.NonFiniteLossError,
                       match=f"^Step 2: the training {key} is nan. "):
      trainer._check_finite(2, {**finite, key: math.nan})
  # A step without target tokens is no reason to stop.
  trainer._check_finite(3, {**finite, "loss": 0.0, "target_tokens": 0.0})


def test_a_finite_training_set_restarts_and_train_never_evaluates(
    tmp_path, strategy):
  # Two batches a pass: five steps take three passes. local_eval_frequency
  # is train_and_evaluate's; the schedule "train" evaluates nothing.
  trainer = train_helpers.tiny_trainer(str(tmp_path), strategy, batches=2,
                                       train_steps=5, schedule="train",
                                       local_eval_frequency=1)
  assert trainer.train() == {}
  assert trainer.step == 5
  assert not (tmp_path / EVAL_RESULTS_FILE).exists()
  assert not (tmp_path / "eval").exists()


def test_a_budget_too_short_fails_leaving_no_checkpoint(tmp_path, strategy):
  # Half a minute cannot hold 100,000 steps of warm-up: the plan fails
  # after the timed steps, and the timer that would save at every step
  # saved none before it.
  from t2tlite.train import budget
  trainer = train_helpers.tiny_trainer(str(tmp_path), strategy,
                                       "warmup_steps=100000",
                                       schedule="train", train_minutes=0.5,
                                       save_checkpoints_secs=0)
  with pytest.raises(budget.BudgetError):
    trainer.train()
  assert trainer.step >= budget.MEASURE_STEPS
  assert run_dir.checkpoints_newest_first(str(tmp_path)) == []


def test_a_restart_resumes_from_the_newest_checkpoint(tmp_path, strategy):
  output_dir = str(tmp_path)
  first = train_helpers.tiny_trainer(output_dir, strategy)
  for step in (5, 7):  # steps reached, as train() saves them
    first.optimizer.iterations.assign(step)
    first.save()
  assert first.manager.checkpoints == [
      os.path.join(output_dir, f"ckpt-{step}") for step in (5, 7)]
  resumed = train_helpers.tiny_trainer(output_dir, strategy)
  assert resumed.step == 7
  assert resumed.restored_from == os.path.join(output_dir, "ckpt-7")


def test_a_stop_request_saves_the_step_reached(tmp_path, strategy):
  import time
  from t2tlite.train import preemption
  output_dir = str(tmp_path)
  trainer = train_helpers.tiny_trainer(output_dir, strategy)
  trainer.optimizer.iterations.assign(3)
  loop = trainer_lib._Loop(time.monotonic(), trainer.step,
                           last_save=time.time())
  stop = preemption.StopSignals()  # as its handler leaves it on SIGTERM
  stop.requested = "SIGTERM"
  with pytest.raises(preemption.Preempted) as error:
    trainer._save_or_stop(loop, stop)
  saved = os.path.join(output_dir, "ckpt-3")
  assert (error.value.step, error.value.checkpoint) == (3, saved)
  assert tf.train.latest_checkpoint(output_dir) == saved
  assert str(error.value).startswith(
      f"Preempted (SIGTERM): saved the checkpoint {saved} at step 3.")
  # Without a request (and a save not due yet), the loop goes on.
  stop.requested = None
  trainer.optimizer.iterations.assign(4)
  loop.step = 4
  trainer._save_or_stop(loop, stop)
  assert tf.train.latest_checkpoint(output_dir) == saved


def test_a_plan_sets_the_length_and_cooldown_at_the_start(tmp_path,
                                                          strategy):
  from t2tlite.train import budget
  plan = budget.Plan(train_minutes=1.0, train_steps=40, planned_at_step=8,
                     planned_after_seconds=10.0, step_seconds=0.1,
                     eval_seconds=0.0, cooldown_steps=10)
  trainer = train_helpers.tiny_trainer(
      str(tmp_path), strategy, "learning_rate_cooldown_steps=30",
      schedule="train", train_minutes=1.0, plan=plan)
  assert trainer.config.train_steps == 40
  assert (trainer.hp.train_steps,
          trainer.hp.learning_rate_cooldown_steps) == (40, 10)
  schedule = trainer.base_optimizer.get_config()["learning_rate"]["config"]
  assert (schedule["train_steps"], schedule["cooldown_steps"]) == (40, 10)


def test_a_lost_worker_is_reported_once():
  from t2tlite.train import preemption
  reported = []
  report = preemption._ReportOnce(reported.append)
  first = preemption.WorkerLostError("first", ["/job:worker/task:1"], None)
  second = preemption.WorkerLostError("second", ["/job:worker/task:2"], None)
  assert report(lambda: first) is first
  assert report(lambda: second) is first
  assert reported == [first]


def test_a_later_signal_keeps_the_first_one_recorded():
  import signal
  import time
  from t2tlite.train import preemption
  with preemption.StopSignals() as stop:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.05)  # Python runs the handler between bytecodes
    # A Ctrl-C after SIGTERM: the stop already asked for, no exit.
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.05)
    assert stop.requested == "SIGTERM"


def test_worker_lost_error_names_peers_and_the_checkpoint(tmp_path):
  from t2tlite.train import peer_watch, preemption
  cluster = tf.train.ClusterSpec({"chief": ["h0:2000"],
                                  "worker": ["h1:2001", "h2:2002"]})
  # What the messages read of a multi-worker strategy: its cluster.
  strategy = types.SimpleNamespace(
      cluster_resolver=tf.distribute.cluster_resolver.SimpleClusterResolver(
          cluster, task_type="chief", task_id=0))
  output_dir = str(tmp_path)
  tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.0)),
                             output_dir, 3).save(checkpoint_number=12)
  lost = {"/job:worker/task:0": peer_watch.REFUSED,
          "/job:worker/task:1": peer_watch.SILENT}
  error = preemption.worker_lost_error(strategy, output_dir, lost, 30.0,
                                       "when a collective failed: x")
  assert error.lost_tasks == list(lost) and error.tf_error is None
  assert str(error) == (
      "/job:worker/task:0 is gone: its address h1:2001 refuses "
      "connections; /job:worker/task:1 (h2:2002) has not answered for 30 s "
      "(when a collective failed: x). /job:chief/task:0 stopped training. "
      f"The newest checkpoint is {output_dir}/ckpt-12 (step 12); restarting "
      "every worker with the same command resumes from it.")
