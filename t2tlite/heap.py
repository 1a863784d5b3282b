"""The commands' C heap keeps what TensorFlow frees for its next step.

TensorFlow's CPU kernels take their buffers from the C library's malloc.
glibc gives each thread's arena memory in small increments and hands the
freed top of a heap back to the system; a training step frees and takes
the same buffers again, so every step faults the same pages back in and
zeroes them. On the quick start's training (Xeon) that
was 3.7 million page faults in 300 steps; keeping 64 MiB more at the top
of each heap (glibc's M_TOP_PAD) leaves 0.14 million, and the quick start
trains 1.4-1.5x the steps in its 2 minutes, for up to 7% more resident
memory (docs/performance_log.md, 2026-12-01, "The commands' heap keeps
what TensorFlow frees"). A larger model's step, or a decoding one, is
its arithmetic: as fast as before.

The commands call `keep_freed_memory` at their start (through
t2tlite.bin); library code never does, as it leaves the process's
allocator to the program that imports it. It changes nothing where the C
library is not glibc, or where the user set glibc's own MALLOC_TOP_PAD_.
"""
import ctypes
import os
import platform

TOP_PAD_BYTES = 64 << 20
_M_TOP_PAD = -2  # glibc's malloc.h
USER_SETTING = "MALLOC_TOP_PAD_"


def applies(environ=None):
  """Whether `keep_freed_memory` would change anything: the C library is
  glibc and `environ` (default os.environ) has no MALLOC_TOP_PAD_."""
  environ = os.environ if environ is None else environ
  return USER_SETTING not in environ and platform.libc_ver()[0] == "glibc"


def keep_freed_memory(top_pad_bytes=TOP_PAD_BYTES, environ=None):
  """Asks glibc to keep `top_pad_bytes` more at the top of every heap it
  grows or trims, unless `applies(environ)` is False. Returns whether it
  did."""
  if not applies(environ):
    return False
  try:
    libc = ctypes.CDLL("libc.so.6")
  except OSError:
    return False
  return libc.mallopt(_M_TOP_PAD, int(top_pad_bytes)) == 1
