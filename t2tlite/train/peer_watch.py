"""Noticing a lost peer worker from a thread, without waiting on a collective.

A collective whose peer never comes makes TensorFlow fail it at its timeout,
through the runtime's abort of every pending collective; the training loop
would only learn of the loss there. `PeerWatch` probes every peer from a
thread instead, so a lost one is named while the loop still waits, and the
process can end cleanly before any collective times out (the collective
timeout is set past the watch's bound: `strategy.collective_timeout_secs`).
"""
import threading
import time

# A peer silent this long is lost (t2t-trainer's --worker_timeout_secs).
DEFAULT_WORKER_TIMEOUT_SECS = 120
# How long one probe waits for a peer's answer, and the pause between rounds.
PROBE_SECS = 5.0
INTERVAL_SECS = 1.0


def bound_secs(timeout_secs):
  """Longest time from a peer's last answer to the watch declaring it lost."""
  return timeout_secs + PROBE_SECS + INTERVAL_SECS


class PeerWatch:
  """Probes peers from a thread; reports those silent for `timeout_secs`.

  A killed peer refuses each probe at once; a frozen one (SIGSTOP, a network
  partition) lets each time out. Either way, once a peer has answered no
  probe for `timeout_secs`, `on_lost(names)` is called once, from the watch's
  thread, and the watch ends.

  Use as a context manager: the thread runs inside the `with` block.

  Args:
    peers: names of the peers, e.g. ["/job:worker/task:1"].
    timeout_secs: silence after which a peer is lost.
    on_lost: callable taking the list of lost peers' names.
    probe: callable (peers, timeout_secs) -> a bool per peer, True if it
      answered (`strategy.probe_peers`).
    probe_secs: how long one probe waits.
    interval_secs: the pause between two rounds of probes.
  """

  def __init__(self, peers, timeout_secs, on_lost, probe,
               probe_secs=PROBE_SECS, interval_secs=INTERVAL_SECS):
    self.peers, self.timeout_secs = list(peers), timeout_secs
    self._on_lost, self._probe = on_lost, probe
    self._probe_secs, self._interval_secs = probe_secs, interval_secs
    self._stop = threading.Event()
    self._thread = None

  def __enter__(self):
    if self.peers:
      self._thread = threading.Thread(target=self._watch, name="peer_watch",
                                      daemon=True)
      self._thread.start()
    return self

  def __exit__(self, *exc_info):
    self._stop.set()
    if self._thread is not None:
      # A probe in flight ends within probe_secs; the thread is a daemon, so
      # a process that exits meanwhile does not wait for it.
      self._thread.join(self._probe_secs + 1.0)
    return False

  def _watch(self):
    last_answer = {peer: time.monotonic() for peer in self.peers}
    while not self._stop.wait(self._interval_secs):
      answered = self._probe(self.peers, self._probe_secs)
      now = time.monotonic()
      for peer, ok in zip(self.peers, answered):
        if ok:
          last_answer[peer] = now
      lost = [peer for peer in self.peers
              if now - last_answer[peer] >= self.timeout_secs]
      if lost and not self._stop.is_set():
        self._on_lost(lost)
        return
