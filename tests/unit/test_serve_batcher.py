"""t2t-serve's batcher (t2tlite/serve/batcher.py) on its own: how batches
form, the queue bound, deadlines, gone clients and the drain. Its decode
function here records each batch and answers each line with its text
upper-cased, after waiting on an event when a test needs the worker busy.
"""
import threading
import time

import pytest

from t2tlite.serve import batcher as batching
from train_helpers import poll


class Recorder:
  """A decode function: records (key, lines) batches; blocks while
  `hold` is clear."""

  def __init__(self):
    self.batches, self.hold = [], threading.Event()
    self.hold.set()
    self.started = threading.Event()

  def __call__(self, key, lines):
    self.started.set()
    self.batches.append((key, list(lines)))
    assert self.hold.wait(30)
    return [line.upper() for line in lines]


def _batcher(decode, **limits):
  limits.setdefault("window_secs", 0.05)
  return batching.Batcher(decode, batching.BatchLimits(**limits)).start()


def _submit_later(batcher, results, *args, **kwargs):
  def run():
    try:
      results.append(batcher.submit(*args, **kwargs))
    except batching.Rejected as error:
      results.append(error)
  thread = threading.Thread(target=run)
  thread.start()
  return thread


def _busy(batcher, decode):
  """Keeps the worker on a batch of its own until decode.hold is set."""
  decode.hold.clear()
  thread = _submit_later(batcher, [], "blocker", ["b"], alone=True)
  assert decode.started.wait(10)
  return thread


def test_requests_of_one_key_share_a_batch_and_get_their_own_lines():
  decode = Recorder()
  batcher = _batcher(decode)
  blocker = _busy(batcher, decode)
  results, threads = [], []
  for key, lines in (("a", ["x", "y"]), ("b", ["z"]), ("a", ["w"]),
                     ("a", ["v"])):
    threads.append(_submit_later(batcher, results, key, lines))
    assert poll(lambda n=len(threads): batcher.queued_requests() == n, 10)
  decode.hold.set()
  for thread in threads + [blocker]:
    thread.join(10)
  assert sorted(results) == [["V"], ["W"], ["X", "Y"], ["Z"]]
  # After the blocker: key "a" (the oldest) in one batch, in arrival
  # order; then key "b".
  assert decode.batches[1:] == [("a", ["x", "y", "w", "v"]), ("b", ["z"])]
  assert batcher.drain(10)


def test_line_limit_and_alone_requests_split_batches():
  decode = Recorder()
  batcher = _batcher(decode, max_lines=3, max_tokens=8)
  blocker = _busy(batcher, decode)
  results, threads = [], []
  # Costs are 1 a line (no cost function): lines x longest = lines.
  for lines, alone in ((["a", "b"], False), (["c", "d"], False),
                       (["e"], True), (["f"], False)):
    threads.append(_submit_later(batcher, results, "k", lines, alone=alone))
    assert poll(lambda n=len(threads): batcher.queued_requests() == n, 10)
  decode.hold.set()
  for thread in threads + [blocker]:
    thread.join(10)
  # [a b] + [c d] would be 4 lines > 3: the batch closes there; then
  # [c d] + [f] (e skipped: it is decoded alone), then [e].
  assert [lines for _, lines in decode.batches[1:]] == [
      ["a", "b"], ["c", "d", "f"], ["e"]]
  assert batcher.drain(10)


def test_token_limit_counts_padding():
  decode = Recorder()
  batcher = batching.Batcher(decode, batching.BatchLimits(
      window_secs=0.05, max_lines=10, max_tokens=6), cost=len).start()
  blocker = _busy(batcher, decode)
  results, threads = [], []
  for lines in (["aaa"], ["b"], ["cc"]):
    threads.append(_submit_later(batcher, results, "k", lines))
    assert poll(lambda n=len(threads): batcher.queued_requests() == n, 10)
  decode.hold.set()
  for thread in threads + [blocker]:
    thread.join(10)
  # 2 lines x 3 tokens fit in 6; a third line would make 9.
  assert [lines for _, lines in decode.batches[1:]] == [["aaa", "b"], ["cc"]]
  assert batcher.drain(10)


def test_a_full_queue_refuses_at_once_and_a_deadline_takes_a_request_out():
  decode = Recorder()
  batcher = _batcher(decode, max_queued_lines=2, timeout_secs=0.5)
  blocker = _busy(batcher, decode)
  results = []
  waiting = _submit_later(batcher, results, "k", ["a", "b"])
  assert poll(lambda: batcher.queued_lines() == 2, 10)
  start = time.monotonic()
  with pytest.raises(batching.QueueFull, match="--max_queued_lines"):
    batcher.submit("k", ["c"])
  assert time.monotonic() - start < 0.1
  waiting.join(10)  # its deadline passes while the blocker computes
  assert isinstance(results[0], batching.TimedOut)
  assert batcher.queued_lines() == 0
  decode.hold.set()
  blocker.join(10)
  assert [key for key, _ in decode.batches] == ["blocker"]
  assert batcher.submit("k", ["d"]) == ["D"]
  assert batcher.drain(10)


def test_gone_clients_are_not_decoded_and_the_drain_answers_the_queue():
  decode = Recorder()
  batcher = _batcher(decode)
  blocker = _busy(batcher, decode)
  results = []
  gone = _submit_later(batcher, results, "k", ["gone"], gone=lambda: True)
  stays = _submit_later(batcher, results, "k", ["stays"])
  assert poll(lambda: batcher.queued_lines() == 2, 10)
  drained = []
  drainer = threading.Thread(target=lambda: drained.append(batcher.drain(10)))
  drainer.start()
  assert poll(lambda: not batcher._taking, 10)  # noqa: SLF001
  with pytest.raises(batching.Draining):
    batcher.submit("k", ["late"])
  decode.hold.set()
  for thread in (blocker, gone, stays, drainer):
    thread.join(10)
  assert drained == [True]
  assert ["STAYS"] in results
  assert any(isinstance(r, batching.ClientGone) for r in results)
  assert [lines for _, lines in decode.batches] == [["b"], ["stays"]]
