"""--train_minutes: the run's steps planned from its measured step rate, so
that the warm-up, the cool-down and the evaluations all fit in the budget.

The planner times the first steps after the first one (which traces the
step and fills the shuffle buffer), and the first evaluation; the total is
then fixed once (recorded in run.json, so that a resume continues the same
plan) and the learning-rate schedule's cool-down ends at it:

    meter = StepRateMeter(clock=time.monotonic)
    meter.start(step)                 # after the first step
    ...
    if meter.step_done(step):         # enough steps timed
      total = plan_train_steps(budget_seconds, elapsed, step,
                               meter.step_seconds(), warmup, cooldown,
                               eval_every, eval_seconds)

A ceiling (`max_steps`; t2t-trainer's --train_steps beside --train_minutes)
caps the plan: a machine fast enough to run more steps than the schedule was
made for runs that schedule and ends early, rather than training far past
it (a small corpus overfits).

Until the cool-down starts, the plan is re-estimated at each logged step
from the rate since it was made (`replanned_train_steps`): the learning
rate before the cool-down does not depend on the run's length, so a plan
made during a load spike, or on a rate that drifts later, is corrected
while that is still free. Each change is recorded in run.json; the log
shows those that move the plan it last showed by more than REPLAN_LOG_SHARE,
and any other before a progress line shows its total (`ReplanLog`), and the
plan the run ended on.

`plan_train_steps` and `replanned_train_steps` are pure functions of their
numbers; `StepRateMeter` takes its clock as an argument, so all are tested
against a fake clock. `Planner` makes and re-makes a run's plan with them
from the measurements it is given, and returns each plan for the trainer
to apply: this module stays free of TensorFlow (t2t-trainer imports it
before parsing its flags).
"""
import dataclasses
import math
import time

from absl import logging

from t2tlite.train import progress

# Steps timed before planning, and at least this share of the budget (the
# rate of the first few steps is noisy), at most MAX_MEASURE_SECONDS.
MEASURE_STEPS = 20
MEASURE_SHARE = 0.05
MAX_MEASURE_SECONDS = 30.0
# A planned run may shorten the cool-down to fit, down to this share of it.
MIN_COOLDOWN_SHARE = 0.25
# Kept free at the end: the final checkpoint, and the rate's own noise.
RESERVE_SHARE = 0.03
RESERVE_SECONDS = 5.0
# A re-estimated plan replaces the plan only when it differs by at least
# this share of its steps (a change retraces the training step), and only
# after this many steps at the new rate.
REPLAN_MIN_CHANGE = 0.02
# A re-plan is logged at once when it moves the run's end by more than this
# share of the plan last logged (any other before the next progress line);
# the final line gives the plan the run ended on.
REPLAN_LOG_SHARE = 0.10


class BudgetError(ValueError):
  """The budget cannot hold the schedule (warm-up and cool-down)."""


@dataclasses.dataclass(frozen=True)
class Plan:
  """A fixed plan, as recorded in run.json's "plan"."""
  train_minutes: float
  train_steps: int
  planned_at_step: int
  planned_after_seconds: float
  step_seconds: float
  eval_seconds: float
  cooldown_steps: int
  replanned_at_step: int = 0  # the last re-estimate that changed it; 0: none
  max_steps: int = 0  # the ceiling on train_steps (--train_steps); 0: none

  def to_json(self):
    return dataclasses.asdict(self)

  @classmethod
  def from_json(cls, record):
    return cls(**{f.name: record[f.name] for f in dataclasses.fields(cls)
                  if f.name in record})


class ReplanLog:
  """Which re-plans a person reads: one that moves the plan last shown by
  more than REPLAN_LOG_SHARE of its steps at once, any other before a
  progress line shows its total (`show`); `summary` counts them all.

  Args:
    train_steps: the plan first made (logged).
  """

  def __init__(self, train_steps):
    self.planned = self.logged = train_steps
    self.previous = None  # the total shown before `logged`
    self.replans = 0

  def replanned(self, train_steps):
    """Counts a re-plan to `train_steps`; whether to log it now."""
    self.replans += 1
    if abs(train_steps - self.logged) > REPLAN_LOG_SHARE * self.logged:
      return self.show(train_steps)
    return False

  def show(self, train_steps):
    """Whether a progress line showing `train_steps` needs a re-plan line
    first (a total other than the one last shown); it counts as shown."""
    if train_steps == self.logged:
      return False
    self.previous, self.logged = self.logged, train_steps
    return True

  def summary(self, train_steps):
    """"final plan 816 steps (planned 857, re-planned 4 times)"."""
    if not self.replans:
      return f"as planned, {train_steps} steps"
    times = "once" if self.replans == 1 else f"{self.replans} times"
    return (f"final plan {train_steps} steps (planned {self.planned}, "
            f"re-planned {times})")


def plan_train_steps(budget_seconds, elapsed_seconds, steps_done,
                     step_seconds, warmup_steps, cooldown_steps,
                     eval_every=0, eval_seconds=0.0, max_steps=0):
  """The total steps that fit in the budget, at most `max_steps`.

  Args:
    budget_seconds: the whole budget (--train_minutes * 60).
    elapsed_seconds: spent so far (start-up, the timed steps, the timed
      evaluation).
    steps_done: optimizer steps done so far.
    step_seconds: measured seconds per step.
    warmup_steps, cooldown_steps: the schedule's. The total must hold the
      warm-up and at least MIN_COOLDOWN_SHARE of the cool-down after it
      (`cooldown_steps_for` shortens the cool-down to what is left).
    eval_every: evaluations every this many steps (and one at the end);
      0 = none.
    eval_seconds: measured seconds of one evaluation.
    max_steps: > 0: the most steps to plan, however many fit (a schedule
      meant for this many steps, on a machine fast enough to run more);
      0: as many as fit.
  Returns:
    The total number of steps.
  Raises:
    BudgetError: one line, with the budget that would hold the schedule.
  """
  total = steps_that_fit(budget_seconds, elapsed_seconds, steps_done,
                         step_seconds, eval_every, eval_seconds)
  evals_seconds = eval_seconds if eval_every > 0 else 0.0
  per_step = _seconds_per_step(step_seconds, eval_every, eval_seconds)
  needed = warmup_steps + math.ceil(MIN_COOLDOWN_SHARE * cooldown_steps)
  schedule = (f"warm-up {warmup_steps} + {needed - warmup_steps} of the "
              f"{cooldown_steps} cool-down steps")
  if 0 < max_steps < needed:  # a ceiling below the schedule shortens it
    needed, schedule = max_steps, f"the {max_steps} steps of --train_steps"
  if total < needed:
    # Budget for `needed` steps at the same rates (same overheads).
    seconds = (elapsed_seconds + evals_seconds + RESERVE_SECONDS +
               (needed - steps_done) * per_step) / (1 - RESERVE_SHARE)
    raise BudgetError(
        f"--train_minutes={budget_seconds / 60:g} is too short for the "
        f"schedule: at the measured {1 / step_seconds:.2f} steps/s"
        + (f" ({progress.format_seconds(eval_seconds)} an evaluation)"
           if eval_every > 0 else "") +
        f" it holds {total} steps, fewer than {schedule}; give at "
        f"least --train_minutes={math.ceil(seconds / 60)}, or lower "
        "warmup_steps and learning_rate_cooldown_steps.")
  return min(total, max_steps) if max_steps > 0 else total


def steps_that_fit(budget_seconds, elapsed_seconds, steps_done, step_seconds,
                   eval_every=0, eval_seconds=0.0):
  """The total steps the budget holds at these rates, whatever the schedule
  (arguments as in `plan_train_steps`)."""
  if step_seconds <= 0:
    raise ValueError(f"step_seconds must be positive, got {step_seconds}")
  reserve = RESERVE_SHARE * budget_seconds + RESERVE_SECONDS
  # The final evaluation, then one every eval_every steps.
  evals_seconds = eval_seconds if eval_every > 0 else 0.0
  left = budget_seconds - elapsed_seconds - reserve - evals_seconds
  per_step = _seconds_per_step(step_seconds, eval_every, eval_seconds)
  return steps_done + max(0, math.floor(left / per_step))


def _seconds_per_step(step_seconds, eval_every, eval_seconds):
  """A step's seconds with its share of the evaluations."""
  return step_seconds + (eval_seconds / eval_every if eval_every > 0 else 0.0)


def replanned_train_steps(budget_seconds, elapsed_seconds, step,
                          step_seconds, planned_steps, warmup_steps,
                          cooldown_steps, eval_every=0, eval_seconds=0.0,
                          max_steps=0):
  """A plan's total steps re-estimated at `step`, or None to keep it.

  Args:
    budget_seconds, elapsed_seconds, eval_every, eval_seconds, max_steps:
      as in `plan_train_steps`.
    step: optimizer steps done.
    step_seconds: seconds per step measured since the plan was made
      (evaluations left out).
    planned_steps: the plan's total.
    warmup_steps, cooldown_steps: the schedule's (the cool-down before any
      shortening, as `plan_train_steps` takes it).
  Returns:
    The new total, whose cool-down starts after `step` (the steps already
    taken had the rate of a run of any length) and which holds at least the
    warm-up and MIN_COOLDOWN_SHARE of the cool-down; None when it differs
    from `planned_steps` by less than REPLAN_MIN_CHANGE of it.
  """
  try:
    total = plan_train_steps(budget_seconds, elapsed_seconds, step,
                             step_seconds, warmup_steps, cooldown_steps,
                             eval_every, eval_seconds, max_steps)
  except BudgetError:  # late for the schedule: its shortest form
    total = warmup_steps + math.ceil(MIN_COOLDOWN_SHARE * cooldown_steps)
  if step > warmup_steps:  # the cool-down must start after this step
    total = max(total, step + cooldown_steps)
  if max_steps > 0:
    total = min(total, max_steps)
  if abs(total - planned_steps) < max(1, REPLAN_MIN_CHANGE * planned_steps):
    return None
  return total


def cooldown_started(step, train_steps, warmup_steps, cooldown_steps):
  """Whether the steps after `step` are cooled down in a run of
  `train_steps` (the schedule's cool-down, shortened as
  `cooldown_steps_for` does)."""
  cooldown = cooldown_steps_for(train_steps, warmup_steps, cooldown_steps)
  return step > train_steps - cooldown


def cooldown_steps_for(train_steps, warmup_steps, cooldown_steps):
  """The cool-down of a planned run: the schedule's, or what is left after
  the warm-up when the budget holds fewer steps (a slower machine)."""
  return max(0, min(cooldown_steps, train_steps - warmup_steps))


def check_budget(train_minutes):
  """Raises BudgetError when `train_minutes` cannot even hold the timed
  first steps and the reserve at the end (before anything runs; a budget
  that the measured rate shows too short fails in `plan_train_steps`)."""
  seconds = train_minutes * 60
  least = (measure_seconds(seconds) + RESERVE_SECONDS +
           RESERVE_SHARE * seconds)
  if seconds <= least:
    raise BudgetError(
        f"--train_minutes={train_minutes:g} is too short: the step rate "
        f"alone is measured for {measure_seconds(seconds):.1f}s and "
        f"{RESERVE_SECONDS + RESERVE_SHARE * seconds:.1f}s are kept for the "
        f"final checkpoint; give at least --train_minutes="
        f"{shortest_budget_minutes():g}.")


def shortest_budget_minutes():
  """The shortest budget `check_budget` accepts, in tenths of a minute:
  one that holds the rate's measurement and the reserve, with time left
  (measured for MEASURE_SHARE of a short budget)."""
  seconds = RESERVE_SECONDS / (1 - MEASURE_SHARE - RESERVE_SHARE)
  return (math.floor(seconds / 60 * 10) + 1) / 10


def measure_seconds(budget_seconds):
  """How long the step rate is measured: MEASURE_SHARE of the budget, at
  most MAX_MEASURE_SECONDS (and at least MEASURE_STEPS steps)."""
  return min(MEASURE_SHARE * budget_seconds, MAX_MEASURE_SECONDS)


class StepRateMeter:
  """Times steps from `start` until MEASURE_STEPS steps and
  `min_seconds` have passed.

  Args:
    min_seconds: the shortest measurement.
    clock: a callable returning seconds (time.monotonic; tests pass a fake).
  """

  def __init__(self, min_seconds=0.0, clock=time.monotonic,
               steps=MEASURE_STEPS):
    self.min_seconds, self.clock, self.steps = min_seconds, clock, steps
    self._start = None

  def start(self, step):
    """Starts timing after optimizer step `step`."""
    self._start = (step, self.clock())
    self._last = self._start

  @property
  def first_step(self):
    """The step timing started after."""
    return self._start[0]

  def step_done(self, step):
    """Records that step `step` is done; True once enough is measured."""
    self._last = (step, self.clock())
    steps, seconds = self._measured()
    return steps >= self.steps and seconds >= self.min_seconds

  def _measured(self):
    return (self._last[0] - self._start[0], self._last[1] - self._start[1])

  def step_seconds(self):
    """Mean seconds per step over the measurement."""
    steps, seconds = self._measured()
    return seconds / max(steps, 1)


class Planner:
  """A --train_minutes run's plan, made from measurements and returned as a
  `Plan` for the trainer to apply (the run's length, the schedule's
  cool-down, run.json): `check` and `first_plan` once the first steps (and
  an evaluation) are timed, then `replan` at logged steps until the
  cool-down starts (`may_replan`). The caller passes the chief's
  measurements (`strategy.chief_values`), so every worker makes the same
  plans.

  Args:
    train_minutes: the budget.
    warmup_steps, cooldown_steps: the schedule's (the hparams
      warmup_steps and learning_rate_cooldown_steps).
    eval_every: evaluations every this many steps (and one at the end);
      0: none.
    max_steps: the ceiling on the plan (--train_steps); 0: none.
    plan: the plan a resumed run continues; None: none yet.
  """

  def __init__(self, train_minutes, warmup_steps, cooldown_steps,
               eval_every=0, max_steps=0, plan=None):
    self.train_minutes, self.plan = train_minutes, plan
    self.warmup_steps, self.cooldown_steps = warmup_steps, cooldown_steps
    self.eval_every, self.max_steps = eval_every, max_steps
    # Which re-plans the log shows: made with the plan this process makes
    # (`planned_here`).
    self.replan_log = None
    self._since = None  # (steps/s, from step) of the last re-plan

  @classmethod
  def for_config(cls, config, warmup_steps, cooldown_steps):
    """The planner of a TrainConfig: its train_minutes, max_planned_steps,
    schedule and local_eval_frequency, and the plan it continues."""
    return cls(config.train_minutes, warmup_steps, cooldown_steps,
               eval_every=(config.local_eval_frequency
                           if config.schedule == "train_and_evaluate" else 0),
               max_steps=config.max_planned_steps, plan=config.plan)

  def check(self, step, elapsed, step_seconds):
    """Raises BudgetError when the budget cannot hold the schedule at the
    measured rate, evaluations left out: called before an evaluation is
    timed for `first_plan`, so that a budget too short fails before
    anything is written."""
    plan_train_steps(self.train_minutes * 60, elapsed, step, step_seconds,
                     self.warmup_steps, self.cooldown_steps,
                     max_steps=self.max_steps)

  def first_plan(self, step, elapsed, step_seconds, eval_seconds,
                 measured_from):
    """The run's plan after the measured steps.

    Args:
      step: optimizer steps done.
      elapsed: seconds since training started.
      step_seconds: measured seconds per step.
      eval_seconds: the timed evaluation's seconds (0 without evaluations).
      measured_from: the step the measurement started after.
    Returns:
      The Plan (also `self.plan`).
    Raises:
      BudgetError: the budget cannot hold the schedule.
    """
    budget_seconds, every = self.train_minutes * 60, self.eval_every
    total = plan_train_steps(
        budget_seconds, elapsed, step, step_seconds, self.warmup_steps,
        self.cooldown_steps, every, eval_seconds, max_steps=self.max_steps)
    cooldown = cooldown_steps_for(total, self.warmup_steps,
                                  self.cooldown_steps)
    self.plan = Plan(train_minutes=self.train_minutes, train_steps=total,
                     planned_at_step=step, planned_after_seconds=elapsed,
                     step_seconds=step_seconds, eval_seconds=eval_seconds,
                     cooldown_steps=cooldown, max_steps=self.max_steps)
    self.replan_log = ReplanLog(total)
    logging.info(
        "Planned %d steps for --train_minutes=%g: %.2f steps/s measured over "
        "steps %d-%d%s; warm-up %d, cool-down over the last %d steps%s.",
        total, self.train_minutes, 1 / step_seconds, measured_from, step,
        f", {progress.format_seconds(eval_seconds)} an evaluation"
        if every > 0 else "", self.warmup_steps, cooldown,
        "" if cooldown == self.cooldown_steps else
        f" (shortened from {self.cooldown_steps} to fit)")
    fitting = steps_that_fit(budget_seconds, elapsed, step, step_seconds,
                             every, eval_seconds)
    if fitting > total:
      logging.info("The budget would hold about %d steps; the ceiling of %d "
                   "(--train_steps) ends the run early.", fitting, total)
    return self.plan

  @property
  def planned_here(self):
    """Whether this process made the run's plan (`first_plan`). A resumed
    run's plan was made on another clock, so it is kept as it is: neither
    re-planned nor summarised (even from a checkpoint older than it)."""
    return self.replan_log is not None

  def may_replan(self, step):
    """Whether a budgeted run may re-estimate its plan after `step`: this
    process made the plan, enough steps were taken since, and the cool-down
    has not started."""
    plan = self.plan
    return (self.planned_here and
            step - plan.planned_at_step >= MEASURE_STEPS and
            step < plan.train_steps and
            not cooldown_started(step, plan.train_steps, self.warmup_steps,
                                 self.cooldown_steps))

  def replan(self, step, elapsed, eval_seconds):
    """The plan re-estimated from the step rate since it was made
    (`replanned_train_steps`), or None to keep it. A new plan moves the
    run's end and its cool-down; it is logged when it moves the plan last
    shown by more than REPLAN_LOG_SHARE (else by `show`).

    Args:
      step: optimizer steps done.
      elapsed: seconds since training started.
      eval_seconds: seconds spent in evaluations since the plan was made.
    """
    plan = self.plan
    step_seconds = max(elapsed - plan.planned_after_seconds - eval_seconds,
                       1e-6) / (step - plan.planned_at_step)
    total = replanned_train_steps(
        plan.train_minutes * 60, elapsed, step, step_seconds,
        plan.train_steps, self.warmup_steps, self.cooldown_steps,
        self.eval_every, plan.eval_seconds, plan.max_steps)
    if total is None:
      return None
    cooldown = cooldown_steps_for(total, self.warmup_steps,
                                  self.cooldown_steps)
    self.plan = dataclasses.replace(plan, train_steps=total,
                                    cooldown_steps=cooldown,
                                    replanned_at_step=step)
    self._since = (1 / step_seconds, plan.planned_at_step)
    if self.replan_log.replanned(total):
      self._log_replan()
    return self.plan

  def show(self):
    """Logs the re-plan the log has not shown, if it changed the total of
    the plan last shown: called before a progress line shows the total, so
    that the total never changes without a line saying why."""
    if self.planned_here and self.replan_log.show(self.plan.train_steps):
      self._log_replan()

  def _log_replan(self):
    plan, (rate, since) = self.plan, self._since
    logging.info(
        "Re-planned %d steps for --train_minutes=%g (was %d): %.2f steps/s "
        "since step %d, where the plan measured %.2f; cool-down over the "
        "last %d steps.", plan.train_steps, plan.train_minutes,
        self.replan_log.previous, rate, since, 1 / plan.step_seconds,
        plan.cooldown_steps)
