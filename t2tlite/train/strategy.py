"""Which tf.distribute strategy a training run uses.

- Several workers named in `TF_CONFIG`: `MultiWorkerMirroredStrategy` (each
  worker runs the same command; each uses its visible GPUs, or its CPU).
- Otherwise `worker_gpu` devices of this machine (0 = all visible GPUs):
  `MirroredStrategy` over two or more GPUs, `OneDeviceStrategy` on a single
  GPU or on the CPU.
- On a machine without GPUs, `worker_gpu=N` (N > 1) splits the CPU into N
  logical devices and mirrors over them. This is for testing multi-device code
  on a laptop or CI: it gives the same results as N GPUs would, not a speedup.

Logical devices can only be configured before TensorFlow initializes its
runtime, so `make_strategy` must be called before any other TensorFlow work.

Across workers, a peer whose address refuses connections for a few seconds
(it died), or that answers no probe for `worker_timeout_secs` (frozen, cut
off), is lost (`t2tlite.train.peer_watch`, probing with `probe_peers`). Every
collective (gradient all-reduce, the per-step agreement of `any_workers`)
waits longer, `collective_timeout_secs`: past the watch's bounds, so that the
watch reports a lost peer first, and a peer that answers but never joins
still ends the wait.
"""
import functools
import itertools
import json
import os
import signal
import threading
import weakref

import tensorflow as tf
# The coordination service must be configured before the strategy starts the
# runtime, and TensorFlow has no public API for its heartbeat timeout.
from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
from tensorflow.python.eager import context

from t2tlite.train import peer_watch

# A barrier that may wait on slow work of one worker (the chief generating
# data or decoding dev) rather than on a lost one: a day. A lost worker is
# still found by the peer watch (peer_watch.py).
UNBOUNDED_SECS = 24 * 3600
# Workers and the chief run collectives; parameter servers are not supported.
_TRAINING_JOBS = ("chief", "worker")
# The worker timeout each multi-worker strategy was made with.
_WORKER_TIMEOUTS = weakref.WeakKeyDictionary()
# Numbers the leave_together exchanges of this process (unique keys).
_LEAVE_ROUNDS = itertools.count()
# How long one wait for a key of the coordination service lasts before the
# next: short, so that the peer watch's thread keeps running in between.
_KEY_POLL_MS = 1000


def _cluster_workers(tf_config):
  """Number of training tasks (chief + workers) that TF_CONFIG names."""
  if not tf_config:
    return 0
  try:
    cluster = json.loads(tf_config).get("cluster", {})
  except json.JSONDecodeError as e:
    raise ValueError(f"TF_CONFIG is not valid JSON: {e}") from None
  return len(cluster.get("chief", [])) + len(cluster.get("worker", []))


def split_cpu(num_devices):
  """Splits the CPU into `num_devices` logical devices /cpu:0 ... /cpu:N-1.

  Raises:
    RuntimeError: TensorFlow has already initialized its devices.
  """
  cpu = tf.config.list_physical_devices("CPU")[0]
  try:
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices)
  except RuntimeError as e:
    raise RuntimeError(
        f"Cannot split the CPU into {num_devices} logical devices: TensorFlow "
        f"is already initialized ({e}). Create the strategy first.") from None


def collective_timeout_secs(worker_timeout_secs):
  """How long a collective waits for its peers, given the worker timeout.

  Past `peer_watch.bound_secs`: a lost peer is reported by the watch while
  the collective still waits, and never through TensorFlow's abort of the
  pending collectives at their timeout (which has crashed the process, see
  BUILD_NOTES.md). The collective timeout remains for a peer that answers
  probes but never joins (stuck in its own code).
  """
  return peer_watch.bound_secs(worker_timeout_secs) + worker_timeout_secs


def _multi_worker_strategy(tf_config, worker_timeout_secs):
  """MultiWorkerMirroredStrategy whose collectives and heartbeats time out.

  The coordination service's heartbeat timeout is longer than the collective
  one, so that a frozen peer is reported by the trainer rather than through
  the service's own abort. SIGTERM keeps its default action.
  """
  cluster = json.loads(tf_config)["cluster"]
  jobs = [coordination_config_pb2.CoordinatedJob(name=job,
                                                 num_tasks=len(cluster[job]))
          for job in _TRAINING_JOBS if job in cluster]
  leader = "chief" if "chief" in cluster else "worker"
  collective_timeout = collective_timeout_secs(worker_timeout_secs)
  context.context().configure_coordination_service(
      service_type="standalone",
      service_leader=f"/job:{leader}/replica:0/task:0",
      heartbeat_timeout_in_ms=int(1000 * (
          collective_timeout + worker_timeout_secs)),
      shutdown_barrier_timeout_in_ms=int(1000 * worker_timeout_secs),
      coordinated_jobs=jobs)
  strategy = tf.distribute.MultiWorkerMirroredStrategy(
      communication_options=tf.distribute.experimental.CommunicationOptions(
          timeout_seconds=collective_timeout))
  _WORKER_TIMEOUTS[strategy] = worker_timeout_secs
  # The runtime just replaced SIGTERM's action with a handler that only
  # records it for PreemptionCheckpointHandler, which t2tlite does not use
  # (BUILD_NOTES.md, "Worker faults"). SIGTERM ends the process again, as it
  # ends a single one, until the trainer handles it (preemption.StopSignals).
  if threading.current_thread() is threading.main_thread():
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
  return strategy


def make_strategy(worker_gpu=0, tf_config=None,
                  worker_timeout_secs=peer_watch.DEFAULT_WORKER_TIMEOUT_SECS):
  """The strategy for this process.

  Args:
    worker_gpu: devices to use on this machine; 0 = every visible GPU. Without
      GPUs, N > 1 splits the CPU into N logical devices (for tests).
    tf_config: the TF_CONFIG JSON; None reads the environment variable.
    worker_timeout_secs: with several workers, how long a peer may answer no
      probe before it is lost (`worker_timeout_secs`).
  Returns:
    A tf.distribute.Strategy.
  Raises:
    ValueError: more GPUs asked for than are visible, or a negative count.
  """
  if worker_gpu < 0:
    raise ValueError(f"worker_gpu={worker_gpu}: expected 0 (all visible "
                     "GPUs) or a positive number of devices")
  if worker_timeout_secs <= 0:
    raise ValueError(f"worker_timeout_secs={worker_timeout_secs}: expected "
                     "a positive number of seconds")
  if tf_config is None:
    tf_config = os.environ.get("TF_CONFIG", "")
  if _cluster_workers(tf_config) > 1:
    return _multi_worker_strategy(tf_config, worker_timeout_secs)
  gpus = tf.config.list_physical_devices("GPU")
  if gpus:
    if worker_gpu > len(gpus):
      raise ValueError(f"worker_gpu={worker_gpu} but only {len(gpus)} GPUs "
                       "are visible")
    count = worker_gpu or len(gpus)
    devices = [f"/gpu:{i}" for i in range(count)]
  elif worker_gpu > 1:
    split_cpu(worker_gpu)
    devices = [f"/cpu:{i}" for i in range(worker_gpu)]
  else:
    devices = ["/cpu:0"]
  if len(devices) == 1:
    return tf.distribute.OneDeviceStrategy(devices[0])
  return tf.distribute.MirroredStrategy(devices)


def is_multi_worker(strategy):
  return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def is_chief(strategy):
  """True on the process that writes checkpoints, summaries and run files."""
  if not is_multi_worker(strategy):
    return True
  resolver = strategy.cluster_resolver
  return (resolver.task_type == "chief" or
          (resolver.task_type == "worker" and resolver.task_id == 0 and
           "chief" not in resolver.cluster_spec().as_dict()))


def task_id(strategy):
  """This worker's index (0 on a single machine)."""
  if not is_multi_worker(strategy):
    return 0
  return strategy.cluster_resolver.task_id


def worker_timeout_secs(strategy):
  """The worker timeout of a multi-worker strategy from `make_strategy`."""
  return _WORKER_TIMEOUTS.get(strategy,
                              peer_watch.DEFAULT_WORKER_TIMEOUT_SECS)


def task_name(strategy):
  """"/job:worker/task:1": this process in the cluster."""
  resolver = strategy.cluster_resolver
  return f"/job:{resolver.task_type}/task:{resolver.task_id}"


@functools.lru_cache(maxsize=None)
def _flags_sum(strategy, timeout_secs):
  """A tf.function summing a float vector over every replica of `strategy`."""
  options = tf.distribute.experimental.CommunicationOptions(
      timeout_seconds=timeout_secs)

  def replica_sum(values):
    return tf.distribute.get_replica_context().all_reduce(
        tf.distribute.ReduceOp.SUM, tf.identity(values), options=options)

  @tf.function
  def flags_sum(values):
    per_replica = strategy.run(replica_sum, args=(values,))
    return strategy.experimental_local_results(per_replica)[0]

  return flags_sum


def any_workers(strategy, *flags, timeout_secs=None):
  """For each flag, True if it is true on any worker; a barrier for all.

  Workers must take some decisions together (checkpointing is collective), and
  calling this on every worker also waits for the slowest one. On a single
  machine it returns the flags at once.

  Args:
    strategy: the training strategy.
    *flags: booleans of this worker.
    timeout_secs: how long to wait for the other workers; None = the
      strategy's collective timeout.
  Returns:
    A tuple of bools, one per flag.
  """
  if not is_multi_worker(strategy):
    return tuple(bool(flag) for flag in flags)
  sums = _flags_sum(strategy, timeout_secs)(
      tf.constant([float(bool(flag)) for flag in flags]))
  return tuple(bool(value > 0) for value in sums.numpy())


def chief_values(strategy, values, timeout_secs=None):
  """The chief's `values` on every worker, so that all take one decision.

  Each worker times its own steps; a budget's plan (and its re-estimates)
  must still be the same everywhere, or the workers would stop at different
  steps and wait on each other's collectives. On a single machine it
  returns the values at once.

  Args:
    strategy: the training strategy.
    values: numbers of this worker (only the chief's are kept); exact up to
      2**24 for integers (float32).
    timeout_secs: as in `any_workers`.
  Returns:
    A tuple of floats: the chief's values.
  """
  if not is_multi_worker(strategy):
    return tuple(float(value) for value in values)
  sums = _flags_sum(strategy, timeout_secs)(
      tf.constant(_chief_share(values, is_chief(strategy))))
  return _chief_from_sums(sums.numpy())


def _chief_share(values, chief):
  """The vector each replica of a worker adds up in `chief_values`: on the
  chief the values and a 1 (which counts its replicas: workers may have
  different numbers of devices), elsewhere zeros."""
  if chief:
    return [float(value) for value in values] + [1.0]
  return [0.0] * (len(values) + 1)


def _chief_from_sums(sums):
  """The chief's values from the sum over every replica of `_chief_share`."""
  return tuple(float(value) / float(sums[-1]) for value in sums[:-1])


def wait_for_all_workers(strategy):
  """Waits for every worker, however long one takes (e.g. generating data)."""
  any_workers(strategy, True, timeout_secs=UNBOUNDED_SECS)


def leave_together(strategy, peer_left=None):
  """Returns once this worker may exit without stranding a peer.

  TensorFlow's collectives pull: a worker fetches its share of the data from
  each peer's server. One that has its result may still be needed by a
  slower peer, and if it exits at once that peer waits forever on its last
  collective (then finds it lost). So, after the last collective, the chief
  announces that it is done through the coordination service (which it
  hosts) and waits until every other worker has acknowledged; the others
  wait for the announcement, acknowledge and return. The last message goes
  to the chief's own service, so nobody waits on a process that has left.
  Waits without a time limit: a lost peer is found by the peer watch
  (`preemption.reporting_lost_workers`), which runs meanwhile; the chief
  passes `peer_left` each peer that acknowledged (and may now exit), so that
  the watch no longer counts it. On a single machine it returns at once.
  """
  if not is_multi_worker(strategy):
    return
  prefix = f"t2tlite/leave/{next(_LEAVE_ROUNDS)}/"
  if is_chief(strategy):
    context.context().set_config_key_value(prefix + "chief", "done")
    for peer in peer_names(strategy):
      _wait_for_key(prefix + peer)
      if peer_left is not None:
        peer_left(peer)
  else:
    _wait_for_key(prefix + "chief")
    context.context().set_config_key_value(prefix + task_name(strategy),
                                           "done")


def _wait_for_key(key):
  """Waits until `key` is set in the coordination service."""
  while True:
    try:
      context.context().get_config_key_value(key, _KEY_POLL_MS)
      return
    except tf.errors.DeadlineExceededError:
      continue


def peer_addresses(strategy):
  """{"/job:worker/task:1": "host:port"} for the other training tasks."""
  cluster = strategy.cluster_resolver.cluster_spec().as_dict()
  addresses = {f"/job:{job}/task:{index}": address
               for job in _TRAINING_JOBS
               for index, address in enumerate(cluster.get(job, []))}
  del addresses[task_name(strategy)]
  return addresses


def peer_names(strategy):
  """Names ("/job:worker/task:1") of the other training tasks."""
  return list(peer_addresses(strategy))


def _probe(peer, address, timeout_secs):
  """ANSWERED, REFUSED or SILENT (peer_watch's outcomes). TensorFlow's probe
  fails at once when the connection is refused, but also for other reasons
  (a name that does not resolve yet, its channel backing off after a
  failure): REFUSED only when a connection to the address is refused too.
  That check adds at most peer_watch.REFUSAL_CHECK_SECS, and only after a
  probe that did not time out."""
  job, task = peer[1:].split("/")
  try:
    context.context().check_collective_ops_peer_health(
        f"/{job}/replica:0/{task}", timeout_in_ms=int(1000 * timeout_secs))
    return peer_watch.ANSWERED
  except tf.errors.DeadlineExceededError:
    return peer_watch.SILENT
  except tf.errors.OpError:
    return (peer_watch.REFUSED if peer_watch.address_refuses(address)
            else peer_watch.SILENT)


def probe_peers(peers, timeout_secs, addresses):
  """For each peer ("/job:worker/task:1"), what a health probe of at most
  `timeout_secs` found: peer_watch.ANSWERED, REFUSED (a killed peer: nothing
  listens at its address) or SILENT (a frozen one, or one cut off by the
  network).

  One peer after the other: TensorFlow's probe holds Python's GIL while it
  waits (threads would not overlap), so a silent peer's probe also pauses
  this process's other Python threads for `timeout_secs`.

  Args:
    peers: names of peers.
    timeout_secs: how long a probe waits.
    addresses: {name: "host:port"} (`peer_addresses`).
  """
  return [_probe(peer, addresses[peer], timeout_secs) for peer in peers]


def unanswered_peers(strategy, timeout_secs=peer_watch.PROBE_SECS):
  """{name: peer_watch.REFUSED or SILENT} for the peers that do not answer,
  asked once a collective has failed
  (`peer_watch.unanswered_after_a_failed_collective`)."""
  return peer_watch.unanswered_after_a_failed_collective(
      peer_addresses(strategy), _probe, timeout_secs)
