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


@pytest.mark.parametrize("requests, batches", [
    # 2 lines x 3 tokens fit in 6; a third line would make 9.
    ((["aaa"], ["b"], ["cc"]), [["aaa", "b"], ["cc"]]),
    # A longer later line pads the one before it: 2 x 4 tokens = 8.
    ((["a"], ["bbbb"]), [["a"], ["bbbb"]])])
def test_token_limit_counts_padding(requests, batches):
  decode = Recorder()
  batcher = batching.Batcher(decode, batching.BatchLimits(
      window_secs=0.05, max_lines=10, max_tokens=6), cost=len).start()
  blocker = _busy(batcher, decode)
  results, threads = [], []
  for lines in requests:
    threads.append(_submit_later(batcher, results, "k", lines))
    assert poll(lambda n=len(threads): batcher.queued_requests() == n, 10)
  decode.hold.set()
  for thread in threads + [blocker]:
    thread.join(10)
  assert [lines for _, lines in decode.batches[1:]] == batches
  assert batcher.drain(10)


def test_a_batch_at_the_line_limit_does_not_wait_for_its_window():
  decode = Recorder()
  batcher = _batcher(decode, window_secs=30.0, max_lines=2)
  results = []
  submitted = _submit_later(batcher, results, "k", ["a", "b"])
  submitted.join(3)
  answered_at_once = not submitted.is_alive()
  assert batcher.drain(10)  # (a batch still waiting is decoded now)
  assert answered_at_once and results == [["A", "B"]]


def test_a_decode_answering_more_results_than_lines_fails_its_batch():
  batcher = _batcher(lambda key, lines: list(lines) + ["extra"],
                     window_secs=0.001)
  with pytest.raises(RuntimeError,
                     match="^decode returned 2 results for 1 lines$"):
    batcher.submit("k", ["a"])
  assert batcher.drain(10)


def test_the_observer_counts_the_lines_of_each_batch():
  from t2tlite.serve.metrics import ServeMetrics
  metrics = ServeMetrics()
  batcher = batching.Batcher(
      Recorder(), batching.BatchLimits(window_secs=0.001),
      observer=metrics).start()
  assert batcher.submit("k", ["a", "b", "c"]) == ["A", "B", "C"]
  assert batcher.drain(10)
  value = metrics.registry.get_sample_value
  assert value("t2t_serve_sentences_total") == 3
  assert value("t2t_serve_batch_lines_count") == 1
  assert value("t2t_serve_batch_lines_sum") == 3


def test_an_alone_request_first_in_the_queue_is_not_joined():
  decode = Recorder()
  batcher = _batcher(decode)
  blocker = _busy(batcher, decode)
  results, threads = [], []
  for lines, alone in ((["a"], True), (["b"], False), (["c"], False)):
    threads.append(_submit_later(batcher, results, "k", lines, alone=alone))
    assert poll(lambda n=len(threads): batcher.queued_requests() == n, 10)
  decode.hold.set()
  for thread in threads + [blocker]:
    thread.join(10)
  assert [lines for _, lines in decode.batches[1:]] == [["a"], ["b", "c"]]
  assert batcher.drain(10)


def test_a_drain_decodes_a_waiting_batch_without_its_window():
  decode = Recorder()
  batcher = _batcher(decode, window_secs=30.0)
  results = []
  waiting = threading.Thread(
      target=lambda: results.append(batcher.submit("k", ["a"])), daemon=True)
  waiting.start()
  assert poll(lambda: batcher.queued_requests() == 1, 10)
  start = time.monotonic()
  assert batcher.drain(5)
  waiting.join(5)
  assert time.monotonic() - start < 5 and results == [["A"]]


def test_a_gone_client_is_counted_as_dropped_not_decoded():
  from t2tlite.serve.metrics import ServeMetrics
  metrics = ServeMetrics()
  decode = Recorder()
  batcher = batching.Batcher(
      decode, batching.BatchLimits(window_secs=0.001),
      observer=metrics).start()
  with pytest.raises(batching.ClientGone):
    batcher.submit("k", ["a"], gone=lambda: True)
  assert batcher.submit("k", ["b"]) == ["B"]
  assert batcher.drain(10)
  value = metrics.registry.get_sample_value
  assert value("t2t_serve_dropped_total", {"reason": "client_gone"}) == 1
  assert value("t2t_serve_sentences_total") == 1
  assert decode.batches == [("k", ["b"])]


def test_batch_metrics_record_lines_and_decode_seconds():
  from t2tlite.serve.metrics import ServeMetrics
  metrics = ServeMetrics()
  metrics.batch(3, 0.02)
  metrics.batch(1, 0.3)
  value = metrics.registry.get_sample_value
  assert value("t2t_serve_batch_seconds_sum") == pytest.approx(0.32)
  assert value("t2t_serve_batch_seconds_bucket", {"le": "0.025"}) == 1
  assert value("t2t_serve_batch_lines_bucket", {"le": "2.0"}) == 1
  assert value("t2t_serve_sentences_total") == 4


def test_the_queue_gauge_is_read_at_each_scrape():
  from t2tlite.serve.metrics import ServeMetrics
  metrics, depth = ServeMetrics(), [0]
  metrics.track_queue(lambda: depth[0])
  for lines in (5, 0, 2):
    depth[0] = lines
    assert metrics.registry.get_sample_value(
        "t2t_serve_queued_lines") == lines


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


def _timed_batcher(monkeypatch, patience_secs, window_secs, decode_secs=0.2,
                   share=10.0):
  """A batcher whose decode takes decode_secs and records its batches
  (decode.batches), with a linger and patience of patience_secs after it
  (`share` times the decode time, at most patience_secs; share=None: the
  batcher's own share)."""
  if share is not None:
    monkeypatch.setattr(batching, "LINGER_SHARE", share)
  monkeypatch.setattr(batching, "LINGER_MAX_SECS", patience_secs)

  def decode(key, lines):
    decode.batches.append(list(lines))
    time.sleep(decode_secs)
    return [line.upper() for line in lines]
  decode.batches = []
  return _batcher(decode, window_secs=window_secs), decode


def test_after_a_batch_it_waits_for_its_clients_until_all_may_be_back(
    monkeypatch):
  # A long linger (1 s after a 0.2 s decode), so that only the rule can
  # end it early, and gaps of 0.3 s that no scheduling delay closes.
  batcher, decode = _timed_batcher(monkeypatch, 1.0, window_secs=0.001)
  results = []
  answered = _submit_later(batcher, results, "k", ["a", "b"])
  assert poll(lambda: decode.batches, 10)
  queued = _submit_later(batcher, results, "k", ["x"])  # while it computes
  answered.join(10)
  # "x" waited already, and one of the two clients answered is back: the
  # batch waits for the other.
  back = _submit_later(batcher, results, "k", ["c"])
  time.sleep(0.3)
  other = _submit_later(batcher, results, "k", ["d"])
  for thread in (queued, back, other):
    thread.join(10)
  # As many lines back as the batch answered (3): decoded at once,
  # without the later "g".
  back = _submit_later(batcher, results, "k", ["e", "f", "h"])
  time.sleep(0.3)
  late = _submit_later(batcher, results, "k", ["g"])
  for thread in (back, late):
    thread.join(10)
  assert decode.batches == [["a", "b"], ["x", "c", "d"], ["e", "f", "h"],
                            ["g"]]
  assert batcher.drain(10)


def test_clients_back_within_three_quarters_of_a_decode_share_a_batch(
    monkeypatch):
  """The linger's default share: four clients just answered by a batch of
  0.3 s come back over 0.12 s (answered one after another, as the
  interpreter's lock spreads a server's answers) and share the next batch,
  whose linger (0.225 s) waits for them; a quarter's (0.075 s) would leave
  the last ones behind."""
  batcher, decode = _timed_batcher(monkeypatch, 10.0, window_secs=0.001,
                                   decode_secs=0.3, share=None)
  results = []
  assert batcher.submit("k", list("abcd")) == list("ABCD")
  back, threads = time.monotonic(), []
  for i, line in enumerate("efgh"):
    time.sleep(max(0.0, back + i * 0.04 - time.monotonic()))
    threads.append(_submit_later(batcher, results, "k", [line]))
  for thread in threads:
    thread.join(10)
  assert decode.batches == [list("abcd"), list("efgh")]
  assert batcher.drain(10)


def test_the_linger_after_a_long_batch_is_at_most_50_ms():
  """A batch of four lines that takes 0.4 s would linger 0.3 s for its
  clients; one coming back alone waits at most 50 ms (and the quiet
  window) for the other three, as after a large model's batch of
  seconds."""
  spans = []

  def decode(key, lines):
    start = time.monotonic()
    time.sleep(0.4)
    spans.append((start, time.monotonic()))
    return list(lines)
  batcher = _batcher(decode, window_secs=0.001)
  assert batcher.submit("k", list("abcd")) == list("abcd")
  assert batcher.submit("k", ["e"]) == ["e"]
  waited = spans[1][0] - spans[0][1]
  assert waited < 0.2, waited  # 0.05 s, where the share alone gives 0.3
  assert batcher.drain(10)


def test_a_burst_shares_a_batch_and_a_stream_is_decoded_before_its_end(
    monkeypatch):
  # Patience (and linger) 1.5 s after a 0.2 s decode; a window of 0.4 s.
  batcher, decode = _timed_batcher(monkeypatch, 1.5, window_secs=0.4)
  results = []

  def send(lines, every):
    """Submits each line `every` seconds apart (on a fixed schedule)."""
    start, threads = time.monotonic(), []
    for i, line in enumerate(lines):
      time.sleep(max(0.0, start + i * every - time.monotonic()))
      threads.append(_submit_later(batcher, results, "k", [line]))
    for thread in threads:
      thread.join(30)

  # Five lines, so that the burst of four never holds as many lines as
  # this batch answered (which would end the linger at once).
  assert batcher.submit("k", list("vwxyz")) == list("VWXYZ")
  # 0.25 s apart, within the window of each other: one batch, though the
  # last came after the first's window.
  send(["b", "c", "d", "e"], 0.25)
  assert decode.batches[1] == ["b", "c", "d", "e"]
  # A request every 0.1 s for 2.5 s never leaves a quiet window: batches
  # form before the stream's end (here by the linger after that batch,
  # whose four lines back end it; the patience alone: the test below).
  stream = [f"s{i}" for i in range(25)]
  send(stream, 0.1)
  formed = decode.batches[2:]
  assert [line for batch in formed for line in batch] == stream
  assert len(formed) >= 2 and 2 <= len(formed[0]) <= 20, formed
  assert batcher.drain(10)


def test_a_stream_from_the_start_is_decoded_at_the_patience_not_its_end():
  """Before any batch the patience is the window: a request every 0.1 s
  never leaves a quiet window of 0.25 s, so the first batch forms 0.25 s
  after its oldest request (patience), not once the stream stops (1.4 s
  in). A stalled machine can only end the window sooner."""
  started = []

  def decode(key, lines):
    started.append((time.monotonic(), len(lines)))
    return list(lines)
  batcher, results, threads = _batcher(decode, window_secs=0.25), [], []
  first = time.monotonic()
  for i in range(15):
    time.sleep(max(0.0, first + i * 0.1 - time.monotonic()))
    threads.append(_submit_later(batcher, results, "k", [f"s{i}"]))
  for thread in threads:
    thread.join(30)
  assert len(results) == 15 and sum(n for _, n in started) == 15
  formed, lines = started[0]
  assert formed - first < 0.9 and lines < 10, started
  assert batcher.drain(10)


def test_a_client_back_within_the_linger_waits_for_no_window(monkeypatch):
  """One client sending line after line: its first line waits the quiet
  window (1 s), the next ones, back as the linger expects, do not."""
  batcher, decode = _timed_batcher(monkeypatch, 2.0, window_secs=1.0)
  took = []
  for line in "abc":
    start = time.monotonic()
    assert batcher.submit("k", [line]) == [line.upper()]
    took.append(time.monotonic() - start)
  assert took[0] >= 1.2 and max(took[1:]) < 0.7, took  # decode: 0.2 s
  assert decode.batches == [["a"], ["b"], ["c"]]
  assert batcher.drain(10)


@pytest.mark.parametrize("max_lines,max_tokens,chars,tokens", [
    (32, 2048, 252, 64),   # the defaults: 64 tokens a line
    (4, 2048, 1000, 251),  # 512 tokens a line: cut at max_line_chars
    (8, 200, 96, 25),      # a cut that falls after a space
    (32, 16, 7, 2)])       # under a token a line: the shortest text
def test_the_warm_up_batch_is_the_largest_the_limits_let_form(
    max_lines, max_tokens, chars, tokens):
  from t2tlite.serve.app import TranslateLine, estimated_tokens, full_batch
  limits = batching.BatchLimits(max_lines=max_lines, max_tokens=max_tokens)
  lines = full_batch(limits, max_line_chars=1000)
  assert len(lines) == max_lines and len(set(lines)) == 1
  assert len(lines[0]) == chars
  assert estimated_tokens(TranslateLine(lines[0], None)) == tokens
