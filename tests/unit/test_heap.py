"""The commands' C heap keeps what is freed for the next allocations
(t2tlite.heap): a process that imported t2tlite.bin faults far fewer
pages back in than one that imported the library only; the user's own
glibc setting, and other C libraries, are left alone."""
import os
import subprocess
import sys

import pytest

from t2tlite import heap

# A thread (with a glibc arena of its own, as TensorFlow's threads have)
# takes and frees the same buffers round after round, as a training step
# does; prints the page faults.
ROUNDS = """
import importlib, resource, sys, threading
import numpy as np
importlib.import_module(sys.argv[1])

def rounds():
  for _ in range(40):
    buffers = [np.ones(300_000 + 10_000 * i) for i in range(12)]  # 2-3 MB
    del buffers

before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
thread = threading.Thread(target=rounds)
thread.start()
thread.join()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def page_faults(module):
  env = {k: v for k, v in os.environ.items() if k != heap.USER_SETTING}
  result = subprocess.run([sys.executable, "-c", ROUNDS, module],
                          capture_output=True, text=True, env=env,
                          timeout=120)
  assert result.returncode == 0, result.stderr[-3000:]
  return int(result.stdout.split()[-1])


@pytest.mark.skipif(not heap.applies(environ={}),
                    reason="the C library is not glibc")
def test_a_command_faults_fewer_pages_than_the_library_alone():
  commands, library = page_faults("t2tlite.bin"), page_faults("t2tlite")
  # The buffers' first touch is about 9,000 faults either way (330,000
  # when a trimmed heap faults them in again at every round).
  assert commands * 4 < library, (commands, library)


def test_the_users_setting_and_other_c_libraries_are_left_alone(
    monkeypatch):
  assert not heap.keep_freed_memory(environ={heap.USER_SETTING: "131072"})
  assert heap.applies(environ={}) == (heap.platform.libc_ver()[0] == "glibc")
  monkeypatch.setattr(heap.platform, "libc_ver", lambda: ("", ""))
  assert not heap.applies(environ={})
  assert not heap.keep_freed_memory(environ={})
