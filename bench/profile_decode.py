"""Where a decode_base search spends its time, by TensorFlow op type or op.

    python bench/profile_decode.py [--mixed_precision=bfloat16] [--int8]
        [--concurrent_searches N] [--by name] [--searches 2] [--top 30]
    TF_NUM_INTRAOP_THREADS=1 taskset -c 1 python bench/profile_decode.py ...

Runs run.py's decode_base search (graph mode, min_length 32 so that EOS
is never chosen in its 32 steps, the search's weights made once,
concurrent searches as t2t-decoder picks them or as given, TensorFlow's
intra-op threads as t2t-decoder sets them) under
TensorFlow's profiler and prints, after the machine's fingerprint and the
wall seconds of three unprofiled runs, one line per op type (with `--by
name`, per op: its type and graph name, so that one layer's matmuls come
apart): its self time per run, summed over the profiler's threads, and its
share of all op time. Idle time is left out. One core and one thread (the
second command) make op time and wall time comparable.
"""
import argparse
import collections
import glob
import json
import sys
import tempfile
import time


import t2tlite  # first: it turns oneDNN on before TensorFlow loads
import tensorflow as tf
# The profiler's own converter from its trace to per-op statistics (what
# TensorBoard's profile plugin shows); TensorFlow has no public API for it.
from tensorflow.python.profiler.internal import _pywrap_profiler_plugin

# Run as a script, bench/ is the first folder on the import path.
import run as bench_run  # decode_settled, decode_base_search
from fingerprint import fingerprint


def op_self_times(logdir, by="type"):
  """{op type (or "type name" with by="name"): self-time microseconds} from
  the profile in logdir."""
  path = glob.glob(logdir + "/**/*.xplane.pb", recursive=True)[-1]
  data, _ = _pywrap_profiler_plugin.xspace_to_tools_data(
      [path], "framework_op_stats", {})
  table = json.loads(data)[0]
  columns = [c["id"] for c in table["cols"]]
  totals = collections.Counter()
  for row in table["rows"]:
    cells = dict(zip(columns, [c.get("v") for c in row["c"]]))
    if cells["type"] != "IDLE":
      key = cells["type"]
      if by == "name":
        key += " " + cells["operation"]
      totals[key] += cells["total_self_time"]
  return totals


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--mixed_precision", choices=["bfloat16"], default=None)
  parser.add_argument("--int8", action="store_true",
                      help="the int8 search (decode hparam int8)")
  parser.add_argument("--concurrent_searches", type=int, default=0,
                      help="searches over parts of the batch side by side; "
                      "0: as t2t-decoder picks (auto)")
  parser.add_argument("--by", choices=["type", "name"], default="type",
                      help="group op time by op type, or by op (type and "
                      "graph name)")
  parser.add_argument("--searches", type=int, default=2,
                      help="profiled runs of the search")
  parser.add_argument("--top", type=int, default=30, help="lines printed")
  # decode_base's search: beam 4, alpha 0.6, graph mode.
  parser.set_defaults(beam_size=4, alpha=0.6, xla=False)
  args = parser.parse_args()
  # As t2t-decoder, before TensorFlow runs: threads, int8, precision.
  settled = bench_run.decode_settled(args)
  if args.int8 and not settled.int8:  # a reason, not a traceback
    print(f"bench/profile_decode.py --int8: int8 is not available here: "
          f"{settled.int8_reason}.", flush=True)
    return 1
  searches = settled.searches
  print(f"machine: {fingerprint()}", flush=True)
  _, inputs, search = bench_run.decode_base_search(settled)
  search(inputs)["outputs"].numpy()  # traced outside the profile
  walls = []
  for _ in range(3):
    start = time.perf_counter()
    search(inputs)["outputs"].numpy()
    walls.append(round(time.perf_counter() - start, 3))
  print(json.dumps({"work": "profile_decode_base",
                    "concurrent_searches": searches, "wall_s": walls}))
  with tempfile.TemporaryDirectory() as logdir:
    tf.profiler.experimental.start(logdir)
    for _ in range(args.searches):
      search(inputs)["outputs"].numpy()
    tf.profiler.experimental.stop()
    totals = op_self_times(logdir, args.by)
  all_ops = sum(totals.values())
  print(json.dumps({"all_ops_s_per_run": round(all_ops / 1e6 / args.searches,
                                                3)}))
  key = "op_type" if args.by == "type" else "op"
  for op, micros in totals.most_common(args.top):
    print(json.dumps({
        "mixed_precision": args.mixed_precision or "float32",
        "int8": args.int8, key: op,
        "s_per_run": round(micros / 1e6 / args.searches, 3),
        "share": round(micros / all_ops, 3)}))


if __name__ == "__main__":
  sys.exit(main())
