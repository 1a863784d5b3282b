"""A server shared by a module's tests that any of them may stop.

The tests of SIGTERM end the server they are given; the others need a live
one. Sharing one process keeps a module to one start-up (seconds of loading
TensorFlow), and asking for it through `Restartable.get` starts a fresh one
only after a test has stopped it: so the tests pass in any order, and in the
file's own order (the stopping test last) start it once.
"""


class Restartable:
  """The live value of `start`, started again when its process has ended.

  Args:
    start: a function of no arguments that starts a process and returns
      (value, subprocess.Popen); its caller owns the cleanup (for example
      train_helpers.processes()).
  """

  def __init__(self, start):
    self._start = start
    self._value, self._process = None, None
    self.starts = 0  # processes started so far

  def get(self):
    """The value of a process that is running, starting one if needed."""
    if self._process is None or self._process.poll() is not None:
      self._value, self._process = self._start()
      self.starts += 1
    return self._value
