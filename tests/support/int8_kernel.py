"""Skipping the tests that need the int8 kernel where it cannot compute
(TensorFlow's oneDNN path off: TF_ENABLE_ONEDNN_OPTS=0, or an AVX2-only CPU
whose TensorFlow was loaded before t2tlite); asked of the kernel itself."""
import pytest

from t2tlite import onednn
from t2tlite.layers import int8

import require_all


def unavailable_reason():
  """None where the int8 kernel computes in this process, else why."""
  if bool(int8.kernel_works()):
    return None
  return ("the int8 kernel does not compute in this process: "
          + onednn.describe(onednn.enabled()))


needs_int8 = pytest.mark.skipif(
    unavailable_reason() is not None,
    reason=require_all.MACHINE + str(unavailable_reason()))
