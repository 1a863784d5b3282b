"""The --train_minutes step planner, against a fake clock."""
import re
import types

import pytest

from t2tlite.train import budget

from fake_clock import FakeClock


def test_meter_waits_for_enough_steps_and_seconds():
  clock = FakeClock()
  meter = budget.StepRateMeter(min_seconds=10.0, clock=clock, steps=20)
  meter.start(1)
  done = []
  for step in range(2, 60):
    clock.now += 0.25  # 4 steps/s
    done.append(meter.step_done(step))
  # 20 steps take 5 s: the 10 s minimum decides (40 steps after step 1).
  assert done.index(True) == 41 - 2
  assert meter.step_seconds() == pytest.approx(0.25)


def test_plan_fills_the_budget_with_steps_and_evaluations():
  # 10 minutes; 30 s spent; 0.1 s a step; 6 s an evaluation every 100 steps.
  total = budget.plan_train_steps(
      600, elapsed_seconds=30, steps_done=50, step_seconds=0.1,
      warmup_steps=100, cooldown_steps=200, eval_every=100, eval_seconds=6)
  reserve = budget.RESERVE_SHARE * 600 + budget.RESERVE_SECONDS
  left = 600 - 30 - reserve - 6  # the final evaluation
  assert total == 50 + int(left / (0.1 + 6 / 100))
  # Played out on the fake clock, the run ends inside the budget.
  clock = 30 + (total - 50) * 0.1 + (total // 100) * 6 + 6
  assert clock <= 600 - budget.RESERVE_SECONDS


def test_plan_without_evaluations():
  total = budget.plan_train_steps(120, 10, 20, 0.02, 400, 1000)
  left = 120 - 10 - budget.RESERVE_SHARE * 120 - budget.RESERVE_SECONDS
  assert total == 20 + int(left / 0.02)


def test_budget_too_short_for_the_schedule_names_the_budget_needed():
  with pytest.raises(budget.BudgetError) as error:
    budget.plan_train_steps(60, 10, 20, 0.1, warmup_steps=400,
                            cooldown_steps=1000)
  message = str(error.value)
  assert "\n" not in message
  assert message.startswith("--train_minutes=1 is too short for the "
                            "schedule: at the measured 10.00 steps/s")
  needed = int(message.split("at least --train_minutes=")[1].split(",")[0])
  assert "fewer than warm-up 400 + 250 of the 1000 cool-down steps" in message
  # The budget it names holds the warm-up and the shortest cool-down.
  assert budget.plan_train_steps(needed * 60, 10, 20, 0.1, 400, 1000) >= 650


def test_cool_down_shortened_to_what_the_budget_holds():
  assert budget.cooldown_steps_for(5000, 800, 2000) == 2000
  assert budget.cooldown_steps_for(1500, 800, 2000) == 700
  # A plan that holds 1500 steps: 400 of warm-up and 1100 of cool-down.
  total = budget.plan_train_steps(
      160, 0, 0, 0.1, warmup_steps=400, cooldown_steps=2000)
  assert total == int((160 - budget.RESERVE_SHARE * 160 -
                       budget.RESERVE_SECONDS) / 0.1)
  assert budget.cooldown_steps_for(total, 400, 2000) == total - 400


def test_a_budget_shorter_than_the_measurement_fails_before_running():
  with pytest.raises(budget.BudgetError, match="too short") as refused:
    budget.check_budget(0.05)
  # The budget it names is accepted; just under it is not.
  named = float(re.search(r"give at least --train_minutes=([\d.]+)\.$",
                          str(refused.value)).group(1))
  assert named == budget.shortest_budget_minutes() == 0.1
  budget.check_budget(named)
  with pytest.raises(budget.BudgetError):
    budget.check_budget(0.09)


def test_plan_round_trips_through_json():
  plan = budget.Plan(train_minutes=2, train_steps=3000, planned_at_step=40,
                     planned_after_seconds=9.5, step_seconds=0.03,
                     eval_seconds=2.0, cooldown_steps=1000, max_steps=5000)
  assert budget.Plan.from_json(plan.to_json()) == plan
  # A plan recorded before ceilings existed has none.
  record = plan.to_json()
  del record["max_steps"]
  assert budget.Plan.from_json(record).max_steps == 0


def test_replan_lengthens_a_plan_made_on_a_slow_start():
  # Planned at 0.2 s a step (a load spike); 0.1 s a step since.
  total = budget.replanned_train_steps(
      600, elapsed_seconds=100, step=500, step_seconds=0.1,
      planned_steps=2500, warmup_steps=100, cooldown_steps=1000)
  assert total == budget.plan_train_steps(600, 100, 500, 0.1, 100, 1000)
  assert total > 2500


def test_replan_shortens_but_never_cools_a_step_already_taken():
  # 1.0 s a step since the plan: 100 more steps at most, but the cool-down
  # may only start after step 800.
  total = budget.replanned_train_steps(
      600, elapsed_seconds=500, step=800, step_seconds=1.0,
      planned_steps=3000, warmup_steps=400, cooldown_steps=1000)
  assert total == 800 + 1000
  assert not budget.cooldown_started(800, total, 400, 1000)
  assert budget.cooldown_started(801, total, 400, 1000)


def test_replan_keeps_a_plan_that_still_fits():
  planned = budget.plan_train_steps(600, 30, 50, 0.1, 100, 200)
  assert budget.replanned_train_steps(
      600, 130, 50 + 1000, 0.1 * 1.01, planned, 100, 200) is None


def test_replan_on_a_late_run_keeps_the_shortest_schedule():
  # Past the budget during the warm-up: the warm-up and a quarter of the
  # cool-down, never an error.
  total = budget.replanned_train_steps(
      60, elapsed_seconds=70, step=50, step_seconds=0.5,
      planned_steps=600, warmup_steps=100, cooldown_steps=400)
  assert total == 100 + 100


def test_a_ceiling_caps_the_plan_of_a_fast_machine():
  # The budget holds about 5,600 steps; the ceiling keeps the schedule's 3,000.
  fitting = budget.steps_that_fit(600, 30, 50, 0.1)
  assert fitting == budget.plan_train_steps(600, 30, 50, 0.1, 100, 1000)
  assert fitting > 3000
  assert budget.plan_train_steps(600, 30, 50, 0.1, 100, 1000,
                                 max_steps=3000) == 3000
  # A slow machine plans what fits, under the ceiling.
  assert budget.plan_train_steps(600, 30, 50, 0.1, 100, 1000,
                                 max_steps=100000) == fitting
  # A re-estimate never goes above it, and keeps a plan already at it.
  assert budget.replanned_train_steps(
      600, 100, 500, 0.05, 2500, 100, 1000, max_steps=3000) == 3000
  assert budget.replanned_train_steps(
      600, 100, 500, 0.05, 3000, 100, 1000, max_steps=3000) is None
  # Also where a whole cool-down after the step taken would pass it.
  assert budget.replanned_train_steps(
      600, 100, 2500, 0.05, 2600, 100, 1000, max_steps=3000) == 3000


def test_a_ceiling_below_the_schedule_is_the_whole_run():
  # 300 steps fit; a ceiling of 200 (inside the 400-step warm-up) is held,
  # where the schedule alone (warm-up + a quarter of the cool-down) is not.
  with pytest.raises(budget.BudgetError):
    budget.plan_train_steps(40, 5, 20, 0.1, 400, 1000)
  assert budget.plan_train_steps(40, 5, 20, 0.1, 400, 1000,
                                 max_steps=200) == 200
  with pytest.raises(budget.BudgetError,
                     match="fewer than the 500 steps of --train_steps"):
    budget.plan_train_steps(40, 5, 20, 0.1, 400, 1000, max_steps=500)


def test_planner_returns_the_plans_of_its_measurements(caplog):
  caplog.set_level("INFO", logger="absl")
  # The chief's measurements, as the trainer passes them: 0.1 s a step
  # after 30 s, a 6 s evaluation; then 0.2 s a step since the plan, twice
  # the planned rate.
  config = types.SimpleNamespace(
      train_minutes=10, max_planned_steps=0, schedule="train_and_evaluate",
      local_eval_frequency=100, plan=None)
  planner = budget.Planner.for_config(config, 100, 200)
  assert planner.eval_every == 100 and not planner.planned_here
  planner.check(50, 30.0, 0.1)
  with pytest.raises(budget.BudgetError):
    planner.check(50, 590.0, 0.1)
  plan = planner.first_plan(50, 36.0, 0.1, 6.0, measured_from=30)
  assert plan == planner.plan
  assert plan.train_steps == budget.plan_train_steps(
      600, 36.0, 50, 0.1, 100, 200, eval_every=100, eval_seconds=6.0)
  assert (plan.planned_at_step, plan.eval_seconds, plan.cooldown_steps) == (
      50, 6.0, 200)
  assert f"Planned {plan.train_steps} steps" in caplog.text
  assert "over steps 30-50, 6.0s an evaluation;" in caplog.text
  assert planner.planned_here
  assert not planner.may_replan(50 + budget.MEASURE_STEPS - 1)
  assert planner.may_replan(250)
  elapsed = 36.0 + 200 * 0.2 + 12
  replanned = planner.replan(250, elapsed, eval_seconds=12.0)
  assert replanned.train_steps == budget.replanned_train_steps(
      600, elapsed, 250, 0.2, plan.train_steps, 100, 200, 100, 6.0)
  assert replanned.train_steps < plan.train_steps
  assert replanned == planner.plan and replanned.replanned_at_step == 250
  # Moved by more than REPLAN_LOG_SHARE: logged at once, saying why.
  assert (f"Re-planned {replanned.train_steps} steps for --train_minutes=10 "
          f"(was {plan.train_steps}): 5.00 steps/s since step 50, where the "
          "plan measured 10.00") in caplog.text
  # A rate that holds: no new plan.
  assert planner.replan(270, elapsed + 20 * 0.2, 12.0) is None


def test_a_small_replan_is_shown_before_the_next_progress_line(caplog):
  planner = budget.Planner(10, 100, 200)
  plan = planner.first_plan(50, 30.0, 0.1, 0.0, measured_from=30)
  # 0.105 s a step: a few percent fewer steps, not logged at once.
  with caplog.at_level("INFO", logger="absl"):
    replanned = planner.replan(250, 30.0 + 200 * 0.105, 0.0)
    assert replanned.train_steps < plan.train_steps
    assert "Re-planned" not in caplog.text
    planner.show()
    assert (f"Re-planned {replanned.train_steps} steps for "
            f"--train_minutes=10 (was {plan.train_steps})") in caplog.text
    planner.show()  # shown once
  assert caplog.text.count("Re-planned") == 1


def test_a_resumed_plan_is_kept_even_from_an_older_checkpoint():
  # The plan of run.json, made by an earlier process on its own clock; the
  # checkpoint resumed from may be older than the plan.
  plan = budget.Plan(train_minutes=10, train_steps=1000, planned_at_step=50,
                     planned_after_seconds=36.0, step_seconds=0.1,
                     eval_seconds=6.0, cooldown_steps=200)
  config = types.SimpleNamespace(
      train_minutes=10, max_planned_steps=0, schedule="train_and_evaluate",
      local_eval_frequency=100, plan=plan)
  planner = budget.Planner.for_config(config, 100, 200)
  assert planner.plan == plan and not planner.planned_here
  assert not planner.may_replan(250)
  planner.show()  # nothing to show


def test_replan_log_shows_the_moves_that_matter_and_counts_all():
  log = budget.ReplanLog(1000)
  assert log.summary(1000) == "as planned, 1000 steps"
  # Within REPLAN_LOG_SHARE of the plan last logged: counted, not logged.
  assert not log.replanned(1050)
  assert not log.replanned(950)
  assert log.logged == 1000
  # Further than the share: logged, and the next move is measured from it.
  assert log.replanned(1150)
  assert log.logged == 1150
  assert not log.replanned(1100)
  assert log.replanned(900)
  assert log.summary(900) == ("final plan 900 steps (planned 1000, "
                              "re-planned 5 times)")
  once = budget.ReplanLog(500)
  once.replanned(510)
  assert once.summary(510) == ("final plan 510 steps (planned 500, "
                               "re-planned once)")


def test_a_plan_may_be_re_estimated_once_measure_steps_steps_are_taken():
  planner = budget.Planner(10, 100, 200)
  planner.first_plan(50, 30.0, 0.1, 0.0, measured_from=30)
  assert not planner.may_replan(50 + budget.MEASURE_STEPS - 1)
  assert planner.may_replan(50 + budget.MEASURE_STEPS)


def test_the_first_plan_records_the_cool_down_it_shortened(caplog):
  # 2 minutes at 0.1 s a step hold about 1,100 steps: fewer than the
  # 400-step warm-up and the 2,000-step cool-down.
  caplog.set_level("INFO", logger="absl")
  planner = budget.Planner(2, 400, 2000)
  plan = planner.first_plan(20, 5.0, 0.1, 0.0, measured_from=1)
  assert 400 + 500 <= plan.train_steps < 400 + 2000
  assert plan.cooldown_steps == plan.train_steps - 400
  assert (f"cool-down over the last {plan.train_steps - 400} steps "
          "(shortened from 2000 to fit)") in caplog.text


def test_a_ceiling_inside_the_warm_up_leaves_no_cool_down():
  assert budget.cooldown_steps_for(200, 400, 1000) == 0
  planner = budget.Planner(40 / 60, 400, 1000, max_steps=200)
  plan = planner.first_plan(20, 5.0, 0.1, 0.0, measured_from=1)
  assert (plan.train_steps, plan.cooldown_steps) == (200, 0)
