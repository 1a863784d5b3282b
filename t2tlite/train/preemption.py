"""Stopping training without losing work: preemption signals and lost workers.

Preemption: SIGTERM (what cluster managers send before taking a machine) or
Ctrl-C (SIGINT) only sets a flag; the training loop shares it with every
worker at the end of the step (`strategy.any_workers`), all of them save one
checkpoint at that step, and `Preempted` ends the run. A second Ctrl-C exits
at once.

Lost worker: a peer whose address refuses connections for a few seconds (it
died) or that answers no probe for the worker timeout (frozen, cut off),
found by a thread (`peer_watch.PeerWatch`) while the loop may wait on a
collective, or a collective that fails (a peer's connection reset), becomes
`WorkerLostError`, naming the peers that no longer answer, how, and the
newest checkpoint to resume from.

Exit codes (the command-line trainer's; restart loops key on them):
  PREEMPTED_EXIT_CODE     75 (EX_TEMPFAIL)  checkpoint saved at the step reached
  WORKER_LOST_EXIT_CODE   69 (EX_UNAVAILABLE)  resume from the newest checkpoint
  INTERRUPTED_EXIT_CODE  130 (128 + SIGINT)  a second Ctrl-C, nothing saved
"""
import contextlib
import os
import re
import signal
import sys
import threading

from absl import logging
import tensorflow as tf

from t2tlite.train import peer_watch
from t2tlite.train import strategy as strategy_lib

PREEMPTED_EXIT_CODE = 75
WORKER_LOST_EXIT_CODE = 69
INTERRUPTED_EXIT_CODE = 130
# How a failed collective surfaces when a peer dies (UNAVAILABLE: connection
# reset), freezes (DEADLINE_EXCEEDED: the collective timeout), or when the
# runtime aborts the other pending collectives (CANCELLED, ABORTED).
PEER_FAILURES = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
                 tf.errors.CancelledError, tf.errors.AbortedError)
_REASONS = {
    tf.errors.UnavailableError: "a peer's connection was lost",
    tf.errors.DeadlineExceededError: "no answer within the collective timeout",
}


class Preempted(Exception):
  """Training stopped on a signal after saving a checkpoint at `step`."""

  def __init__(self, signal_name, step, checkpoint):
    self.signal_name, self.step, self.checkpoint = signal_name, step, checkpoint
    super().__init__(
        f"Preempted ({signal_name}): saved the checkpoint {checkpoint} at "
        f"step {step}. Run the same command again (on every worker) to "
        "resume there.")


class WorkerLostError(RuntimeError):
  """A peer worker died or stopped answering; training cannot go on.

  Attributes:
    lost_tasks: names of the peers that did not answer a probe.
    tf_error: the failed collective's tf.errors.OpError, or None when the
      peer watch found the loss.
  """

  def __init__(self, message, lost_tasks, tf_error):
    self.lost_tasks, self.tf_error = lost_tasks, tf_error
    super().__init__(message)


class StopSignals:
  """While active, SIGTERM and SIGINT ask training to stop after the step.

  Python handlers (main thread only). Enter this only after the strategy
  exists: starting TensorFlow's multi-worker runtime replaces SIGTERM's
  action (with a handler that only records it for
  PreemptionCheckpointHandler, which `strategy.make_strategy` then undoes).

  Attributes:
    requested: name of the first signal received ("SIGTERM"), or None.
  """

  def __init__(self):
    self.requested = None
    self._previous = {}

  def _handle(self, signum, frame):
    del frame  # unused
    if self.requested == "SIGINT" and signum == signal.SIGINT:
      sys.stderr.write("Second Ctrl-C: exiting without saving.\n")
      sys.stderr.flush()
      os._exit(INTERRUPTED_EXIT_CODE)
    if self.requested is None:
      self.requested = signal.Signals(signum).name
      sys.stderr.write(f"{self.requested} received: saving a checkpoint "
                       "after this step, then exiting.\n")
      sys.stderr.flush()

  def __enter__(self):
    if threading.current_thread() is not threading.main_thread():
      return self  # Python delivers signals to the main thread only
    for signum in (signal.SIGTERM, signal.SIGINT):
      self._previous[signum] = signal.signal(signum, self._handle)
    return self

  def __exit__(self, *exc_info):
    for signum, handler in self._previous.items():
      # None: the previous handler was not installed from Python (TF's).
      signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
    return False


def _checkpoint_step(path):
  match = re.search(r"-(\d+)$", path or "")
  return int(match.group(1)) if match else None


class _ReportOnce:
  """Reports the first WorkerLostError only, whichever thread finds it."""

  def __init__(self, on_lost):
    self._on_lost = on_lost
    self._lock = threading.Lock()
    self._error = None

  def __call__(self, make_error):
    """Makes the error with `make_error()` and passes it to `on_lost`, unless
    one was reported before; returns the reported error. A second finder
    waits here until the first one's `on_lost` returns (which it never does
    when `on_lost` ends the process)."""
    with self._lock:
      if self._error is None:
        self._error = make_error()
        self._on_lost(self._error)
      return self._error


def _log_lost(error):
  logging.error("%s", error)


@contextlib.contextmanager
def reporting_lost_workers(strategy, output_dir, on_lost=None):
  """Reports a lost peer worker while the block runs (several workers only).

  A `PeerWatch` thread probes the peers. The first loss found, by it (a peer
  whose address refuses connections for peer_watch.REFUSED_GRACE_SECS, or
  silent for the worker timeout) or by this thread (a failed collective), is
  passed to `on_lost` as a WorkerLostError, from the thread that found it.
  `on_lost` may end the process (the command-line trainer exits 69: nothing
  is left to save, and a normal exit would wait for the lost peer at the
  runtime's shutdown barrier). If it returns, a collective that then fails
  raises that WorkerLostError here; one waiting on the lost peer fails at the
  collective timeout (`strategy.collective_timeout_secs`).

  Every peer counts as seen (its refusals are a death, not a start not yet
  made): the strategy's start is a rendezvous of every task, each of which
  listens at its address before it joins.

  Args:
    strategy: the training strategy.
    output_dir: where the chief writes checkpoints (named in the message).
    on_lost: callable taking the WorkerLostError; None logs it.
  Yields:
    `peer_left(name)`, for `strategy.leave_together`: a peer leaving on
    purpose, no longer watched.
  Raises:
    WorkerLostError: a collective failed because of a lost peer.
  """
  if not strategy_lib.is_multi_worker(strategy):
    yield lambda peer: None
    return
  report = _ReportOnce(on_lost or _log_lost)
  timeout_secs = strategy_lib.worker_timeout_secs(strategy)
  addresses = strategy_lib.peer_addresses(strategy)

  def watch_found(lost):
    report(lambda: worker_lost_error(strategy, output_dir, lost,
                                     timeout_secs))

  def probe(peers, probe_secs):
    return strategy_lib.probe_peers(peers, probe_secs, addresses)

  with peer_watch.PeerWatch(list(addresses), timeout_secs, watch_found, probe,
                            answered_before=addresses) as watch:
    try:
      yield watch.peer_left
    except PEER_FAILURES as error:
      raise report(lambda: worker_lost_error(
          strategy, output_dir, strategy_lib.unanswered_peers(strategy),
          peer_watch.PROBE_SECS, "when a collective failed: " +
          _REASONS.get(type(error), type(error).__name__), error)) from None


def _lost_peer_sentence(peer, outcome, address, silent_secs):
  if outcome == peer_watch.REFUSED:
    return f"{peer} is gone: its address {address} refuses connections"
  return f"{peer} ({address}) has not answered for {silent_secs:g} s"


def worker_lost_error(strategy, output_dir, lost, silent_secs, found="",
                      tf_error=None):
  """The WorkerLostError naming the `lost` peers and the checkpoint to resume.

  Args:
    strategy: the training strategy.
    output_dir: where the chief writes checkpoints.
    lost: {name: peer_watch.REFUSED or SILENT} of the peers that do not
      answer (may be empty).
    silent_secs: how long the SILENT ones have not answered.
    found: how the loss was found when not by the watch, e.g. "when a
      collective failed: a peer's connection was lost".
    tf_error: the failed collective's tf.errors.OpError, if one failed.
  """
  latest = tf.train.latest_checkpoint(output_dir)
  if latest:
    resume = (f"The newest checkpoint is {latest} (step "
              f"{_checkpoint_step(latest)}); restarting every worker with the "
              "same command resumes from it.")
  else:
    resume = (f"No checkpoint was written in {output_dir} yet; restarting "
              "every worker with the same command starts again from step 0.")
  addresses = strategy_lib.peer_addresses(strategy)
  who = ("; ".join(_lost_peer_sentence(peer, outcome, addresses[peer],
                                       silent_secs)
                   for peer, outcome in lost.items()) if lost else
         "A peer worker is too slow or was lost and has come back "
         "(every peer answers a probe now)")
  return WorkerLostError(
      f"{who}{f' ({found})' if found else ''}. "
      f"{strategy_lib.task_name(strategy)} stopped training. {resume}",
      list(lost), tf_error)
