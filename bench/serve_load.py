"""t2t-serve under concurrent clients beside t2t-decoder's offline rate, on
the same lines, same model, same sitting.

    python bench/serve_load.py --output_dir=RUN_FOLDER [--inputs=lines.txt]
    python bench/serve_load.py --hparams_set=transformer_base \\
        [--decode_hparams=beam_size=4,alpha=0.6,extra_length=10]
    python bench/serve_load.py ... [--overload_clients=128]
        [--overload_secs=5] [--overload_repeats=1] [--rounds=0]
        [--serve_flags="--nowarm_up_full_batch ..."]
    python bench/serve_load.py --output_dir=RUN_FOLDER \
        --request_decode_hparams=beam_size=4,alpha=0.6,xla_lines=16

Exports the run folder (or, with --hparams_set, a randomly initialised
model of that set with a vocabulary trained on the lines, as
bench/export_latency.py does) to a temporary folder, starts t2t-serve over
the export on a free port of 127.0.0.1 with its default flags (and
--serve_flags), then for --rounds rounds (0: none, the overload alone),
alternating in one sitting:

  * offline: t2t-decoder's search (`Decoder.decode_lines`: batches of 32
    lines of similar length) on the run folder's model in this process,
    float32 as the export computes, timed after a warm-up call, so without
    process start-up or tracing;
  * with 16 among --clients, the same search over consecutive batches of
    16 lines in the order sent, not sorted by length: the batches 16
    one-sentence clients form at best ("offline_in_order": 16), so the
    server's rate at 16 clients over it is its batching's efficiency;
  * for each of --clients (1, 4, 16, 64) concurrent clients: the --lines
    lines, one sentence a POST /api/translate, shared out among the
    clients (client i sends lines i, i + clients, ...). Each client keeps
    its HTTP/1.1 connection open from request to request, as a load
    balancer does (--new_connections: a new one a request).

With --request_decode_hparams every request asks for those decode
hparams, which t2t-serve decodes from the run folder (a Decoder, e.g. with
xla_lines) rather than the SavedModel; the offline rates stay the export's
search.

After the rounds, the overload (--overload_clients, default 128; 0:
none; --overload_repeats times, default once) against the same server
and its default queue: that many clients each send one-sentence
requests, one after another, for --overload_secs seconds. Its JSON line
("overload": true, "repeat") holds: "statuses" (count by HTTP status;
"none" for no answer), "shed_ms" (max and p99 of the 503s' latency as
the clients measured it), "server_shed" (the 503s the server's /metrics
histogram counted, how many within 100 ms, their mean, and the
histogram's upper bound for the slowest),
"answered_p50_ms"/"answered_p99_ms" (the 200s), "mismatches" (200s
differing from the line's answer alone), "after" (--after_requests
normal requests sent one at a time once it settled: how many got 200
with the line's answer alone), "rss_kb" (the server's resident memory,
VmRSS of /proc/PID/status: after warm-up, before the overload, and
settled: after a --settle_secs pause and those requests), "rss_ratio"
(settled over before the overload, and over after warm-up), and
"requirement": whether only 200s and 503s came, every 503 within 100 ms
by both clocks (null if no 503 came), every request afterwards answered
as alone, and the memory settled within 10% of where it was before the
overload. A client sends its next request as soon as it has an answer, a
503 too (the worst case: it does not wait the Retry-After). 128
one-sentence clients cannot pass the default queue of 128 lines (at most
128 requests wait, fewer while a batch computes), so they get no 503;
more clients do.

Prints JSON lines: the machine (bench/export_latency.py's), one line a
measurement, then the medians over rounds: sentences/s, p50 and p99
latency (of all requests of the level), errors, the server's mean batch
and share of the wall time spent decoding, and the ratios asked of
batching (16 clients against 1; against offline; and against the
offline rate in batches of 16 in order). Each level's line and the
medians also say the CPU it took: the server process's and the clients'
(this process's) CPU-ms a request, and the offline searches' CPU-ms a
sentence ("cpu_ms_per_sentence", this process). From them, the rate the
cores (those this process may run on) could give at most if every
request cost what it cost here ("cpu_bound_over_offline": cores /
(server + client CPU a request),
over the offline rate), and the server's CPU a request that 40% of the
offline rate would leave ("server_cpu_ms_for_40_percent": cores over
40% of the offline rate, less the clients' CPU; the clients share this
machine's cores), and what a request cost the server beyond the search
of batches of 16 in order ("server_cpu_ms_beyond_search": the server's
CPU a request less that search's CPU a sentence). Every answer must equal
the one the same line gets alone (checked, counted in "mismatches"). The
server is always stopped (SIGTERM); its drain must end with exit 0.
"""
import argparse
import http.client
import json
import os
import re
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import t2tlite  # noqa: F401  (oneDNN set before TensorFlow loads)

# Run as a script, so bench/ comes first on the import path.
from export_latency import export_random_model, machine, sentences  # noqa: E402
from serve_latency import start_server  # noqa: E402

from t2tlite.decode.machine import (  # noqa: E402
    cpu_cores, searches_for, set_search_threads, settle)
from t2tlite.decode.settings import DecodeHParams  # noqa: E402


# Fields every translate request carries besides its line: with
# --request_decode_hparams, {"decode_hparams": ...} (set once, by main).
REQUEST_FIELDS = {}


def request_body(line):
  return json.dumps(dict(REQUEST_FIELDS, lines=[line])).encode()


def post(url, line, timeout=300):
  """(status, translation or None, seconds) of one one-line request."""
  request = urllib.request.Request(
      url + "api/translate", method="POST", data=request_body(line),
      headers={"Content-Type": "application/json"})
  start = time.perf_counter()
  try:
    with urllib.request.urlopen(request, timeout=timeout) as response:
      text = json.loads(response.read())["translations"][0]
      return response.status, text, time.perf_counter() - start
  except urllib.error.HTTPError as error:
    return error.code, None, time.perf_counter() - start
  except OSError:
    return None, None, time.perf_counter() - start


class Client:
  """One client's connection to the server. By default kept open from
  request to request (HTTP/1.1 keep-alive, as a load balancer or an HTTP
  client library keeps it), opened again when the server closes it;
  new_connections: a new connection a request, as urllib opens.

  post(line) -> (status, translation or None, seconds), status None when
  no answer came.
  """

  def __init__(self, url, new_connections=False, timeout=300):
    self._url, self._new, self._timeout = url, new_connections, timeout
    address = urllib.parse.urlsplit(url)
    self._connect = lambda: http.client.HTTPConnection(
        address.hostname, address.port, timeout=timeout)
    self._connection = None

  def post(self, line):
    if self._new:
      return post(self._url, line, self._timeout)
    body = request_body(line)
    start = time.perf_counter()
    for attempt in range(2):
      reused = self._connection is not None
      try:
        if not reused:
          self._connection = self._connect()
        self._connection.request("POST", "/api/translate", body, {
            "Content-Type": "application/json"})
        response = self._connection.getresponse()
        data = response.read()
        if response.will_close:
          self.close()
        text = (json.loads(data)["translations"][0]
                if response.status == 200 else None)
        return response.status, text, time.perf_counter() - start
      except (http.client.HTTPException, OSError):
        self.close()
        if not reused or attempt:  # a fresh connection failed: no answer
          return None, None, time.perf_counter() - start

  def close(self):
    if self._connection is not None:
      self._connection.close()
      self._connection = None


def percentile(values, fraction):
  ordered = sorted(values)
  return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def scrape(url):
  """The server's /metrics text."""
  with urllib.request.urlopen(url + "metrics", timeout=60) as response:
    return response.read().decode()


def batch_totals(url):
  """(batches, lines, decode seconds) so far, from the server's /metrics."""
  text = scrape(url)
  value = {name: float(number) for name, number in re.findall(
      r"^(t2t_serve_batch_\w+_(?:count|sum)) (\S+)$", text, re.M)}
  return (value["t2t_serve_batch_lines_count"],
          value["t2t_serve_batch_lines_sum"],
          value["t2t_serve_batch_seconds_sum"])


def cpu_seconds(pid):
  """A process's user + system CPU seconds so far (/proc/PID/stat)."""
  with open(f"/proc/{pid}/stat") as f:
    fields = f.read().rsplit(")", 1)[1].split()
  # utime and stime, the 14th and 15th fields (the 12th, 13th after comm).
  return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load_level(url, lines, clients, expected, new_connections=False,
               server_pid=None):
  """One level: `clients` threads share out `lines`; its figures, with
  the server's mean batch, the share of the time it spent decoding, and
  (given its pid) its CPU and the clients' CPU a request."""
  results = [None] * len(lines)
  before = batch_totals(url)
  server_cpu = cpu_seconds(server_pid) if server_pid else None
  client_cpu = time.process_time()

  def client(first):
    connection = Client(url, new_connections)
    for i in range(first, len(lines), clients):
      results[i] = connection.post(lines[i])
    connection.close()

  threads = [threading.Thread(target=client, args=(c,))
             for c in range(clients)]
  start = time.perf_counter()
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  wall = time.perf_counter() - start
  client_cpu = time.process_time() - client_cpu
  if server_pid:
    server_cpu = cpu_seconds(server_pid) - server_cpu
  ok = [r for r in results if r[0] == 200]
  seconds = [r[2] for r in ok]
  batches, batched, decoding = (b - a for a, b in zip(before,
                                                       batch_totals(url)))
  return {"clients": clients, "sentences": len(lines), "wall_s": wall,
          "mean_batch_lines": batched / batches if batches else None,
          "decoding_share": decoding / wall,
          "sentences_per_s": len(ok) / wall,
          "p50_ms": 1000 * percentile(seconds, 0.5) if seconds else None,
          "p99_ms": 1000 * percentile(seconds, 0.99) if seconds else None,
          "errors": len(lines) - len(ok),
          "mismatches": sum(r[1] != want for r, want in zip(results, expected)
                            if r[0] == 200),
          "server_cpu_ms_per_request": (1000 * server_cpu / len(lines)
                                        if server_pid else None),
          "client_cpu_ms_per_request": 1000 * client_cpu / len(lines)}


def rss_kb(pid):
  """A process's resident memory (VmRSS of /proc/PID/status), in kB."""
  with open(f"/proc/{pid}/status") as f:
    return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1))


def shed_histogram(url):
  """{bucket bound ("0.1", "+Inf", ...) or "sum": value} of the server's
  latency histogram of translate requests answered 503."""
  from prometheus_client.parser import text_string_to_metric_families
  values = {}
  for family in text_string_to_metric_families(scrape(url)):
    for sample in family.samples:
      if (sample.labels.get("path") == "/api/translate" and
          sample.labels.get("status") == "503"):
        if sample.name.endswith("_bucket"):
          values[sample.labels["le"]] = sample.value
        elif sample.name.endswith("_sum"):
          values["sum"] = sample.value
  return values


def server_shed(before, after):
  """The 503s answered between two shed_histogram()s: how many, how many
  within 100 ms, their mean, and the smallest bucket bound holding all."""
  delta = {key: value - before.get(key, 0) for key, value in after.items()}
  count = delta.get("+Inf", 0)
  bounds = sorted((float(le), n) for le, n in delta.items() if le != "sum")
  return {"count": int(count), "within_100ms": int(delta.get("0.1", 0)),
          "mean_ms": 1000 * delta["sum"] / count if count else None,
          "slowest_at_most_s": next((le for le, n in bounds if n == count),
                                    None) if count else None}


def overload_level(url, lines, expected, clients, seconds,
                   new_connections=False):
  """`clients` threads each send one-line requests, one after another
  (client i: lines i, i + clients, ... round the list), until `seconds`
  have passed; (status, seconds, mismatch) of every request, and the
  server's 503 histogram before and after."""
  results = [[] for _ in range(clients)]
  ready = threading.Barrier(clients + 1)

  def client(c):
    connection = Client(url, new_connections, timeout=60)
    ready.wait()
    i = c
    while time.perf_counter() < stop:
      status, text, secs = connection.post(lines[i % len(lines)])
      results[c].append((status, secs, status == 200 and
                         text != expected[i % len(lines)]))
      i += clients
    connection.close()

  shed_before = shed_histogram(url)
  threads = [threading.Thread(target=client, args=(c,), daemon=True)
             for c in range(clients)]
  for thread in threads:
    thread.start()
  stop = time.perf_counter() + seconds
  ready.wait()
  for thread in threads:
    thread.join()
  return [r for rows in results for r in rows], shed_before, \
      shed_histogram(url)


def overload(url, pid, lines, expected, args, rss_warm):
  """The overload level's JSON row (see the module's docstring)."""
  rss_before = rss_kb(pid)
  start = time.perf_counter()
  rows, shed_before, shed_after = overload_level(
      url, lines, expected, args.overload_clients, args.overload_secs,
      args.new_connections)
  wall = time.perf_counter() - start
  statuses = {}
  for status, _, _ in rows:
    key = str(status) if status is not None else "none"
    statuses[key] = statuses.get(key, 0) + 1
  shed = [secs for status, secs, _ in rows if status == 503]
  answered = [secs for status, secs, _ in rows if status == 200]
  server = server_shed(shed_before, shed_after)
  # Settled: a pause, then normal requests one at a time, each checked.
  time.sleep(args.settle_secs)
  after = [post(url, lines[i % len(lines)])
           for i in range(args.after_requests)]
  after_ok = sum(status == 200 and text == expected[i % len(lines)]
                 for i, (status, text, _) in enumerate(after))
  rss_settled = rss_kb(pid)

  def ms(values, fraction):
    return 1000 * percentile(values, fraction) if values else None
  return {
      "overload": True, "clients": args.overload_clients,
      "seconds": args.overload_secs, "wall_s": wall, "requests": len(rows),
      "statuses": statuses,
      "shed_ms": {"max": 1000 * max(shed) if shed else None,
                  "p99": ms(shed, 0.99)},
      "server_shed": server,
      "answered_p50_ms": ms(answered, 0.5),
      "answered_p99_ms": ms(answered, 0.99),
      "mismatches": sum(mismatch for _, _, mismatch in rows),
      "after": {"requests": len(after), "answered_as_alone": after_ok},
      "rss_kb": {"after_warm_up": rss_warm, "before_overload": rss_before,
                 "settled": rss_settled},
      "rss_ratio": {"settled_over_before": rss_settled / rss_before,
                    "settled_over_warm_up": rss_settled / rss_warm},
      "requirement": {
          "only_200_and_503": set(statuses) <= {"200", "503"},
          # None: no 503 came, so none to time.
          "shed_within_100ms": (all(secs <= 0.1 for secs in shed) and
                                server["within_100ms"] == server["count"]
                                if shed or server["count"] else None),
          "answered_as_alone_after": after_ok == len(after) > 0,
          "memory_within_10pct": rss_settled <= 1.10 * rss_before},
      "load_average": list(os.getloadavg())}


def run_decoder(run_folder, settled):
  """t2t-decoder's Decoder on a run folder's model (its road:
  `run_decoding.load_run`, the problem's constraint applied), in float32,
  searching as `settled` (a `SettledDecode`) says."""
  from t2tlite import precision, run_decoding
  return run_decoding.load_run(
      run_folder, dtype=precision.KERAS_POLICY["float32"]).decoder(settled)


def offline_decoder(run_folder, saved_model):
  """t2t-decoder's Decoder on the run folder, with the export's decode
  hparams, in float32."""
  from export_latency import export_metadata
  decode = export_metadata(saved_model)["decode_hparams"]
  hp = DecodeHParams.from_record(decode)
  return run_decoder(run_folder, settle(hp))


def offline_rate(decoder, lines):
  """t2t-decoder's rate on `lines` (its batches of similar length); the
  row and the outputs."""
  start, cpu = time.perf_counter(), time.process_time()
  outputs, _ = decoder.decode_lines(lines, progress=False)
  wall = time.perf_counter() - start
  return {"offline": True, "sentences": len(lines), "wall_s": wall,
          "sentences_per_s": len(lines) / wall,
          "cpu_ms_per_sentence": _ms_each(cpu, lines)}, outputs


def _ms_each(cpu_start, lines):
  """This process's CPU-ms since `cpu_start` (process_time), a line."""
  return 1000 * (time.process_time() - cpu_start) / len(lines)


def in_order_rate(decoder, lines, size):
  """The rate of the same search over consecutive batches of `size`
  lines in the order given: the batches `size` one-sentence clients form
  at best (the level of `size` clients sends lines i, i + size, ...)."""
  start, cpu = time.perf_counter(), time.process_time()
  for first in range(0, len(lines), size):
    decoder.decode_batch(lines[first:first + size])
  wall = time.perf_counter() - start
  return {"offline_in_order": size, "sentences": len(lines), "wall_s": wall,
          "sentences_per_s": len(lines) / wall,
          "cpu_ms_per_sentence": _ms_each(cpu, lines)}


def read_lines(path, count):
  if path:
    with open(path, encoding="utf-8") as f:
      lines = [line.strip() for line in f if line.strip()]
    return (lines * count)[:count]
  return sentences(None, count)


def _level(row):
  if "offline_in_order" in row:
    return f"offline_in_order_{row['offline_in_order']}"
  return row.get("clients", "offline")


def summary(measured, levels):
  """Medians over rounds, by level, and the ratios."""
  median = {}
  in_order = sorted({_level(m) for m in measured} - {"offline", *levels})
  for level in ["offline", *in_order, *levels]:
    rows = [m for m in measured if _level(m) == level]
    median[level] = {key: statistics.median(r[key] for r in rows
                                            if r.get(key) is not None)
                     for key in ("sentences_per_s", "p50_ms", "p99_ms",
                                 "mean_batch_lines", "decoding_share",
                                 "cpu_ms_per_sentence",
                                 "server_cpu_ms_per_request",
                                 "client_cpu_ms_per_request")
                     if any(r.get(key) is not None for r in rows)}
    median[level]["errors"] = sum(r.get("errors", 0) for r in rows)
    median[level]["mismatches"] = sum(r.get("mismatches", 0) for r in rows)
  result = {"medians": median}
  if not measured:  # --rounds=0: the overload alone
    return result
  if 1 in levels and 16 in levels:
    result["16_over_1"] = (median[16]["sentences_per_s"] /
                           median[1]["sentences_per_s"])
    result["16_over_offline"] = (median[16]["sentences_per_s"] /
                                 median["offline"]["sentences_per_s"])
  if 16 in levels and "offline_in_order_16" in median:
    result["16_over_offline_in_order_16"] = (
        median[16]["sentences_per_s"] /
        median["offline_in_order_16"]["sentences_per_s"])
  if 16 in levels:
    result.update(cpu_bounds(median[16], median["offline"]["sentences_per_s"],
                             cpu_cores(), median.get("offline_in_order_16")))
  return result


def cpu_bounds(level, offline_per_s, cores, in_order=None):
  """What the CPU a request of `level` allows on `cores` cores: the most
  sentences/s over the offline rate if every request cost that, and the
  server's CPU-ms a request that 40% of the offline rate would leave.
  With `in_order` (the batches of 16 in order's medians): the server's
  CPU-ms a request beyond what that search took a sentence (the request's
  HTTP, JSON and batching, and its batch's search costing more)."""
  server = level.get("server_cpu_ms_per_request")
  client = level.get("client_cpu_ms_per_request")
  if not server or client is None:
    return {}
  bounds = {"cpu_bound_over_offline":
                cores * 1000 / (server + client) / offline_per_s,
            "server_cpu_ms_for_40_percent":
                cores * 1000 / (0.4 * offline_per_s) - client}
  if in_order and in_order.get("cpu_ms_per_sentence"):
    bounds["server_cpu_ms_beyond_search"] = (
        server - in_order["cpu_ms_per_sentence"])
  return bounds


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--output_dir", help="A trained run folder.")
  parser.add_argument("--hparams_set", help="Export a random model of it.")
  parser.add_argument("--vocab_size", type=int, default=8000)
  parser.add_argument("--decode_hparams", default="beam_size=4,alpha=0.6")
  parser.add_argument("--inputs", help="Sentences, one a line (default: "
                      "Multi30k val.en from ../shared/data).")
  parser.add_argument("--lines", type=int, default=256)
  parser.add_argument("--clients", default="1,4,16,64")
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--serve_flags", default="",
                      help="t2t-serve flags besides its defaults, "
                      "space-separated (e.g. --nowarm_up_full_batch).")
  parser.add_argument("--new_connections", action="store_true",
                      help="Each client opens a new connection a request "
                      "(default: each keeps one open, HTTP/1.1 keep-alive).")
  parser.add_argument("--overload_clients", type=int, default=128,
                      help="Clients of the overload after the rounds "
                      "(0: none).")
  parser.add_argument("--overload_secs", type=float, default=5.0,
                      help="How long each overload client sends requests.")
  parser.add_argument("--overload_repeats", type=int, default=1,
                      help="Overloads one after another (the memory over "
                      "several).")
  parser.add_argument("--settle_secs", type=float, default=3.0,
                      help="Pause after the overload before the normal "
                      "requests and the settled memory.")
  parser.add_argument("--after_requests", type=int, default=8,
                      help="Normal requests after the overload.")
  parser.add_argument("--request_decode_hparams", default="",
                      help="Decode hparams each request asks for (e.g. "
                      "--decode_hparams' with xla_lines=16): the server "
                      "then decodes them from the run folder, not the "
                      "SavedModel. Default: none (the export's).")
  args = parser.parse_args()
  if args.request_decode_hparams:
    REQUEST_FIELDS["decode_hparams"] = args.request_decode_hparams
  if bool(args.output_dir) == bool(args.hparams_set):
    parser.error("give one of --output_dir and --hparams_set")
  levels = [int(c) for c in args.clients.split(",")]
  lines = read_lines(args.inputs, args.lines)
  # TensorFlow's threads as t2t-decoder and t2t-serve set them.
  threads = set_search_threads(searches_for(DecodeHParams()))
  print(json.dumps(machine()), flush=True)
  with tempfile.TemporaryDirectory() as tmp:
    if args.hparams_set:
      run_folder = os.path.join(tmp, "run")
      os.makedirs(run_folder)
      saved_model = export_random_model(run_folder, args.hparams_set,
                                        args.vocab_size, lines,
                                        args.decode_hparams)
    else:
      from t2tlite.export.exporter import export_saved_model
      run_folder = args.output_dir
      saved_model = export_saved_model(
          run_folder, export_dir=os.path.join(tmp, "export"),
          decode_hparams=args.decode_hparams)
    decoder = offline_decoder(run_folder, saved_model)
    offline_rate(decoder, lines[:32])  # warm-up: traces the search
    proc, url = start_server(saved_model, os.path.join(tmp, "serve.log"),
                             flags=args.serve_flags.split())
    with open(os.path.join(tmp, "serve.log"), encoding="utf-8") as f:
      warm_up = re.search(r"^t2t-serve: warm-up: .*$", f.read(), re.M)
    measured = []
    try:
      expected = [post(url, line)[1] for line in lines]  # each alone
      rss_warm = rss_kb(proc.pid)
      for round_ in range(args.rounds):
        row, outputs = offline_rate(decoder, lines)
        row.update(round=round_, mismatches=sum(
            o != e for o, e in zip(outputs, expected)))
        measured.append(row)
        print(json.dumps(row), flush=True)
        if 16 in levels:
          row = dict(in_order_rate(decoder, lines, 16), round=round_)
          measured.append(row)
          print(json.dumps(row), flush=True)
        for clients in levels:
          row = dict(load_level(url, lines, clients, expected,
                                args.new_connections, proc.pid),
                     round=round_)
          measured.append(row)
          print(json.dumps(row), flush=True)
      for repeat in range(args.overload_repeats if args.overload_clients
                          else 0):
        print(json.dumps(dict(overload(url, proc.pid, lines, expected, args,
                                       rss_warm), repeat=repeat)), flush=True)
    finally:
      proc.send_signal(signal.SIGTERM)
      exit_status = proc.wait(timeout=120)
    print(json.dumps({
        "saved_model_decode_hparams": args.decode_hparams,
        "request_decode_hparams": args.request_decode_hparams or None,
        "model": args.output_dir or args.hparams_set, "lines": len(lines),
        "connections": "new" if args.new_connections else "kept",
        "serve_flags": args.serve_flags,
        "intra_op_threads": threads, "server_exit_status": exit_status,
        "server_warm_up": warm_up and warm_up.group(0),
        "load_average_after": list(os.getloadavg()),
        **summary(measured, levels)}), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
