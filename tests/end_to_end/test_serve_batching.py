"""t2t-serve under load: dynamic batching, overload, health, metrics and the
drain on SIGTERM, against one real server on 127.0.0.1 (started again for
the tests after the SIGTERM test: tests/support/restartable.py).

The module's server serves the session's shared transformer_tiny export
(random weights, a Multi30k vocabulary, beam_size=2,alpha=0.6 fixed in
the graph: tests/support/shared_export.py, read only) with small batches
and a small queue (SERVER_FLAGS), so that 128 clients overload it. Requests the
export cannot answer (other decode hparams, the n-best) make the server
rebuild the model from the run folder and trace a search for them, which
takes seconds: the tests use such a request to keep the batcher busy.
"""
import collections
import json
import os
import re
import signal
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from restartable import Restartable
from run_folder import multi30k_lines, needs_multi30k
from shared_export import shared_export
import train_helpers

# Whichever test comes first builds the module's export and server (a
# minute on a loaded machine), and the one after the SIGTERM test starts a
# server again: the limit holds those as well as the test.
pytestmark = [needs_multi30k, pytest.mark.timeout(600)]

SERVER_FLAGS = ["--max_batch_lines=4", "--max_queued_lines=8",
                "--batch_window_ms=5", "--drain_secs=120"]
START_SECS = 300  # a loaded 2-core machine starts TensorFlow slowly


def _request(url, path, body=None, timeout=120):
  """(status, headers, decoded JSON or text) of a GET (body None) or POST."""
  data = None if body is None else json.dumps(body).encode()
  request = urllib.request.Request(url + path, data=data)
  try:
    with urllib.request.urlopen(request, timeout=timeout) as response:
      status, headers, text = response.status, response.headers, \
          response.read().decode()
  except urllib.error.HTTPError as error:
    status, headers, text = error.code, error.headers, error.read().decode()
  is_json = headers.get("Content-Type", "").startswith("application/json")
  return status, headers, json.loads(text) if is_json else text


def _translate(url, lines, timeout=120, **fields):
  return _request(url, "api/translate", dict(lines=lines, **fields),
                  timeout=timeout)


def _metrics(url):
  """{(name, labels as a sorted tuple): value} of GET /metrics, read with
  prometheus_client's own parser."""
  _, _, text = _request(url, "metrics")
  return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
          for family in text_string_to_metric_families(text)
          for sample in family.samples}


def _rss_kb(pid):
  with open(f"/proc/{pid}/status") as f:
    return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def _in_threads(count, work, timeout=180):
  """Runs work(i) in `count` threads started together; their results."""
  results, start = [None] * count, threading.Barrier(count)

  def run(i):
    start.wait()
    results[i] = work(i)

  threads = [threading.Thread(target=run, args=(i,), daemon=True)
             for i in range(count)]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join(timeout)
  assert not any(thread.is_alive() for thread in threads)
  return results


WarmUp = collections.namedtuple("WarmUp", "statuses log path")


def _watch_warm_up(proc, log_path, deadline):
  """The URL and a WarmUp: the /readyz statuses seen from the "warming up"
  line until the server is ready (or the deadline), and its log then."""
  url, statuses = None, []
  while time.time() < deadline and proc.poll() is None:
    with open(log_path, encoding="utf-8", errors="replace") as f:
      log = f.read()
    if url is None:
      match = re.search(r"warming up at (http://127\.0\.0\.1:\d+/)", log)
      url = match and match.group(1)
    if url:
      status, headers, _ = _request(url, "readyz", timeout=30)
      statuses.append((status, headers.get("Retry-After"),
                       _request(url, "healthz", timeout=30)[0]))
      if status == 200:
        with open(log_path, encoding="utf-8", errors="replace") as f:
          return url, WarmUp(statuses, f.read(), log_path)
    time.sleep(0.05)
  pytest.fail(f"t2t-serve did not become ready (exit {proc.poll()}):\n"
              f"{open(log_path, errors='replace').read()[-4000:]}")


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
  """A Restartable of (URL, Popen, WarmUp): t2t-serve over the shared
  export with SERVER_FLAGS, started again after a test stopped it; killed
  at teardown if still running."""
  tmp = tmp_path_factory.mktemp("serve_batching")
  version = shared_export(tmp_path_factory)
  with train_helpers.processes() as started:

    def start():
      port, = train_helpers.free_ports(1)
      log_path = tmp / f"serve{len(started)}.log"
      proc = train_helpers.start(
          [train_helpers.console_script("t2t-serve"), f"--model={version}",
           f"--port={port}", *SERVER_FLAGS], str(log_path))
      started.append(proc)
      url, warm_up = _watch_warm_up(proc, log_path, time.time() + START_SECS)
      return (url, proc, warm_up), proc

    yield Restartable(start)


@pytest.fixture
def server(servers):
  """(URL, Popen, WarmUp) of a running t2t-serve (`servers`)."""
  return servers.get()


@pytest.fixture(scope="module")
def lines():
  """24 different sentences of several lengths."""
  return [line[:length] for line, length in zip(
      multi30k_lines("en", 24), [200, 12, 40, 90] * 6)]


@pytest.fixture(scope="module")
def alone(servers, lines):
  """Each line's translation, sent alone, one request at a time."""
  url = servers.get()[0]
  answers = []
  for line in lines:
    status, _, answer = _translate(url, [line])
    assert status == 200, answer
    answers.append(answer["translations"][0])
  return answers


def test_readyz_answers_503_while_warming_up_on_a_full_batch(server):
  statuses, log, _ = server[2]
  assert statuses[0] == (503, "5", 200)  # alive, not ready
  assert statuses[-1][0] == 200
  # Before ready, a batch at the limits: --max_batch_lines=4 lines, each
  # as long as --max_line_chars (1000) allows, since 2048 tokens / 4
  # would be longer.
  # Stamped as the log lines are; a duration at its precision (0.0 s
  # said nothing).
  assert re.search(r"^\d\d:\d\d:\d\d t2t_serve: warm-up: a full batch \(4 "
                   r"lines of 1000 characters\) in (\d+ms|\d+\.\dm?s)$", log,
                   re.M), log
  assert re.search(r"^\d\d:\d\d:\d\d t2t_serve: warming up at ", log, re.M)
  assert not re.search(r"in 0\.0", log), log


def test_answers_under_load_equal_answers_alone(server, lines, alone):
  url = server[0]
  before = _metrics(url)

  def client(i):
    # Three lines each, one a request; "alpha=0.6" is the export's own
    # value, so those requests share the others' batches.
    return [_translate(url, [lines[j]], decode_hparams="alpha=0.6"
                       if j % 2 else "") for j in range(i, 24, 8)]

  answers = _in_threads(8, client)
  for i, client_answers in enumerate(answers):
    for j, (status, _, answer) in zip(range(i, 24, 8), client_answers):
      assert status == 200, answer
      assert answer["translations"] == [alone[j]], lines[j]
  # Two lines in one request: the same answers.
  status, _, answer = _translate(url, lines[:2])
  assert answer["translations"] == alone[:2]
  after = _metrics(url)
  batches = (after[("t2t_serve_batch_lines_count", ())] -
             before[("t2t_serve_batch_lines_count", ())])
  sentences = (after[("t2t_serve_sentences_total", ())] -
               before[("t2t_serve_sentences_total", ())])
  assert sentences == 26
  assert batches < 25  # some batches held lines of several requests


def test_lines_with_target_prefixes_batch_each_with_its_own(server, lines):
  """Requests with and without target prefixes share batches (the export's
  translate_with_prefix signature): each answer is the one it gets alone;
  a prefix the vocabulary cannot encode fails only its own request."""
  url = server[0]
  # 7 requests and the bad one: at most --max_queued_lines=8 wait.
  prefixes = ["Ein Hund", "", "Zwei", "", "Ein Hund", "", "Zwei"]
  picked = lines[1:8]

  def send(i):
    if i == len(picked):  # a bad prefix among them
      return _translate(url, [picked[0]], target_prefixes=["\u65e5\u672c"])
    return _translate(url, [picked[i]], target_prefixes=[prefixes[i]])

  alone = []
  for i in range(len(picked)):
    status, _, answer = send(i)
    assert status == 200, answer
    alone.append(answer["translations"][0])
    assert alone[-1].startswith(prefixes[i]), (prefixes[i], alone[-1])
  before = _metrics(url)
  answers = _in_threads(len(picked) + 1, send)
  for i, (status, _, answer) in enumerate(answers[:-1]):
    assert status == 200, answer
    assert answer["translations"] == [alone[i]], (picked[i], prefixes[i])
  status, _, answer = answers[-1]
  assert status == 400, answer
  # Named, with the reason, as the run folder's check names it.
  assert answer["error"] == (
      "target_prefixes: target prefix 1 ('\u65e5\u672c'): the target "
      "vocabulary cannot encode (it holds a piece the vocabulary does not "
      "know)"), answer
  after = _metrics(url)
  batches = (after[("t2t_serve_batch_lines_count", ())] -
             before[("t2t_serve_batch_lines_count", ())])
  assert batches < len(picked) + 1  # some batches held several requests


def _send_and_hold(port, lines):
  """A socket that has sent a whole translate request, still open."""
  body = json.dumps({"lines": lines, "decode_hparams": "beam_size=3"})
  sock = socket.create_connection(("127.0.0.1", port), timeout=30)
  sock.sendall(f"POST /api/translate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               f"Content-Type: application/json\r\nContent-Length: "
               f"{len(body)}\r\n\r\n{body}".encode())
  return sock


def test_request_of_a_client_gone_is_not_decoded(server, lines):
  url, _, _ = server
  port = int(url.rsplit(":", 1)[1].strip("/"))
  before = _metrics(url)
  # The first beam_size=3 request traces a new search: seconds, during
  # which the requests after it wait in the queue.
  blocker = []
  thread = threading.Thread(target=lambda: blocker.append(_translate(
      url, lines[:2], decode_hparams="beam_size=3")))
  thread.start()
  held = []
  try:
    time.sleep(0.3)
    held = [_send_and_hold(port, [line]) for line in lines[2:5]]
    assert train_helpers.poll(lambda: _metrics(url)[
        ("t2t_serve_queued_lines", ())] == 3, 60)
  finally:
    for sock in held:
      sock.close()  # the clients go while their requests are queued
  thread.join(180)
  assert blocker and blocker[0][0] == 200
  # Their batch forms after the blocker's (up to 50 ms later, the batcher's
  # wait for returning clients).
  dropped = ("t2t_serve_dropped_total", (("reason", "client_gone"),))
  assert train_helpers.poll(lambda: dropped in _metrics(url), 10)
  after = _metrics(url)
  assert after[dropped] - before.get(dropped, 0) == 3
  assert (after[("t2t_serve_sentences_total", ())] -
          before[("t2t_serve_sentences_total", ())]) == 2


def test_overload_gets_fast_503s_then_normal_answers(server, lines, alone):
  url, proc, _ = server
  rss_before = _rss_kb(proc.pid)
  shed_key = ("t2t_serve_requests_total", (("path", "/api/translate"),
                                          ("status", "503")))
  before = _metrics(url)

  def client(i):
    start = time.perf_counter()
    status, headers, answer = _translate(url, [lines[i % 24]], timeout=120)
    return (status, time.perf_counter() - start, headers.get("Retry-After"),
            answer)

  results = _in_threads(128, client)
  statuses = [status for status, _, _, _ in results]
  assert set(statuses) <= {200, 503}, results
  shed = [r for r in results if r[0] == 503]
  assert shed, "128 clients against a queue of 8 lines: expected 503s"
  assert all(retry == "1" and "--max_queued_lines" in answer["error"]
             for _, _, retry, answer in shed)
  # Each 503 left the server within 100 ms of its arrival (the server's
  # own clock). Seen from these 128 client threads starting together on a
  # shared 2-core machine, each also takes the clients' own start and
  # waitress accepting 128 connections in one thread (medians of 0.07 to
  # 0.2 s here): bounded loosely, at once rather than after
  # --request_timeout_secs (30 s).
  after = _metrics(url)
  served_503 = {}
  for le in ("0.1", "+Inf"):
    key = ("t2t_serve_request_seconds_bucket", (
        ("le", le), ("path", "/api/translate"), ("status", "503")))
    served_503[le] = after[key] - before.get(key, 0)
  # Every 503 is counted, and at least 95% left within 100 ms: one thread
  # descheduled on a loaded 2-core machine (1 of 114, seen once in CI) is
  # not a slow shed, which the clients' 5 s bound below would catch.
  assert served_503["+Inf"] == len(shed)
  assert served_503["0.1"] >= 0.95 * len(shed), served_503
  assert max(seconds for _, seconds, _, _ in shed) < 5
  for i, (status, _, _, answer) in enumerate(results):
    if status == 200:
      assert answer["translations"] == [alone[i % 24]]
  # Normal afterwards, and the memory back near where it was.
  status, _, answer = _translate(url, lines[:1])
  assert status == 200 and answer["translations"] == alone[:1]
  assert _rss_kb(proc.pid) <= 1.10 * rss_before
  assert after[shed_key] - before.get(shed_key, 0) == len(shed)


def test_metrics_parse_with_prometheus_client(server, lines):
  url, _, warm_up = server
  before = _metrics(url)
  status, _, answer = _translate(url, lines[:3])
  assert status == 200, answer
  after = _metrics(url)

  def added(name, *labels):
    key = (name, tuple(sorted(labels)))
    return after[key] - before.get(key, 0)

  assert after[("t2t_serve_queued_lines", ())] == 0
  # One request of 3 lines: one batch (--max_batch_lines=4) of 3 sentences.
  assert added("t2t_serve_sentences_total") == 3
  assert added("t2t_serve_batch_lines_count") == 1
  assert added("t2t_serve_batch_lines_sum") == 3
  assert added("t2t_serve_request_seconds_count", ("path", "/api/translate"),
               ("status", "200")) == 1
  assert added("t2t_serve_requests_total", ("path", "/api/translate"),
               ("status", "200")) == 1
  # /readyz said 503 exactly as often as this server's warm-up saw it.
  warming = sum(1 for status, _, _ in warm_up.statuses if status == 503)
  assert warming >= 1
  assert after[("t2t_serve_requests_total", (
      ("path", "/readyz"), ("status", "503")))] == warming


def test_sigterm_drains_under_load_and_exits_0(server, lines, alone):
  """It stops the server (the next test is given a new one)."""
  url, proc, _ = server
  # A request that takes seconds (a new search traced) is computing when
  # SIGTERM comes; meanwhile 16 clients send requests until they get a
  # 503: the queue's 8 lines wait behind it, the others are told "busy".
  blocker = []
  thread = threading.Thread(target=lambda: blocker.append(_translate(
      url, lines[:3], decode_hparams="beam_size=4")))
  thread.start()
  time.sleep(0.3)

  def client(i):
    answers = []
    for _ in range(100):  # bounded
      status, _, answer = _translate(url, [lines[i]])
      answers.append((status, answer))
      if status != 200:
        return answers
    return answers

  results = []
  clients = threading.Thread(target=lambda: results.extend(
      _in_threads(16, client)))
  clients.start()
  time.sleep(0.3)
  proc.send_signal(signal.SIGTERM)
  # The signal is handled within waitress's 1 s loop timeout.
  assert train_helpers.poll(
      lambda: _request(url, "readyz", timeout=30)[0] == 503, 10)
  clients.join(200)
  thread.join(200)
  assert proc.wait(timeout=150) == 0
  # Every request got an answer: the accepted ones their translation.
  assert blocker and blocker[0][0] == 200
  assert len(results) == 16
  for i, answers in enumerate(results):
    *answered, (last_status, last) = answers
    assert last_status == 503, answers
    assert re.match("(busy|draining)", last["error"]), last
    assert all(status == 200 and answer["translations"] == [alone[i]]
               for status, answer in answered)
  assert any("draining" in answers[-1][1]["error"] for answers in results)
  # Said once, stamped like the log, the command named once.
  with open(server[2].path, encoding="utf-8") as f:
    log = f.read()
  assert len(re.findall(r"^\d\d:\d\d:\d\d t2t_serve: SIGTERM, draining$",
                        log, re.M)) == 1, log
  assert "t2t-serve: t2t" not in log and "t2t_serve: t2t" not in log, log
  assert re.search(r"^\d\d:\d\d:\d\d t2t_serve: stopped$", log, re.M), log
