"""A plugin folder for the fault tests: `held_reverse`, a small
algorithmic_reverse whose data generation waits until TMP_DIR/release exists
(it writes TMP_DIR/held first), so that a test can act while the chief is
still generating data and the other workers wait for it."""
import os
import time

from t2tlite.problem import register_problem
from t2tlite.problems.algorithmic import AlgorithmicReverse

HELD, RELEASE = "held", "release"
_LONGEST_HOLD_SECS = 240


def _busy(seconds):
  end = time.time() + seconds
  while time.time() < end:
    sum(range(1000))


@register_problem("held_reverse")
class HeldReverse(AlgorithmicReverse):
  num_samples = {"train": 2_000, "dev": 100, "test": 100}

  def generate_samples(self, split, tmp_dir, raw_data_dir=None):
    release = os.path.join(tmp_dir, RELEASE)
    if not os.path.exists(release):
      with open(os.path.join(tmp_dir, HELD), "w"):
        pass
      deadline = time.time() + _LONGEST_HOLD_SECS
      while not os.path.exists(release):
        if time.time() > deadline:
          raise TimeoutError(f"{release} did not appear")
        _busy(0.1)  # Python work, as real data generation is
    return super().generate_samples(split, tmp_dir, raw_data_dir)
