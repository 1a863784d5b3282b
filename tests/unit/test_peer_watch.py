"""PeerWatch's timing: who is declared lost, when, and only once.

The probe here is a plain function over a set of silent peers; the real
probe (`strategy.probe_peers` against a killed or frozen worker) runs in
tests/end_to_end/test_faults.py."""
import threading
import time

from t2tlite.train import peer_watch
from t2tlite.train import strategy as strategy_lib

PEERS = ["/job:worker/task:1", "/job:worker/task:2"]


class Probes:
  """Answers for every peer not in `silent`; counts the probes."""

  def __init__(self):
    self.silent, self.count = set(), 0

  def __call__(self, peers, timeout_secs):
    self.count += len(peers)
    if self.silent & set(peers):
      time.sleep(min(timeout_secs, 0.05))  # a frozen peer's probe times out
    return [peer not in self.silent for peer in peers]


def watch(probes, found, timeout_secs=0.5):
  return peer_watch.PeerWatch(
      PEERS, timeout_secs, found.append, probes, probe_secs=0.05,
      interval_secs=0.02)


def test_a_silent_peer_is_lost_once_after_the_timeout():
  probes, found = Probes(), []
  with watch(probes, found):
    time.sleep(0.3)
    assert found == [] and probes.count > 4  # every peer answers
    probes.silent.add(PEERS[1])
    silent_since = time.monotonic()
    while not found and time.monotonic() - silent_since < 5:
      time.sleep(0.01)
    elapsed = time.monotonic() - silent_since
    time.sleep(0.2)
  assert found == [[PEERS[1]]]  # once, naming only the silent peer
  # The bound is 0.5 + 0.05 + 0.02 s; the rest is slack for a loaded machine.
  assert 0.5 <= elapsed < 2.0, elapsed


def test_peers_that_answer_are_never_lost_and_the_thread_ends():
  probes, found = Probes(), []
  before = threading.active_count()
  with watch(probes, found, timeout_secs=0.1):
    time.sleep(0.5)
  assert found == [] and probes.count > 10
  assert threading.active_count() == before


def test_no_peers_no_thread():
  before = threading.active_count()
  with peer_watch.PeerWatch([], 1.0, lambda lost: None,
                            lambda peers, t: [True] * len(peers)):
    assert threading.active_count() == before


def test_collectives_wait_past_the_watch():
  """A lost peer is reported by the watch well before a collective waiting
  on it times out."""
  for timeout_secs in (1, 10, 120):
    assert (strategy_lib.collective_timeout_secs(timeout_secs) >
            peer_watch.bound_secs(timeout_secs) + 0.5 * timeout_secs)
