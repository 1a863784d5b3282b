"""The numbers of a progress line: training statistics between two lines,
the rate of the training steps alone, and the time left."""
import time


class Window:
  """Training statistics accumulated between two progress lines.

  The rate counts training only: time left out with `leave_out` (an
  evaluation run between two lines) is not in it, so that the line after an
  evaluation reports the same steps/s as the others.

  Args:
    step: the step the window starts after.
    clock: a callable returning seconds (time.monotonic; tests pass a fake).
  """

  def __init__(self, step, clock=time.monotonic):
    self.first_step, self._clock = step, clock
    self.start = clock()
    self.left_out = 0.0
    self.totals = {}
    self.count = 0
    self.last = {}

  def add(self, out):
    """Adds one step's outputs (floats: loss, nll, target_tokens,
    source_tokens, grad_norm, learning_rate)."""
    for key in ("loss", "nll", "target_tokens", "source_tokens", "grad_norm"):
      self.totals[key] = self.totals.get(key, 0.0) + out[key]
    self.count += 1
    self.last = out

  def leave_out(self, seconds):
    """Takes `seconds` spent on something other than training out of the
    window's time."""
    self.left_out += seconds

  def stats(self, step):
    """Per-token loss and nll, the last learning rate, the mean gradient norm,
    and steps and tokens (source + target) per second of training."""
    seconds = max(self._clock() - self.start - self.left_out, 1e-9)
    steps = max(step - self.first_step, 1)
    tokens = max(self.totals["target_tokens"], 1.0)
    return {
        "loss": self.totals["loss"] / tokens,
        "nll": self.totals["nll"] / tokens,
        "learning_rate": self.last["learning_rate"],
        "grad_norm": self.totals["grad_norm"] / max(self.count, 1),
        "steps_per_sec": steps / seconds,
        "tokens_per_sec": (self.totals["target_tokens"] +
                           self.totals["source_tokens"]) / seconds,
    }


def evaluations_due(step, train_steps, every):
  """Evaluations a train_and_evaluate run still makes after `step`: one at
  every multiple of `every` up to `train_steps` (none when every <= 0), and
  the final one when `train_steps` is not such a multiple."""
  if step >= train_steps:
    return 0
  if every <= 0:
    return 1
  periodic = train_steps // every - step // every
  return periodic + (0 if train_steps % every == 0 else 1)


def seconds_left(step, train_steps, steps_per_sec, evaluations=0,
                 seconds_per_evaluation=0.0):
  """Time to the end of training: the steps left at the measured rate plus
  the evaluations still due at the last one's duration."""
  return ((train_steps - step) / max(steps_per_sec, 1e-9) +
          evaluations * seconds_per_evaluation)


def format_duration(seconds):
  """3725.0 -> "1h02m", 250.0 -> "4m10s", 12.3 -> "12s"."""
  seconds = int(round(seconds))
  if seconds >= 3600:
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
  if seconds >= 60:
    return f"{seconds // 60}m{seconds % 60:02d}s"
  return f"{seconds}s"


def format_seconds(seconds):
  """A duration at the precision it has: 0.0004 -> "0.4ms", 0.035 ->
  "35ms", 4.44 -> "4.4s", 95.2 -> "1m35s" (`format_duration` from 10 s).
  Each form is chosen by the value as it prints: 9.96 -> "10s", not
  "10.0s"."""
  if round(seconds * 1000, 1) < 10:
    return f"{seconds * 1000:.1f}ms"
  if round(seconds * 1000) < 100:
    return f"{seconds * 1000:.0f}ms"
  if round(seconds, 1) < 10:
    return f"{seconds:.1f}s"
  return format_duration(seconds)


# A budgeted run prints about this many progress lines, whatever the
# machine's step rate (a fast machine would otherwise print one every
# log_every_steps, dozens in two minutes).
PROGRESS_LINES = 8


class LinePacer:
  """Spaces the console's progress lines at least `min_seconds` apart (the
  summaries are still written at every logged step).

  Args:
    min_seconds: 0 prints every line asked for.
    clock: a callable returning seconds (time.monotonic; tests pass a fake).
  """

  def __init__(self, min_seconds, clock=time.monotonic):
    self.min_seconds, self._clock = min_seconds, clock
    self._last = None

  @classmethod
  def for_budget(cls, budget_seconds, clock=time.monotonic):
    """PROGRESS_LINES lines over a budget; every line without one (0)."""
    return cls(budget_seconds / PROGRESS_LINES if budget_seconds > 0 else 0.0,
               clock)

  def due(self, last=False):
    """Whether to print a line now (`last`: the run's last step, always)."""
    now = self._clock()
    if last or self._last is None or now - self._last >= self.min_seconds:
      self._last = now
      return True
    return False
