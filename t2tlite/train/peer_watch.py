"""Noticing a lost peer worker from a thread, without waiting on a collective.

A collective whose peer never comes makes TensorFlow fail it at its timeout,
through the runtime's abort of every pending collective; the training loop
would only learn of the loss there. `PeerWatch` probes every peer from a
thread instead, so a lost one is named while the loop still waits, and the
process can end cleanly before any collective times out (the collective
timeout is set past the watch's bounds: `strategy.collective_timeout_secs`).

A probe has three outcomes. A peer answers; or its address refuses the
connection (nothing listens there any more: the process died, was killed or
OOM-killed); or the probe times out (the process is frozen, or the network
or its machine is down). A refusal is an answer from the peer's machine, so
it needs only a short grace (one retry); silence may be a passing stall, so
it gets the worker timeout.
"""
import errno
import socket
import threading
import time

# A peer silent this long is lost (t2t-trainer's --worker_timeout_secs).
DEFAULT_WORKER_TIMEOUT_SECS = 120
# A peer that answered before and now refuses connections this long is lost:
# long enough for a second refused probe, far shorter than the timeout.
REFUSED_GRACE_SECS = 3.0
# How long one probe waits for a peer's answer, and the pause between rounds.
PROBE_SECS = 5.0
INTERVAL_SECS = 1.0
# How long a connection may take to be refused: one round trip, well under.
REFUSAL_CHECK_SECS = 1.0
# The outcomes of one probe of one peer.
ANSWERED, REFUSED, SILENT = "answered", "refused", "silent"
# What connect() fails with when something at the address says no.
_REFUSALS = (errno.ECONNREFUSED, errno.ECONNRESET)


def bound_secs(timeout_secs):
  """Longest time from a silent peer's last answer to the watch declaring it
  lost (with one silent peer: each adds PROBE_SECS to a round, as probes run
  one after the other, `strategy.probe_peers`)."""
  return timeout_secs + PROBE_SECS + INTERVAL_SECS


def refused_bound_secs(timeout_secs):
  """Longest time from a peer's death (its address refusing connections) to
  the watch declaring it lost, no other peer being silent: the first refused
  probe comes at most one round later, the grace then runs, and the loss is
  seen at the end of a round. Never past `bound_secs`: a refusing peer
  answers no probe either."""
  return min(REFUSED_GRACE_SECS + 2 * (INTERVAL_SECS + REFUSAL_CHECK_SECS),
             bound_secs(timeout_secs))


def address_refuses(address, timeout_secs=REFUSAL_CHECK_SECS):
  """True if a TCP connection to "host:port" is refused or reset; False if it
  is accepted (even by a stopped process: the kernel completes the
  handshake), takes longer than `timeout_secs`, or fails otherwise (no
  route, a name that does not resolve)."""
  host, _, port = address.rpartition(":")
  try:
    with socket.create_connection((host.strip("[]"), int(port)),
                                  timeout=timeout_secs):
      return False
  except OSError as error:
    return error.errno in _REFUSALS


def unanswered_after_a_failed_collective(addresses, probe,
                                         timeout_secs=PROBE_SECS):
  """{name: REFUSED or SILENT} for the peers of `addresses` ({name:
  "host:port"}) that do not answer, asked once a collective has failed. A
  peer whose address refuses connections, before or after its probe, is
  REFUSED: the channel to a peer just killed may leave a probe waiting out
  its whole timeout, and the killed peer would be named silent. The check
  before the probe answers at once for a peer already gone.

  Args:
    addresses: {name: "host:port"} of the peers.
    probe: callable (name, address, timeout_secs) -> ANSWERED, REFUSED or
      SILENT (`strategy.probe_peers`'s probe of one peer).
    timeout_secs: how long one probe waits.
  """
  unanswered = {}
  for peer, address in addresses.items():
    outcome = (REFUSED if address_refuses(address)
               else probe(peer, address, timeout_secs))
    if outcome == SILENT and address_refuses(address):
      outcome = REFUSED
    if outcome != ANSWERED:
      unanswered[peer] = outcome
  return unanswered


class PeerWatch:
  """Probes peers from a thread; reports those refusing or silent too long.

  A peer that has answered a probe (or is in `answered_before`) and whose
  every probe since some moment was refused is lost once that lasts
  `refused_grace_secs`. Any peer that has answered no probe for
  `timeout_secs` is lost. A peer never seen answering may refuse because it
  has not started listening yet: for it, refusals count as silence only.
  `on_lost(lost)` is called once, from the watch's thread, with a dict
  {name: REFUSED or SILENT} (what its last probe found), and the watch ends.

  Use as a context manager: the thread runs inside the `with` block.

  Args:
    peers: names of the peers, e.g. ["/job:worker/task:1"].
    timeout_secs: silence after which a peer is lost.
    on_lost: callable taking the dict of lost peers.
    probe: callable (peers, timeout_secs) -> ANSWERED, REFUSED or SILENT per
      peer (`strategy.probe_peers`).
    answered_before: peers known to have been up (listening) already.
    refused_grace_secs: refusals after which a peer seen before is lost.
    probe_secs: how long one probe waits.
    interval_secs: the pause between two rounds of probes.
  """

  def __init__(self, peers, timeout_secs, on_lost, probe, answered_before=(),
               refused_grace_secs=REFUSED_GRACE_SECS, probe_secs=PROBE_SECS,
               interval_secs=INTERVAL_SECS):
    self.peers, self.timeout_secs = list(peers), timeout_secs
    self._on_lost, self._probe = on_lost, probe
    self._seen = set(answered_before)
    self._grace_secs = refused_grace_secs
    self._probe_secs, self._interval_secs = probe_secs, interval_secs
    self._left = set()
    self._stop = threading.Event()
    self._thread = None

  def peer_left(self, peer):
    """Stops counting `peer`, which is leaving on purpose (it may exit)."""
    self._left.add(peer)

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
    start = time.monotonic()
    last_answer = {peer: start for peer in self.peers}
    refused_since = {}  # peer -> when its current run of refusals began
    while not self._stop.wait(self._interval_secs):
      outcomes = dict(zip(self.peers,
                          self._probe(self.peers, self._probe_secs)))
      now = time.monotonic()
      for peer, outcome in outcomes.items():
        if outcome == ANSWERED:
          last_answer[peer] = now
          self._seen.add(peer)
        if outcome == REFUSED and peer in self._seen:
          refused_since.setdefault(peer, now)
        else:
          refused_since.pop(peer, None)
      lost = {peer: outcomes[peer] for peer in self.peers
              if peer not in self._left and (
                  now - last_answer[peer] >= self.timeout_secs or
                  now - refused_since.get(peer, now) >= self._grace_secs)}
      if lost and not self._stop.is_set():
        self._on_lost(lost)
        return
