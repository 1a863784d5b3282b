"""How decoding fits the machine that runs it: concurrent searches and
their CPU threads, whether the int8 kernel computes here, and decode
hparams settled for both (`settle`).
"""
import dataclasses
import os

from absl import logging
import tensorflow as tf

from t2tlite import hardware
from t2tlite import precision


def cpu_cores():
  """The CPU cores this process may run on."""
  return len(os.sched_getaffinity(0))


def searches_for(hp):
  """How many concurrent searches decode a batch: hp.concurrent_searches,
  or when it is 0 (auto) 2 on a CPU with two or more cores and 1 otherwise.

  On a CPU much of a step is work too small to share between cores (the
  attention products, the search's top-k and reorderings, the smaller
  matmuls): two searches over half a batch each, each on its own core
  (`set_search_threads`), keep both busy (BUILD_NOTES.md, "Concurrent
  searches"). A GPU gets 1: there one search over the whole batch uses the
  device best.
  """
  if hp.concurrent_searches:
    return hp.concurrent_searches
  if tf.config.list_physical_devices("GPU"):
    return 1
  return 2 if cpu_cores() >= 2 else 1


def threads_per_search(searches, cores=None):
  """TensorFlow intra-op threads that give each of `searches` concurrent
  searches its share of the CPU's `cores` (default: this process's), at
  least one."""
  return max(1, (cores or cpu_cores()) // searches)


def set_search_threads(searches):
  """For programs that decode on a CPU: gives each of `searches` concurrent
  searches its own cores by setting TensorFlow's intra-op threads to
  `threads_per_search(searches)` (with two searches on two cores, one
  thread an op: the searches then run side by side without contending for
  the same threads; BUILD_NOTES.md, "Concurrent searches").

  A process-wide setting: call it before TensorFlow runs its first op.
  It does nothing for one search, nor when TF_NUM_INTRAOP_THREADS is set
  (the user's choice), and logs a warning if TensorFlow already started.

  Returns:
    the intra-op threads set, or None if it left them alone.
  """
  if searches <= 1 or os.environ.get("TF_NUM_INTRAOP_THREADS"):
    return None
  threads = threads_per_search(searches)
  try:
    tf.config.threading.set_intra_op_parallelism_threads(threads)
  except RuntimeError as error:  # TensorFlow's context already exists
    logging.warning("%d concurrent searches keep TensorFlow's thread "
                    "settings (%s): they are faster with %d intra-op "
                    "thread(s), set before TensorFlow starts.", searches,
                    error, threads)
    return None
  logging.info("Decoding as %d concurrent searches, %d intra-op thread(s) "
               "an op.", searches, threads)
  return threads


_int8_reasons_logged = set()


def settle(hp, device=None, int8_chosen_per_call=False):
  """Decode hparams as they run on this machine, settled once, before a
  search is traced (by a Decoder, an export, a command).

  - concurrent_searches 0 (auto) becomes `searches_for(hp)`'s number, so
    that every trace runs, and an export records, the searches chosen here;
  - where the int8 kernel cannot compute (`precision.int8_support`: oneDNN
    off, no AVX2, a GPU), int8 is turned off, with one log line naming the
    reason (once per reason and process), and the search multiplies in the
    compute precision instead; unless `int8_chosen_per_call` (an export:
    its graph picks int8 or not at each request, wherever it is served,
    `search.int8_or_float`).

  Settled hparams settle to themselves.

  Args:
    hp: DecodeHParams.
    device: a hardware.Device; default this machine (described only for
      int8).
    int8_chosen_per_call: keep int8 where it cannot compute here.
  Returns:
    (the settled DecodeHParams; the int8 weights' layout, weights_first,
    for `search.fixed_search_weights`).
  """
  hp = dataclasses.replace(hp, concurrent_searches=searches_for(hp))
  if not hp.int8:
    return hp, False
  with tf.init_scope():  # describing the machine may run ops: not in a trace
    support = precision.int8_support(device or hardware.describe_device())
  if support.available or int8_chosen_per_call:
    return hp, support.weights_first
  if support.reason not in _int8_reasons_logged:
    _int8_reasons_logged.add(support.reason)
    logging.warning("int8=true is not available here, so decoding runs "
                    "without int8: %s.", support.reason)
  return dataclasses.replace(hp, int8=False), False
