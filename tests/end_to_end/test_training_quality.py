"""t2t-trainer's time budget (--train_minutes: planned once, kept across a
resume; that a budgeted run ends inside its budget with its schedule
complete is checked on the README's quick start, test_quickstart.py), and
its one-line errors for runs that cannot evaluate or plan: no dev split, no
metric, a budget too short for the schedule. Early stopping (and a restart
of a stopped run) is tested on two workers, test_multiworker.py."""
import json
import os
import pathlib
import re
import shutil
import signal

import pytest

from t2tlite.train import budget
import train_helpers
import worker_cluster
from reverse_data import shared_reverse_data
from train_helpers import console_script, run

REPO = pathlib.Path(__file__).resolve().parents[2]
PLUGINS = REPO / "tests" / "support" / "plugins"
TINY = ("num_layers=1,d_model=32,d_ff=64,num_heads=2,d_k=16,d_v=16,"
        "batch_size=256,warmup_steps=10,learning_rate_cooldown_steps=0")
# A quarter of a minute (budget.check_budget accepts down to about 0.1):
# on a quiet machine it holds more steps than CEILING. Its rate is measured
# for 0.75 s (budget.MEASURE_SHARE) before the plan.
BUDGET = "--train_minutes=0.25"
# --train_steps beside BUDGET: twice the steps timed before the plan even at
# 400 steps/s, so that the run still trains under its plan when the test
# stops it (a quiet Zen 4 once ran a ceiling of 400 steps, under a budget
# of half a minute, in about a second: its plan never came).
CEILING = 600


@pytest.fixture(scope="module")
def reverse_data(tmp_path_factory):
  return shared_reverse_data(tmp_path_factory)


def _trainer(*args, timeout=300):
  return run([console_script("t2t-trainer"), *args], timeout=timeout)


@pytest.mark.timeout(300)
def test_missing_dev_split_is_one_line_before_training(reverse_data,
                                                       tmp_path):
  data_dir = tmp_path / "data"
  shutil.copytree(reverse_data, data_dir)
  for path in data_dir.glob("*-dev*"):
    path.unlink()
  code, output = _trainer(
      "--problem=algorithmic_reverse", "--hparams_set=transformer_tiny",
      f"--data_dir={data_dir}", f"--output_dir={tmp_path / 'train'}")
  assert code == 1, output[-3000:]
  assert "t2t-trainer: error: --schedule=train_and_evaluate evaluates on " \
         "dev, but" in output
  assert "Traceback" not in output
  assert not list((tmp_path / "train").glob("ckpt-*"))


@pytest.mark.timeout(300)
def test_metric_asked_of_a_problem_without_one(tmp_path):
  code, output = _trainer(
      f"--t2t_usr_dir={PLUGINS}", "--problem=plugin_sort_digits",
      "--hparams_set=plugin_tiny", f"--data_dir={tmp_path / 'data'}",
      f"--output_dir={tmp_path / 'train'}", "--generate_data",
      "--early_stopping_patience=3")
  assert code == 1, output[-3000:]
  assert ("t2t-trainer: error: problem plugin_sort_digits declares no dev "
          "metric") in output
  assert "Traceback" not in output
  assert not (tmp_path / "train").exists()


def _budget_command(data_dir, output_dir, *extra):
  return [console_script("t2t-trainer"), "--problem=algorithmic_reverse",
          "--hparams_set=transformer_tiny",
          f"--hparams={TINY.replace('cooldown_steps=0', 'cooldown_steps=30')}",
          f"--data_dir={data_dir}", f"--output_dir={output_dir}",
          "--local_eval_frequency=0", "--eval_steps=1",
          "--eval_decode_samples=10", "--save_checkpoints_secs=2",
          "--log_step_count_steps=10", "--mixed_precision=float32", *extra]


def _plan(output_dir):
  run_file = output_dir / "run.json"
  return json.loads(run_file.read_text()).get("plan") if (
      run_file.exists()) else None


# Twice a quarter-minute budget in part: a budget is wall-clock time by
# design.
@pytest.mark.timeout(400)
def test_budgeted_run_keeps_its_plan_across_a_resume(reverse_data, tmp_path):
  output_dir = tmp_path / "train"
  # A ceiling: a loaded machine plans the steps the budget holds, a quiet
  # one the ceiling (the run ends early), which is several times the steps
  # taken before the plan. No evaluation: it would come after the budget.
  command = _budget_command(reverse_data, output_dir, "--schedule=train",
                            f"--train_steps={CEILING}", BUDGET)
  with train_helpers.processes() as started:
    proc = train_helpers.start(command, tmp_path / "first.txt")
    started.append(proc)
    # Stopped as soon as it trains under its plan (made after a few timed
    # steps): a quiet fast machine runs the ceiling's steps in about a
    # second, before the first checkpoint a time would write.
    worker_cluster.wait_until(lambda: _plan(output_dir) is not None,
                              [tmp_path / "first.txt"], [proc], "a plan")
    os.killpg(proc.pid, signal.SIGTERM)  # preempted: saves and exits 75
    proc.wait(timeout=120)
  first = (tmp_path / "first.txt").read_text()
  assert proc.returncode == 75, first[-3000:]
  plan = _plan(output_dir)
  # The plan in run.json is the last one made: as first made, or as
  # re-estimated before the cool-down. The log shows the first and the
  # re-plans that moved the plan shown by more than REPLAN_LOG_SHARE, so
  # the last one shown is within that share of it.
  shown = [int(steps) for steps in re.findall(
      rf"(?:Planned|Re-planned) (\d+) steps for {BUDGET}", first)]
  assert shown, first[-3000:]
  assert (abs(plan["train_steps"] - shown[-1]) <=
          budget.REPLAN_LOG_SHARE * shown[-1]), (plan, shown)
  if not plan["replanned_at_step"]:
    assert shown == [plan["train_steps"]], shown
  assert plan["max_steps"] == CEILING and plan["train_steps"] <= CEILING
  stopped_at = train_helpers.latest_step(str(output_dir))
  assert stopped_at < plan["train_steps"]
  # The restart names no budget: it continues the plan to its end.
  code, output = run(command[:-2], timeout=300)
  assert code == 0, output[-3000:]
  assert f"Continuing the plan of run.json: {plan['train_steps']} steps" \
      in output
  assert _plan(output_dir) == plan
  assert train_helpers.latest_step(str(output_dir)) == plan["train_steps"]
  # Another budget is refused.
  code, output = run(command[:-2] + ["--train_minutes=2"], timeout=120)
  assert code == 1 and "a restart continues that plan" in output, output


@pytest.mark.timeout(300)
def test_budget_too_short_for_the_schedule_is_one_line(reverse_data,
                                                       tmp_path):
  output_dir = tmp_path / "train"
  command = _budget_command(reverse_data, output_dir, "--train_minutes=0.5")
  command[3] = "--hparams=" + TINY.replace("warmup_steps=10",
                                           "warmup_steps=100000")
  code, output = run(command, timeout=250)
  assert code == 1, output[-3000:]
  assert re.search(r"^t2t-trainer: error: --train_minutes=0.5 is too short "
                   r"for the schedule: at the measured [\d.]+ steps/s .* "
                   r"fewer than warm-up 100000 \+ 0 of the 0 cool-down "
                   r"steps; give at least --train_minutes=\d+", output,
                   re.M), output[-3000:]
  assert "Traceback" not in output
  assert not list(output_dir.glob("ckpt-*"))
