"""The commands' log lines, short enough to read:

    15:12:27 budget: Planned 857 steps for --train_minutes=1: ...
    15:12:28 WARNING precision: ...

the time, the level when it is not INFO, and the component (the module that
logged). absl's own prefix (`I1127 15:12:27.980334 140696929827712
trainer.py:704]`, with the thread id and the source line) comes back with
--verbosity (-v), for a person debugging.
"""
import logging
import time

from absl import logging as absl_logging


class ShortFormatter(logging.Formatter):
  """`HH:MM:SS [LEVEL ]component: message` (LEVEL only when not INFO)."""

  def format(self, record):
    level = "" if record.levelno == logging.INFO else f"{record.levelname} "
    return stamped(f"{level}{record.module}", record.getMessage(),
                   record.created) + (
        "\n" + self.formatException(record.exc_info)
        if record.exc_info else "")


def stamped(component, message, created=None):
  """`HH:MM:SS component: message`: a log line's form, for the lines a
  command prints on stdout beside its log (t2t-serve's URL, say)."""
  clock = time.strftime("%H:%M:%S", time.localtime(created))
  return f"{clock} {component}: {message}"


def install(verbosity_given):
  """Gives absl's handler the short lines, unless the user passed
  --verbosity (then absl's prefix stays, thread id and source line)."""
  if not verbosity_given:
    absl_logging.get_absl_handler().setFormatter(ShortFormatter())
