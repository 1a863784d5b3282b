"""A clock the test moves: `clock()` returns `clock.now` (seconds), which
starts at 100 and changes only when the test sets it."""


class FakeClock:
  def __init__(self, now=100.0):
    self.now = now

  def __call__(self):
    return self.now
