"""t2t-serve under concurrent clients beside t2t-decoder's offline rate, on
the same lines, same model, same sitting.

    python bench/serve_load.py --output_dir=RUN_FOLDER [--inputs=lines.txt]
    python bench/serve_load.py --hparams_set=transformer_base \\
        [--decode_hparams=beam_size=4,alpha=0.6,extra_length=10]

Exports the run folder (or, with --hparams_set, a randomly initialised
model of that set with a vocabulary trained on the lines, as
bench/export_latency.py does) to a temporary folder, starts t2t-serve over
the export on a free port of 127.0.0.1 with its default flags, then for
--rounds rounds, alternating in one sitting:

  * offline: t2t-decoder's search (`Decoder.decode_lines`: batches of 32
    lines of similar length) on the run folder's model in this process,
    float32 as the export computes, timed after a warm-up call, so without
    process start-up or tracing;
  * for each of --clients (1, 4, 16, 64) concurrent clients: the --lines
    lines, one sentence a POST /api/translate, shared out among the
    clients (client i sends lines i, i + clients, ...).

Prints JSON lines: the machine (bench/export_latency.py's), one line a
measurement, then the medians over rounds: sentences/s, p50 and p99
latency (of all requests of the level), errors, the server's mean batch
and share of the wall time spent decoding, and the ratios asked of
batching (16 clients against 1; against offline). Every answer must equal
the one the same line gets alone (checked, counted in "mismatches"). The
server is always stopped (SIGTERM); its drain must end with exit 0.
"""
import argparse
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
import urllib.request

import t2tlite  # noqa: F401  (oneDNN set before TensorFlow loads)

# Run as a script, so bench/ comes first on the import path.
from export_latency import export_random_model, machine, sentences  # noqa: E402
from serve_latency import start_server  # noqa: E402

from t2tlite.decode.machine import (  # noqa: E402
    searches_for, set_search_threads, settle)
from t2tlite.decode.settings import DecodeHParams  # noqa: E402


def post(url, line):
  """(status, translation or None, seconds) of one one-line request."""
  request = urllib.request.Request(
      url + "api/translate", method="POST",
      data=json.dumps({"lines": [line]}).encode(),
      headers={"Content-Type": "application/json"})
  start = time.perf_counter()
  try:
    with urllib.request.urlopen(request, timeout=300) as response:
      text = json.loads(response.read())["translations"][0]
      return response.status, text, time.perf_counter() - start
  except urllib.error.HTTPError as error:
    return error.code, None, time.perf_counter() - start
  except OSError:
    return None, None, time.perf_counter() - start


def percentile(values, fraction):
  ordered = sorted(values)
  return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def batch_totals(url):
  """(batches, lines, decode seconds) so far, from the server's /metrics."""
  with urllib.request.urlopen(url + "metrics", timeout=60) as response:
    text = response.read().decode()
  value = {name: float(number) for name, number in re.findall(
      r"^(t2t_serve_batch_\w+_(?:count|sum)) (\S+)$", text, re.M)}
  return (value["t2t_serve_batch_lines_count"],
          value["t2t_serve_batch_lines_sum"],
          value["t2t_serve_batch_seconds_sum"])


def load_level(url, lines, clients, expected):
  """One level: `clients` threads share out `lines`; its figures, with
  the server's mean batch and the share of the time it spent decoding."""
  results = [None] * len(lines)
  before = batch_totals(url)

  def client(first):
    for i in range(first, len(lines), clients):
      results[i] = post(url, lines[i])

  threads = [threading.Thread(target=client, args=(c,))
             for c in range(clients)]
  start = time.perf_counter()
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  wall = time.perf_counter() - start
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
                            if r[0] == 200)}


def offline_decoder(run_folder, saved_model):
  """t2t-decoder's Decoder on the run folder, with the export's decode
  hparams, in float32."""
  from t2tlite import precision, run_dir
  from t2tlite.data.vocab import Vocabulary
  from t2tlite.decode.decoding import Decoder
  from export_latency import export_metadata
  decode = export_metadata(saved_model)["decode_hparams"]
  hp = DecodeHParams(**{k: v for k, v in decode.items()
                        if k in DecodeHParams.__dataclass_fields__})
  model, info, _ = run_dir.load_trained_model(
      run_folder, dtype=precision.KERAS_POLICY["float32"])
  return Decoder(model, Vocabulary.from_file(info.vocab_file), settle(hp),
                 Vocabulary.from_file(info.target_vocab_file))


def offline_rate(decoder, lines):
  start = time.perf_counter()
  outputs, _ = decoder.decode_lines(lines, progress=False)
  wall = time.perf_counter() - start
  return {"offline": True, "sentences": len(lines), "wall_s": wall,
          "sentences_per_s": len(lines) / wall}, outputs


def read_lines(path, count):
  if path:
    with open(path, encoding="utf-8") as f:
      lines = [line.strip() for line in f if line.strip()]
    return (lines * count)[:count]
  return sentences(None, count)


def summary(measured, levels):
  """Medians over rounds, by level, and the ratios."""
  median = {}
  for level in ["offline"] + levels:
    rows = [m for m in measured if m.get("clients", "offline") == level]
    median[level] = {key: statistics.median(r[key] for r in rows
                                            if r.get(key) is not None)
                     for key in ("sentences_per_s", "p50_ms", "p99_ms",
                                 "mean_batch_lines", "decoding_share")
                     if any(r.get(key) is not None for r in rows)}
    median[level]["errors"] = sum(r.get("errors", 0) for r in rows)
    median[level]["mismatches"] = sum(r.get("mismatches", 0) for r in rows)
  result = {"medians": median}
  if 1 in levels and 16 in levels:
    result["16_over_1"] = (median[16]["sentences_per_s"] /
                           median[1]["sentences_per_s"])
    result["16_over_offline"] = (median[16]["sentences_per_s"] /
                                 median["offline"]["sentences_per_s"])
  return result


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
  args = parser.parse_args()
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
    proc, url = start_server(saved_model, os.path.join(tmp, "serve.log"))
    measured = []
    try:
      expected = [post(url, line)[1] for line in lines]  # each alone
      for round_ in range(args.rounds):
        row, outputs = offline_rate(decoder, lines)
        row.update(round=round_, mismatches=sum(
            o != e for o, e in zip(outputs, expected)))
        measured.append(row)
        print(json.dumps(row), flush=True)
        for clients in levels:
          row = dict(load_level(url, lines, clients, expected), round=round_)
          measured.append(row)
          print(json.dumps(row), flush=True)
    finally:
      proc.send_signal(signal.SIGTERM)
      exit_status = proc.wait(timeout=120)
    print(json.dumps({
        "saved_model_decode_hparams": args.decode_hparams,
        "model": args.output_dir or args.hparams_set, "lines": len(lines),
        "intra_op_threads": threads, "server_exit_status": exit_status,
        "load_average_after": list(os.getloadavg()),
        **summary(measured, levels)}), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
