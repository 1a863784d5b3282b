"""t2t-serve's own overhead: one sentence through its HTTP API beside the
same call on the SavedModel in this process, same export, same sitting.

    python bench/serve_latency.py --saved_model=OUTPUT_DIR/export/1 [--runs=30]

Starts t2t-serve on a free port of 127.0.0.1 over the export, then times
--runs pairs, alternated: a POST /api/translate of one sentence (the HTTP
round trip: JSON, Flask, waitress, the SavedModel call), and the
SavedModel's serving_default signature on the same sentence in this
process, with TensorFlow's threads set as t2t-serve sets them.
Alternating keeps the two under the same load on a shared machine. Prints JSON lines: the machine (bench/export_latency.py's), then
the medians and the difference. The server is always stopped (SIGTERM).
"""
import argparse
import gzip
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import t2tlite  # noqa: F401,E402  (oneDNN set before TensorFlow loads)
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the sentencepiece ops)

# Run as a script, so bench/ comes first on the import path: its modules import by name.
from export_latency import MULTI30K_VAL, machine  # noqa: E402

from t2tlite.decode.machine import settle  # noqa: E402
from t2tlite.serve.model_source import ModelSource  # noqa: E402


def free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def start_server(saved_model, log_path, deadline_secs=300, flags=()):
  """(Popen, URL) of t2t-serve over saved_model, with `flags` (a list of
  "--name=value"), once it is ready."""
  command = os.path.join(os.path.dirname(sys.executable), "t2t-serve")
  log = open(log_path, "w")
  proc = subprocess.Popen([command, f"--model={saved_model}",
                           f"--port={free_port()}", *flags], stdout=log,
                          stderr=subprocess.STDOUT)
  deadline = time.time() + deadline_secs
  while time.time() < deadline and proc.poll() is None:
    with open(log_path) as f:
      match = re.search(r"on (http://\S+/)", f.read())
    if match:
      return proc, match.group(1)
    time.sleep(0.2)
  proc.kill()
  raise RuntimeError(f"t2t-serve did not start; see {log_path}")


def post(url, sentence):
  request = urllib.request.Request(
      url + "api/translate", method="POST",
      data=json.dumps({"lines": [sentence]}).encode(),
      headers={"Content-Type": "application/json"})
  with urllib.request.urlopen(request, timeout=120) as response:
    return json.loads(response.read())["translations"][0]


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--saved_model", required=True,
                      help="An export's version folder.")
  parser.add_argument("--sentence", help="Default: Multi30k val's first.")
  parser.add_argument("--runs", type=int, default=30)
  args = parser.parse_args()
  sentence = args.sentence
  if sentence is None:
    with gzip.open(MULTI30K_VAL, "rt", encoding="utf-8") as f:
      sentence = f.readline().strip()
  # TensorFlow's threads as t2t-serve sets them (before its first op, for
  # the export's decode hparams), so that the two differ only by the server.
  threads = settle(ModelSource.open(args.saved_model).decode_hparams(""),
                   set_threads=True).threads_per_search
  print(json.dumps(machine()))
  signature = tf.saved_model.load(args.saved_model).signatures[
      "serving_default"]

  def in_process():
    return signature(inputs=tf.constant([sentence]))["outputs"][0].numpy(
    ).decode("utf-8")

  log_path = os.path.join(tempfile.mkdtemp(), "t2t-serve.log")
  proc, url = start_server(args.saved_model, log_path)
  try:
    # One warm-up call each; the outputs must agree.
    assert post(url, sentence) == in_process()
    http, local = [], []
    for _ in range(args.runs):
      start = time.perf_counter()
      post(url, sentence)
      http.append(time.perf_counter() - start)
      start = time.perf_counter()
      in_process()
      local.append(time.perf_counter() - start)
  finally:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
  result = {
      "saved_model": args.saved_model, "sentence": sentence,
      "intra_op_threads": threads,
      "output_words": len(in_process().split()), "runs": args.runs,
      "http_median_s": statistics.median(http),
      "in_process_median_s": statistics.median(local),
      "overhead_median_s": statistics.median(
          h - l for h, l in zip(http, local)),
      "load_average_after": list(os.getloadavg()),
  }
  print(json.dumps(result))


if __name__ == "__main__":
  main()
