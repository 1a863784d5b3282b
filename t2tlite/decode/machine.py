"""How decoding fits the machine that runs it: concurrent searches and
their CPU threads, whether the int8 kernel computes here and the compute
precision, settled once into a `SettledDecode` (`settle`).

    settled = settle(hp, "auto", set_threads=True)  # a command, first
    model = load(dtype=settled.precision.keras_policy)
    decoder = Decoder(model, vocab, settled)
"""
import dataclasses
import os

from absl import logging
import tensorflow as tf

from t2tlite import hardware
from t2tlite import precision as precision_lib
from t2tlite.decode.settings import DecodeHParams


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
  logging.info("Decoding a batch as up to %d concurrent searches (one a "
               "line when it has fewer), %d intra-op thread(s) an op.",
               searches, threads)
  return threads


_int8_reasons_logged = set()


@dataclasses.dataclass(frozen=True)
class SettledDecode:
  """Decode hparams as they run on this machine (`settle`): what the
  searches, a Decoder and an export take, never raw hparams.

  Attributes:
    hp: the DecodeHParams the searches run: concurrent_searches a number
      (never 0, auto), int8 whether the graph holds an int8 search.
    threads_per_search: TensorFlow's intra-op threads that `settle` set for
      the searches, or None (left as they were).
    int8_per_call: the graph picks the int8 search or the one without at
      each call, wherever it runs (an export: `search.int8_or_float`);
      otherwise int8 is decided here, once.
    weights_first: the int8 kernels' layout (`precision.int8_support`).
    laid_out_kernels: a float32 search's decoder kernels laid out for a
      one-batch matmul with transpose_b (`linear.decoding_kernels`), the
      form oneDNN's AVX2 GEMM runs fast; False where oneDNN may use AVX-512,
      whose 2-D GEMM runs them fastest as stored (`settle`).
    int8_reason: why int8 is on or off here; "" when not asked for.
    precision: the `precision.Choice` the model computes in, or None when
      the caller built its model in a precision of its own.
  """
  hp: DecodeHParams
  threads_per_search: int | None = None
  int8_per_call: bool = False
  weights_first: bool = False
  laid_out_kernels: bool = True
  int8_reason: str = ""
  precision: precision_lib.Choice | None = None

  @property
  def searches(self):
    """Concurrent searches over a batch's rows."""
    return self.hp.concurrent_searches

  @property
  def int8(self):
    """Whether the graph holds an int8 search (run at every call unless
    int8_per_call)."""
    return self.hp.int8


def settle(hp, compute=None, device=None, int8_per_call=False,
           set_threads=False):
  """Decode hparams settled for this machine, once, at the boundary: by a
  command before TensorFlow runs (`set_threads`), by a server for each
  request's hparams, by an export before it traces.

  - concurrent_searches 0 (auto) becomes `searches_for(hp)`'s number, so
    that every trace runs, and an export records, the searches chosen here;
    with `set_threads` each gets its share of the cores
    (`set_search_threads`, before TensorFlow runs its first op);
  - where the int8 kernel cannot compute (`precision.int8_support`: oneDNN
    off, no AVX2, a GPU), int8 is turned off, with one log line naming the
    reason (once per reason and process), and the search multiplies in the
    compute precision instead; unless `int8_per_call` (an export: its
    graph picks int8 or not at each request, wherever it is served);
  - a float32 search's decoder kernels are laid out for oneDNN's AVX2
    GEMM unless oneDNN may use AVX-512 here
    (`hardware.onednn_may_use_avx512`: decode_base float32 1.12x as
    stored on a Zen 4; BUILD_NOTES.md, "Decoding layouts"); an export
    lays them out wherever it is made (`exporter`);
  - `compute`, a --mixed_precision value ("auto" or a precision), becomes
    a `precision.Choice` (the caller announces it and builds its model in
    it).

  Args:
    hp: DecodeHParams.
    compute: None, or the requested compute precision.
    device: a hardware.Device; default this machine (described only for
      int8 or `compute`).
    int8_per_call: an export's: its graph picks int8 or not at each call,
      wherever it runs (int8 is kept where it cannot compute here).
    set_threads: set TensorFlow's intra-op threads for the searches (a
      process-wide setting: commands only).
  Returns:
    a SettledDecode.
  """
  if isinstance(hp, SettledDecode):
    raise TypeError("settle takes DecodeHParams; these are settled already")
  hp = dataclasses.replace(hp, concurrent_searches=searches_for(hp))
  threads = set_search_threads(hp.concurrent_searches) if set_threads else None
  if hp.int8 or compute:
    with tf.init_scope():  # describing the machine may run ops: no trace
      device = device or hardware.describe_device()
  choice = precision_lib.choose(compute, device) if compute else None
  settled = SettledDecode(
      hp, threads, precision=choice,
      laid_out_kernels=not hardware.onednn_may_use_avx512())
  if not hp.int8:
    return settled
  support = precision_lib.int8_support(device)
  if support.available or int8_per_call:
    return dataclasses.replace(settled, int8_per_call=int8_per_call,
                               weights_first=support.weights_first,
                               int8_reason=support.reason)
  if support.reason not in _int8_reasons_logged:
    _int8_reasons_logged.add(support.reason)
    logging.warning("int8=true is not available here, so decoding runs "
                    "without int8: %s.", support.reason)
  return dataclasses.replace(settled, hp=dataclasses.replace(hp, int8=False),
                             int8_reason=support.reason)
