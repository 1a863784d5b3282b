"""How long a Decoder takes to trace its search: the first batch (tracing
and graph optimization) beside the next ones, on a trained run folder.

    python bench/first_decode.py --output_dir=/tmp/t2t_train/reverse \
        [--decode_hparams=beam_size=4,alpha=0.6] [--runs=3]

Each run is a fresh process (a trace is made once a process), with
TensorFlow's threads as t2t-decoder sets them: it loads the model, builds
a `Decoder`, then times one batch of one line (the trace and the run) and
one batch of two lines of other lengths (a new shape, no new trace).
It starts as the t2t-* commands start (`t2tlite.bin`), so its Decoder
loads a traced search kept by an earlier run
(`t2tlite.decode.trace_cache`): the first run traces and keeps it, later
ones load it; `T2TLITE_TRACE_CACHE=` (empty) times the trace every run.
Prints JSON lines: the machine (bench/export_latency.py's), one line a run,
then the medians. XLA's compiled searches are kept as the commands keep
them (`t2tlite.xla_cache`): with xla_lines, a run loads what an earlier
one compiled.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

FIRST_LINES = ["1 2 3"]
NEXT_LINES = ["1 2 3 4 5 6", "1 2"]


def one_run(output_dir, decode_hparams):
  """{"first_s", "next_s"} of a Decoder in this process."""
  # Started as the t2t-* commands start (t2tlite.bin): TensorFlow loaded
  # lean and out of the garbage collector's reach, XLA's searches kept.
  import t2tlite.bin  # noqa: F401
  from serve_load import run_decoder  # sets oneDNN before TensorFlow loads
  from t2tlite import problem_decoding, run_dir
  from t2tlite.decode.machine import settle
  # As t2t-decoder: the problem's defaults with the overrides on top.
  problem = run_dir.read_run_info(output_dir).problem
  settled = settle(problem_decoding.decode_hparams(problem, decode_hparams),
                   set_threads=True)
  decoder = run_decoder(output_dir, settled)
  start = time.perf_counter()
  decoder.decode_batch(FIRST_LINES)
  first = time.perf_counter() - start
  start = time.perf_counter()
  decoder.decode_batch(NEXT_LINES)
  return {"first_s": first, "next_s": time.perf_counter() - start}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--output_dir", required=True,
                      help="A trained run folder.")
  parser.add_argument("--decode_hparams", default="beam_size=4,alpha=0.6")
  parser.add_argument("--runs", type=int, default=3)
  parser.add_argument("--one_run", action="store_true",
                      help=argparse.SUPPRESS)  # a child process's job
  args = parser.parse_args()
  if args.one_run:
    print(json.dumps(one_run(args.output_dir, args.decode_hparams)))
    return
  from export_latency import machine
  print(json.dumps(machine()), flush=True)
  rows = []
  for run in range(args.runs):
    result = subprocess.run(
        [sys.executable, __file__, "--one_run",
         f"--output_dir={args.output_dir}",
         f"--decode_hparams={args.decode_hparams}"],
        capture_output=True, text=True, timeout=600)
    if result.returncode:
      errors = result.stderr.strip().splitlines() or ["no output"]
      sys.exit(f"first_decode.py: run {run} failed: {errors[-1]}")
    row = json.loads(result.stdout.strip().splitlines()[-1])
    rows.append(dict(row, run=run))
    print(json.dumps(rows[-1]), flush=True)
  print(json.dumps({key: statistics.median(row[key] for row in rows)
                    for key in ("first_s", "next_s")}))


if __name__ == "__main__":
  main()
