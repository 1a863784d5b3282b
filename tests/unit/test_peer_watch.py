"""PeerWatch: who is declared lost, when, how (refused or silent), and only
once; and the classification of a probe with real sockets on 127.0.0.1.

The watch's timing is tested with a plain function over sets of refusing and
silent peers; the classification with real addresses: a closed port, a
listening socket that never accepts, a stopped process, and TensorFlow's own
probe (`strategy.probe_peers`) against a real TensorFlow server that answers,
is stopped, then killed."""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from t2tlite.train import peer_watch
from t2tlite.train import strategy as strategy_lib
import train_helpers

PEERS = ["/job:worker/task:1", "/job:worker/task:2"]
TIMEOUT, GRACE = 1.0, 0.15


class Probes:
  """Answers for every peer neither `silent` nor `refused`; counts probes
  and keeps when each peer last answered (`answered_at`)."""

  def __init__(self):
    self.silent, self.refused, self.count = set(), set(), 0
    self.answered_at = {}

  def __call__(self, peers, timeout_secs):
    self.count += len(peers)
    if self.silent & set(peers):
      time.sleep(min(timeout_secs, 0.05))  # a frozen peer's probe times out
    outcomes = [peer_watch.SILENT if peer in self.silent else
                peer_watch.REFUSED if peer in self.refused else
                peer_watch.ANSWERED for peer in peers]
    now = time.monotonic()
    self.answered_at.update((peer, now) for peer, outcome
                            in zip(peers, outcomes)
                            if outcome == peer_watch.ANSWERED)
    return outcomes


def watch(probes, found, timeout_secs=TIMEOUT, **kwargs):
  return peer_watch.PeerWatch(
      PEERS, timeout_secs, found.append, probes, refused_grace_secs=GRACE,
      probe_secs=0.05, interval_secs=0.02, **kwargs)


def wait_found(found, since=None, limit=5):
  """Seconds from `since` (a time.monotonic(); default now) until `found`
  is not empty (waiting at most `limit`). A lower bound holds only from a
  `since` taken before the event the watch times from: before the peer
  changes, or before the watch starts."""
  since = time.monotonic() if since is None else since
  while not found and time.monotonic() - since < limit:
    time.sleep(0.005)
  return time.monotonic() - since


def test_a_silent_peer_is_lost_once_after_the_timeout():
  probes, found = Probes(), []
  with watch(probes, found):
    time.sleep(0.3)
    assert found == [] and probes.count > 4  # every peer answers
    probes.silent.add(PEERS[1])
    wait_found(found)
    silent_for = time.monotonic() - probes.answered_at[PEERS[1]]
    time.sleep(0.2)
  assert found == [{PEERS[1]: peer_watch.SILENT}]  # once, only that peer
  # Counted from the peer's last answer, which may come a round before it
  # turns silent. The bound is 1.0 + 0.05 + 0.02 s; the rest is slack for a
  # loaded machine.
  assert TIMEOUT <= silent_for < 2.5, silent_for


class Clock:
  """The watch's time.monotonic and its pause between rounds (an Event's
  wait), advancing only when the watch pauses or a probe waits."""

  def __init__(self):
    self.now = 0.0

  def monotonic(self):
    return self.now

  def Event(self):  # noqa: N802  (stands in for threading.Event)
    clock = self

    class Pause:
      stopped = False

      def wait(self, secs):
        clock.now += secs
        return self.stopped

      def set(self):
        self.stopped = True

      def is_set(self):
        return self.stopped
    return Pause()


def test_a_silent_peer_is_lost_within_bound_secs_in_every_phase(monkeypatch):
  """With the real probe and pause times on a clock of its own: a peer
  silent from 3.3 s (each probe then waits its whole PROBE_SECS) is lost
  at least the timeout and at most bound_secs after its last answer,
  whatever the timeout's phase in the rounds (up to a round past it)."""
  clock = Clock()
  monkeypatch.setattr(peer_watch, "time", clock)
  monkeypatch.setattr(peer_watch, "threading", type(
      "Threading", (), {"Event": clock.Event, "Thread": threading.Thread}))
  answers = []

  def probe(peers, timeout_secs):
    if clock.now < 3.3:
      answers.append(clock.now)
      return [peer_watch.ANSWERED]
    clock.now += timeout_secs
    return [peer_watch.SILENT]

  longest = 0.0
  for tenths in range(100, 170, 3):
    timeout_secs, found, lost = tenths / 10, [], threading.Event()
    clock.now, answers[:] = 0.0, []

    def on_lost(peers):
      found.append(clock.now)
      lost.set()
    with peer_watch.PeerWatch([PEERS[0]], timeout_secs, on_lost, probe):
      assert lost.wait(10)  # no real pause: at once
    elapsed = found[0] - answers[-1]
    assert timeout_secs <= elapsed <= peer_watch.bound_secs(timeout_secs)
    longest = max(longest, elapsed - timeout_secs)
  assert longest > peer_watch.PROBE_SECS  # the bound is met, not loose


def test_a_peer_that_answered_then_refuses_is_lost_after_the_grace():
  probes, found = Probes(), []
  with watch(probes, found, timeout_secs=30):
    time.sleep(0.2)
    since = time.monotonic()
    probes.refused.add(PEERS[0])
    elapsed = wait_found(found, since)
    time.sleep(0.1)
  assert found == [{PEERS[0]: peer_watch.REFUSED}]
  assert GRACE <= elapsed < 1.5, elapsed  # far below the 30 s timeout


def test_a_peer_never_seen_refusing_is_not_yet_started_not_lost():
  """At start-up a peer may not listen yet: its refusals count as silence
  only, until it has answered once; after that, the grace applies."""
  probes, found = Probes(), []
  probes.refused.add(PEERS[1])
  with watch(probes, found):
    time.sleep(TIMEOUT / 2)  # refused for three times the grace
    assert found == []
    probes.refused.clear()  # it has started
    answered = probes.count
    while probes.count < answered + 2 * len(PEERS):  # two rounds
      time.sleep(0.005)
    since = time.monotonic()
    probes.refused.add(PEERS[1])  # and died
    elapsed = wait_found(found, since)
  assert found == [{PEERS[1]: peer_watch.REFUSED}]
  assert GRACE <= elapsed < TIMEOUT, elapsed
  # Never seen at all, it is lost at the timeout, refusing.
  probes, found = Probes(), []
  probes.refused.add(PEERS[1])
  since = time.monotonic()
  with watch(probes, found):
    elapsed = wait_found(found, since)
  assert found == [{PEERS[1]: peer_watch.REFUSED}]
  assert TIMEOUT <= elapsed < 2.5, elapsed


def test_a_peer_answered_before_refusing_from_the_start_is_lost():
  probes, found = Probes(), []
  probes.refused.add(PEERS[1])
  since = time.monotonic()
  with watch(probes, found, answered_before=PEERS):
    elapsed = wait_found(found, since)
  assert found == [{PEERS[1]: peer_watch.REFUSED}]
  assert GRACE <= elapsed < TIMEOUT, elapsed


def test_an_answer_between_refusals_restarts_the_grace():
  """A single refusal, or refusals broken by an answer, are not a loss."""
  probes, found = Probes(), []
  with watch(probes, found, timeout_secs=30, answered_before=PEERS):
    for _ in range(6):
      probes.refused.add(PEERS[0])
      time.sleep(GRACE / 2)
      probes.refused.clear()
      time.sleep(0.05)
  assert found == []


def test_a_peer_that_left_is_not_counted():
  probes, found = Probes(), []
  with watch(probes, found, answered_before=PEERS) as watching:
    watching.peer_left(PEERS[0])
    probes.refused.add(PEERS[0])
    time.sleep(TIMEOUT + 0.3)
    assert found == []
    probes.refused.add(PEERS[1])
    wait_found(found)
  assert found == [{PEERS[1]: peer_watch.REFUSED}]


def test_peers_that_answer_are_never_lost_and_the_thread_ends():
  probes, found = Probes(), []
  before = threading.active_count()
  with watch(probes, found, timeout_secs=0.1):
    time.sleep(0.5)
  assert found == [] and probes.count > 10
  assert threading.active_count() == before


def test_no_peers_no_thread():
  before = threading.active_count()
  with peer_watch.PeerWatch(
      [], 1.0, lambda lost: None,
      lambda peers, t: [peer_watch.ANSWERED] * len(peers)):
    assert threading.active_count() == before


def test_collectives_wait_past_the_watch():
  """A lost peer, refusing or silent, is reported by the watch well before a
  collective waiting on it times out; a refusing one well before the
  timeout, when the timeout is not tiny."""
  for timeout_secs in (1, 10, 120):
    collective = strategy_lib.collective_timeout_secs(timeout_secs)
    assert collective > peer_watch.bound_secs(timeout_secs) + 0.5 * timeout_secs
    assert collective > peer_watch.refused_bound_secs(timeout_secs) + 0.5
  assert peer_watch.refused_bound_secs(120) <= 10
  assert peer_watch.refused_bound_secs(1) == peer_watch.bound_secs(1)


def test_a_loss_found_while_the_watch_ends_is_not_reported():
  """A round whose probe returns after the `with` block was left reports
  nothing: the caller has stopped waiting on its peers. (Its peer is lost
  by then: a timeout of 0 s.)"""
  probing, found = threading.Event(), []

  def probe(peers, timeout_secs):
    probing.set()
    watch._stop.wait(5)  # returns once the block below is left
    return [peer_watch.SILENT] * len(peers)
  watch = peer_watch.PeerWatch(PEERS, 0.0, found.append, probe,
                               probe_secs=0.05, interval_secs=0.001)
  with watch:
    assert probing.wait(5)
  assert found == []


# ---- classification with real sockets ---------------------------------------

LISTEN_THEN_STOP = """
import socket, sys, time
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
print(listener.getsockname()[1], flush=True)
time.sleep(120)
"""


def test_address_refuses_only_when_nothing_listens():
  closed, = train_helpers.free_ports(1)
  assert peer_watch.address_refuses(f"127.0.0.1:{closed}", 2.0)
  # Listening but never accepting: the kernel completes the handshake.
  with socket.socket() as listener:
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    assert not peer_watch.address_refuses(f"127.0.0.1:{port}", 2.0)
  with train_helpers.processes() as started:
    proc = subprocess.Popen([sys.executable, "-c", LISTEN_THEN_STOP],
                            stdout=subprocess.PIPE, text=True)
    started.append(proc)
    port = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGSTOP)
    try:
      assert not peer_watch.address_refuses(f"127.0.0.1:{port}", 2.0)
    finally:
      os.kill(proc.pid, signal.SIGCONT)
    proc.kill()
    proc.wait(timeout=10)
    assert peer_watch.address_refuses(f"127.0.0.1:{port}", 2.0)


def test_an_unreachable_address_is_not_a_refusal():
  # A multicast group takes no TCP connection: the attempt fails (no
  # route) or times out, with no name to resolve, but nothing refuses it.
  assert not peer_watch.address_refuses("224.0.0.1:8470", 0.5)


def test_a_bracketed_ipv6_address_is_probed():
  try:
    with socket.socket(socket.AF_INET6) as closed:
      closed.bind(("::1", 0))
      port = closed.getsockname()[1]
  except OSError as error:
    pytest.skip(f"no IPv6 loopback: {error}")
  assert peer_watch.address_refuses(f"[::1]:{port}", 2.0)


def test_after_a_failed_collective_a_refusing_address_is_refused():
  """Once a collective failed, a peer whose address refuses connections is
  REFUSED without its probe (which may wait out its timeout on the channel
  to a peer just killed), and so is one whose address refuses after its
  probe timed out; a silent peer that still listens stays SILENT."""
  closed, = train_helpers.free_ports(1)
  with socket.socket() as silent, socket.socket() as closes:
    for listener in (silent, closes):
      listener.bind(("127.0.0.1", 0))
      listener.listen(8)  # room for every check's connection
    ports = {1: closed, 2: silent.getsockname()[1],
             3: closes.getsockname()[1], 4: silent.getsockname()[1]}
    addresses = {f"/job:worker/task:{task}": f"127.0.0.1:{port}"
                 for task, port in ports.items()}
    probed = []

    def probe(peer, address, timeout_secs):
      probed.append(peer)
      if peer == "/job:worker/task:3":
        closes.close()  # killed while its probe waits
      return (peer_watch.ANSWERED if peer == "/job:worker/task:4"
              else peer_watch.SILENT)

    unanswered = peer_watch.unanswered_after_a_failed_collective(
        addresses, probe, timeout_secs=0.1)
  assert unanswered == {"/job:worker/task:1": peer_watch.REFUSED,
                        "/job:worker/task:2": peer_watch.SILENT,
                        "/job:worker/task:3": peer_watch.REFUSED}
  assert probed == ["/job:worker/task:2", "/job:worker/task:3",
                    "/job:worker/task:4"]


SERVER = """
import tensorflow as tf, time
tf.distribute.Server(tf.train.ClusterSpec({cluster!r}), job_name="worker",
                     task_index=1)
print("listening", flush=True)
time.sleep(300)
"""
PROBER = """
import json, sys, time
import tensorflow as tf
from tensorflow.core.protobuf import tensorflow_server_pb2
from tensorflow.python.eager import context
from t2tlite.train import strategy as strategy_lib
cluster = {cluster!r}
context.context().enable_collective_ops(tensorflow_server_pb2.ServerDef(
    cluster=tf.train.ClusterSpec(cluster).as_cluster_def(), job_name="worker",
    task_index=0, protocol="grpc"))
addresses = {{f"/job:worker/task:{{i}}": a
             for i, a in enumerate(cluster["worker"]) if i}}
for _ in sys.stdin:  # one round of probes per line
  start = time.monotonic()
  outcomes = strategy_lib.probe_peers(list(addresses), 2.0, addresses)
  print(json.dumps([outcomes, time.monotonic() - start]), flush=True)
"""


def _wait_until_stopped(pid, timeout_secs=10):
  """Until /proc says `pid` is stopped: SIGSTOP lands asynchronously, and
  on a loaded machine a probe sent at once may still be answered."""
  deadline = time.monotonic() + timeout_secs
  while time.monotonic() < deadline:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
      if stat.read().rsplit(")", 1)[1].split()[0] == "T":
        return
    time.sleep(0.05)
  raise AssertionError(f"process {pid} did not stop")


@pytest.mark.timeout(180)
def test_tensorflows_probe_answered_refused_or_silent():
  """Task 1 is a real TensorFlow server (answering, then stopped, then
  killed); task 2 listens and never accepts; task 3's port is closed."""
  ports = train_helpers.free_ports(4)
  cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
  listener = socket.socket()
  listener.bind(("127.0.0.1", ports[2]))
  listener.listen(1)
  with listener, train_helpers.processes() as started:
    server = subprocess.Popen(
        [sys.executable, "-c",
         train_helpers.LEAN_START + SERVER.format(cluster=cluster)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    started.append(server)
    assert server.stdout.readline().strip() == "listening"
    prober = subprocess.Popen(
        [sys.executable, "-c",
         train_helpers.LEAN_START + PROBER.format(cluster=cluster)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True)
    started.append(prober)

    def probe_round():
      prober.stdin.write("probe\n")
      prober.stdin.flush()
      line = prober.stdout.readline()
      assert line, "the prober ended"
      return json.loads(line)

    A, R, S = peer_watch.ANSWERED, peer_watch.REFUSED, peer_watch.SILENT
    outcomes, _ = probe_round()
    assert outcomes == [A, S, R]
    os.kill(server.pid, signal.SIGSTOP)
    _wait_until_stopped(server.pid)
    outcomes, secs = probe_round()
    assert outcomes == [S, S, R]
    # Both silent peers' probes timed out, one after the other (TensorFlow's
    # probe holds the GIL).
    assert 3.9 <= secs < 6.0, secs
    os.kill(server.pid, signal.SIGKILL)
    os.kill(server.pid, signal.SIGCONT)
    server.wait(timeout=10)
    listener.close()  # now the three refuse
    outcomes, secs = probe_round()
    assert outcomes == [R, R, R]
    assert secs < 1.0, secs  # at once
