"""The progress line's numbers: the training rate without the evaluations,
and the time left with them."""
import pytest

from t2tlite.train import progress

from fake_clock import FakeClock


def _step(tokens=1000.0):
  return {"loss": 2.0 * tokens, "nll": 1.5 * tokens, "target_tokens": tokens,
          "source_tokens": tokens, "grad_norm": 0.5, "learning_rate": 1e-3}


def test_an_evaluation_between_two_lines_leaves_the_rate_unchanged():
  clock = FakeClock()
  rates = []
  for evaluation_seconds in (0.0, 30.0):
    window = progress.Window(1000, clock=clock)
    for _ in range(100):
      clock.now += 0.5  # 2 steps/s of training
      window.add(_step())
    clock.now += evaluation_seconds
    window.leave_out(evaluation_seconds)
    stats = window.stats(1100)
    rates.append((stats["steps_per_sec"], stats["tokens_per_sec"]))
  assert rates[0] == rates[1] == (pytest.approx(2.0), pytest.approx(4000.0))
  assert stats["loss"] == pytest.approx(2.0)
  assert stats["nll"] == pytest.approx(1.5)
  # Without leave_out the evaluation would count as training time.
  window = progress.Window(0, clock=clock)
  window.add(_step())
  clock.now += 1.0 + 30.0
  assert window.stats(1)["steps_per_sec"] == pytest.approx(1 / 31)


@pytest.mark.parametrize("step,train_steps,every,due", [
    (1100, 4642, 1000, 4),   # at 2,000, 3,000, 4,000 and the final one
    (4000, 4642, 1000, 1),   # the final one only
    (1100, 4000, 1000, 3),   # the last periodic one is the final one
    (4000, 4000, 1000, 0),   # training is over
    (10, 100, 0, 1),         # no periodic evaluations: the final one
    (4642, 4642, 1000, 0),   # the last step: the final one is made
])
def test_evaluations_due(step, train_steps, every, due):
  assert progress.evaluations_due(step, train_steps, every) == due


def test_seconds_left_counts_steps_and_evaluations():
  # 3,542 steps at 1.35 steps/s, 4 evaluations of 8 s.
  assert progress.seconds_left(1100, 4642, 1.35, 4, 8.0) == pytest.approx(
      3542 / 1.35 + 32)
  assert progress.seconds_left(1100, 4642, 1.35) == pytest.approx(3542 / 1.35)


def test_format_duration():
  assert progress.format_duration(3725.0) == "1h02m"
  assert progress.format_duration(250.0) == "4m10s"
  assert progress.format_duration(12.3) == "12s"


def test_format_duration_rounds_and_carries_to_the_next_unit():
  assert progress.format_duration(3600.0) == "1h00m"
  assert progress.format_duration(60.0) == "1m00s"
  assert progress.format_duration(119.6) == "2m00s"
  assert progress.format_duration(59.4) == "59s"


def test_format_seconds_keeps_the_figures_of_a_short_duration():
  assert progress.format_seconds(0.0004) == "0.4ms"
  assert progress.format_seconds(0.035) == "35ms"
  assert progress.format_seconds(4.44) == "4.4s"
  assert progress.format_seconds(95.2) == "1m35s"
  # At a form's upper bound, the next form: as they print once rounded.
  assert progress.format_seconds(0.00996) == "10ms"
  assert progress.format_seconds(0.0996) == "0.1s"
  assert progress.format_seconds(9.96) == "10s"


def test_a_budgeted_run_prints_about_progress_lines_lines_whatever_its_rate():
  clock = FakeClock()
  pacer = progress.LinePacer.for_budget(120.0, clock)
  printed = 0
  for _ in range(1200):  # a line asked for every 0.1 s, 120 s
    printed += pacer.due()
    clock.now += 0.1
  assert printed == progress.PROGRESS_LINES
  assert pacer.due(last=True)  # the last step's line always
  assert not pacer.due()


def test_without_a_budget_every_line_prints():
  clock = FakeClock()
  pacer = progress.LinePacer.for_budget(0, clock)
  assert all(pacer.due() for _ in range(50))


def test_the_line_has_the_mean_gradient_norm_and_the_last_learning_rate():
  clock = FakeClock()
  window = progress.Window(0, clock=clock)
  for grad_norm, learning_rate in ((0.5, 1e-3), (1.5, 2e-3), (1.0, 3e-3)):
    clock.now += 1.0
    window.add(dict(_step(), grad_norm=grad_norm,
                    learning_rate=learning_rate))
  stats = window.stats(3)
  assert stats["grad_norm"] == pytest.approx(1.0)
  assert stats["learning_rate"] == 3e-3


def test_two_evaluations_between_two_lines_are_both_left_out():
  clock = FakeClock()
  window = progress.Window(0, clock=clock)
  for _ in range(10):
    clock.now += 0.5
    window.add(_step())
  for evaluation_seconds in (20.0, 30.0):
    clock.now += evaluation_seconds
    window.leave_out(evaluation_seconds)
  assert window.stats(10)["steps_per_sec"] == pytest.approx(2.0)
