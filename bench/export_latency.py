"""Latency (batch 1) and throughput (batch 32) of an exported model.

    python bench/export_latency.py --saved_model=OUTPUT_DIR/export/3
    python bench/export_latency.py --output_dir=OUTPUT_DIR   # exports first
    python bench/export_latency.py [--hparams_set=transformer_base]

Runs the SavedModel's serving_default signature (text in, text out, the
tokenizer and beam search in the graph) as TF Serving would, in this process.
Without --saved_model or --output_dir it exports a randomly initialised model
of --hparams_set (seeded) with a vocabulary trained on the input sentences:
an untrained model has not learned when to stop, so its outputs are long
(up to input length + extra_length tokens) and the times pessimistic;
"output_words" tells how long they were.

Prints JSON lines: the machine, the setup, then "latency_batch1" (seconds per
single-sentence request) and "throughput_batch32" (sentences per second in
32-sentence requests), each the median of --runs timed calls after one
warm-up call.
"""
import argparse
import gzip
import json
import os
import platform
import statistics
import tempfile
import time

import t2tlite  # first: it turns oneDNN on before TensorFlow loads
import tensorflow as tf
import tensorflow_text


from fingerprint import fingerprint

SHARED_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                           "..", "shared", "data")
MULTI30K_VAL = os.path.join(SHARED_DATA, "multi30k", "raw", "val.en.gz")


def _read_first_line(path, prefix):
  try:
    with open(path, encoding="utf-8") as f:
      for line in f:
        if line.startswith(prefix):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return None


def machine():
  """What the numbers were measured on (the load average matters: the
  machine may be shared)."""
  return {"machine": {
      "cpu": _read_first_line("/proc/cpuinfo", "model name"),
      "cores": os.cpu_count(),
      "memory": _read_first_line("/proc/meminfo", "MemTotal"),
      "gpus": len(tf.config.list_physical_devices("GPU")),
      "load_average_1_5_15": list(os.getloadavg()),
      "python": platform.python_version(), "platform": platform.platform(),
      "tensorflow": tf.__version__,
      "tensorflow_text": tensorflow_text.__version__,
      "fingerprint": fingerprint()}}


def sentences(path, count=32):
  """`count` sentences: from `path`, else Multi30k's val set, else made up."""
  path = path or (MULTI30K_VAL if os.path.exists(MULTI30K_VAL) else None)
  if path:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
      lines = [line.strip() for line in f if line.strip()]
    return (lines * count)[:count] if lines else []
  words = "a man woman dog child runs walks sits on in the street park".split()
  return [" ".join(words[(i * 7 + j) % len(words)] for j in range(8 + i % 9))
          for i in range(count)]


def export_random_model(folder, hparams_set, vocab_size, texts,
                        decode_hparams):
  """Exports a random-weight model of hparams_set; returns the version
  folder."""
  from t2tlite import run_dir
  from t2tlite.data.vocab import train_sentencepiece
  from t2tlite.export.exporter import export_saved_model
  vocab_path = os.path.join(folder, "bench_vocab.model")
  size = train_sentencepiece(lambda: iter(texts), vocab_path, vocab_size)
  hp = t2tlite.create_hparams(hparams_set)
  tf.keras.utils.set_random_seed(0)
  model = t2tlite.build_model(hp, size)
  run_dir.write_run_info(folder, hp, "bench", size, vocab_path)
  run_dir.make_checkpoint(model).save(os.path.join(folder, "ckpt"))
  return export_saved_model(folder, decode_hparams=decode_hparams)


def export_metadata(saved_model):
  """What t2t-exporter recorded (decode hparams, checkpoint), if present."""
  path = os.path.join(saved_model, "assets.extra", "t2tlite_export.json")
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def timed(fn, inputs, runs):
  """fn(inputs) after a warm-up call, `runs` times.

  Returns:
    ({"median_s", "runs_s": wall seconds; "median_cpu_s": CPU seconds of this
    process, less sensitive than wall time to other load on a shared
    machine}, the last result).
  """
  fn(inputs=inputs)
  wall, cpu = [], []
  for _ in range(runs):
    start, start_cpu = time.perf_counter(), time.process_time()
    result = fn(inputs=inputs)
    result["outputs"].numpy()
    wall.append(time.perf_counter() - start)
    cpu.append(time.process_time() - start_cpu)
  return {"median_s": statistics.median(wall), "runs_s": wall,
          "median_cpu_s": statistics.median(cpu)}, result


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--saved_model", help="An export's version folder.")
  parser.add_argument("--output_dir", help="A training folder to export.")
  parser.add_argument("--hparams_set", default="transformer_base")
  parser.add_argument("--vocab_size", type=int, default=8000)
  parser.add_argument("--decode_hparams", default="beam_size=4,alpha=0.6")
  parser.add_argument("--inputs", help="Sentences, one a line (default: "
                      "Multi30k val.en from ../shared/data if present).")
  parser.add_argument("--runs", type=int, default=5)
  args = parser.parse_args()
  print(f"machine: {fingerprint()}", flush=True)
  print(json.dumps(machine()), flush=True)
  texts = sentences(args.inputs)
  with tempfile.TemporaryDirectory() as tmp:
    saved_model, weights = args.saved_model, "trained"
    if not saved_model and args.output_dir:
      from t2tlite.export.exporter import export_saved_model
      saved_model = export_saved_model(
          args.output_dir, export_dir=tmp, decode_hparams=args.decode_hparams)
    elif not saved_model:
      weights = f"random ({args.hparams_set})"
      corpus = sentences(args.inputs, 5000)
      saved_model = export_random_model(tmp, args.hparams_set,
                                        args.vocab_size, corpus,
                                        args.decode_hparams)
    serve = tf.saved_model.load(saved_model).signatures["serving_default"]
    print(json.dumps({"setup": {
        "saved_model": args.saved_model or args.output_dir or "temporary",
        "weights": weights, "runs": args.runs,
        "export": export_metadata(saved_model)}}), flush=True)
    one = tf.constant(texts[:1])
    times, result = timed(serve, one, args.runs)
    print(json.dumps({"metric": "latency_batch1", **times,
                      "input": texts[0],
                      "output_words": len(result["outputs"][0].numpy()
                                          .split())}), flush=True)
    batch = tf.constant(texts[:32])
    times, result = timed(serve, batch, args.runs)
    words = [len(o.split()) for o in result["outputs"].numpy()]
    print(json.dumps({"metric": "throughput_batch32",
                      "sentences_per_s": 32 / times["median_s"], **times,
                      "mean_output_words": statistics.mean(words),
                      "load_average_after": list(os.getloadavg())}),
          flush=True)

if __name__ == "__main__":
  main()
