"""A small batch's decode time with and without decode hparam xla_lines:
t2t-decoder's Decoder on a run folder, the same lines, alternated.

    python bench/small_batches.py --output_dir=RUN [--lines=1,4]
        [--decode_hparams=beam_size=4,alpha=0.6] [--rounds=5] [--calls=20]

Both Decoders live in this process, TensorFlow's threads set as
t2t-decoder sets them. Each is warmed up first on every batch (a trace,
and for XLA a compile per shape: `first_s`, reported). Then, for each
round and each batch size, it times `--calls` decode_batch calls of one
Decoder and then of the other, alternating which goes first, and prints a
JSON line per round and the medians of milliseconds per call.
"""
import argparse
import json
import os
import statistics
import sys
import time

# Lines of the quick start's problem (algorithmic_reverse): digits.
LINES = ["1 2 3 4 5 6 7", "3 1 4 1 5 9 2 6", "2 7 1 8 2 8", "9 8 7 6 5 4 3"]


def timed(decoder, batch, calls):
  start = time.perf_counter()
  for _ in range(calls):
    decoder.decode_batch(batch)
  return (time.perf_counter() - start) / calls * 1e3


def threads_as_t2t_decoder(settled):
  """Whether `settle` set TensorFlow's threads as t2t-decoder does (it
  sets none for one search, or where TF_NUM_INTRAOP_THREADS is set)."""
  return (settled.threads_per_search is not None or settled.hp.concurrent_searches <= 1
          or bool(os.environ.get("TF_NUM_INTRAOP_THREADS")))


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--output_dir", required=True,
                      help="A trained run folder.")
  parser.add_argument("--decode_hparams", default="beam_size=4,alpha=0.6")
  parser.add_argument("--lines", default="1,4",
                      help="Batch sizes (lines), comma-separated.")
  parser.add_argument("--xla_lines", type=int, default=8)
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--calls", type=int, default=20)
  args = parser.parse_args()
  from export_latency import machine  # sets oneDNN before TensorFlow loads
  from serve_load import run_decoder
  from t2tlite import problem_decoding, run_dir
  from t2tlite.decode.machine import settle
  problem = run_dir.read_run_info(args.output_dir).problem
  decoders = {}
  for name, extra in (("graph", ""), ("xla", f",xla_lines={args.xla_lines}")):
    settled = settle(problem_decoding.decode_hparams(
        problem, args.decode_hparams + extra), set_threads=not decoders)
    if not decoders and not threads_as_t2t_decoder(settled):
      sys.exit("small_batches.py: TensorFlow started before the decoders "
               "set its threads; the graph would run unlike t2t-decoder's")
    decoders[name] = run_decoder(args.output_dir, settled)
  # After the first settle: the threads are set before TensorFlow's first
  # op (machine()'s matmul would otherwise leave them at the default).
  print(json.dumps(machine()), flush=True)
  sizes = [int(n) for n in args.lines.split(",")]
  batches = {n: (LINES * n)[:n] for n in sizes}
  for name, decoder in decoders.items():
    start = time.perf_counter()
    outputs = [decoder.decode_batch(batch)[0] for batch in batches.values()]
    print(json.dumps({"decoder": name, "first_s": round(
        time.perf_counter() - start, 2), "outputs": outputs}), flush=True)
  ms = {(name, n): [] for name in decoders for n in sizes}
  for round_ in range(args.rounds):
    order = list(decoders) if round_ % 2 == 0 else list(decoders)[::-1]
    row = {"round": round_}
    for n in sizes:
      for name in order:
        ms[name, n].append(timed(decoders[name], batches[n], args.calls))
        row[f"{name}_{n}_lines_ms"] = round(ms[name, n][-1], 2)
    print(json.dumps(row), flush=True)
  medians = {f"{name}_{n}_lines_ms": round(statistics.median(v), 2)
             for (name, n), v in ms.items()}
  for n in sizes:
    medians[f"speedup_{n}_lines"] = round(
        medians[f"graph_{n}_lines_ms"] / medians[f"xla_{n}_lines_ms"], 2)
  print(json.dumps(medians))


if __name__ == "__main__":
  main()
