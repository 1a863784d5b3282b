"""Markdown tables from the JSON lines of bench/suite.sh (or of run.py,
matmul_peak.py and export_latency.py appended to one file).

    python bench/table.py bench/results/2026-11-21-suite.jsonl

Each figure is the median over the file's lines of the same configuration
(the rounds of suite.sh); the count of lines behind it is shown as "(n)".
"""
import collections
import json
import statistics
import sys

FIGURE = {"train_base": "tokens_per_s", "train_tiny": "tokens_per_s",
          "decode_base": "sentences_per_s"}
VARIANTS = [("float32", False), ("float32", True), ("bfloat16", False),
            ("bfloat16", True)]


def read(path):
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f if line.startswith("{")]


def own_groups(results, value):
  """{(work, precision, xla): [value(line), ...]} over t2tlite's lines of the
  FIGURE works (a peer's line names its "implementation" and is left out)."""
  groups = collections.defaultdict(list)
  for r in results:
    if r.get("work") in FIGURE and "implementation" not in r:
      groups[(r["work"], r["mixed_precision"], r["xla"])].append(value(r))
  return groups


def median_cell(values, digits):
  if not values:
    return "-"
  return f"{statistics.median(values):,.{digits}f} ({len(values)})"


def speed_table(results):
  groups = own_groups(results, lambda r: r[FIGURE[r["work"]]])
  same = own_groups(results, lambda r: r.get("same_as_uncompiled"))
  lines = ["| work | fp32 graph | fp32 XLA | bf16 graph | bf16 XLA |",
           "| --- | ---: | ---: | ---: | ---: |"]
  for work, figure in FIGURE.items():
    cells = []
    for precision, xla in VARIANTS:
      key = (work, precision, xla)
      cell = median_cell(groups[key], 2 if work == "decode_base" else 0)
      checks = [c for c in same[key] if c is not None]
      if xla and checks:
        cell += " same" if all(checks) else " differs"
      cells.append(cell)
    lines.append(f"| {work} ({figure}) | " + " | ".join(cells) + " |")
  return lines


def gflops_table(results):
  groups = own_groups(results, lambda r: r["gflop_per_s"])
  lines = ["| work | fp32 graph | fp32 XLA | bf16 graph | bf16 XLA |",
           "| --- | ---: | ---: | ---: | ---: |"]
  for work in FIGURE:
    cells = [median_cell(groups[(work, p, x)], 0) for p, x in VARIANTS]
    lines.append(f"| {work} (GFLOP/s) | " + " | ".join(cells) + " |")
  return lines


def peer_table(results):
  """t2tlite's faster variant (graph or XLA) against each peer measured in
  the same file, per training work and precision."""
  own = own_groups(results, lambda r: r[FIGURE[r["work"]]])
  peers = collections.defaultdict(list)
  for r in results:
    if "implementation" in r:
      peers[(r["work"], r["mixed_precision"], r["implementation"])].append(
          r["tokens_per_s"])
  lines = ["| work | precision | t2tlite tok/s | peer | peer tok/s | ratio |",
           "| --- | --- | ---: | --- | ---: | ---: |"]
  for (work, precision, name), values in sorted(peers.items()):
    variants = [statistics.median(own[(work, precision, xla)])
                for xla in (False, True) if own[(work, precision, xla)]]
    if not variants:
      continue
    best, peer = max(variants), statistics.median(values)
    lines.append(f"| {work} | {precision} | {best:,.0f} | {name} | "
                 f"{peer:,.0f} ({len(values)}) | {best / peer:.2f}x |")
  return lines if len(lines) > 2 else []


def scaling_table(results):
  lines = ["| sweep | batch x length | step s | target tok/s | GFLOP/s |",
           "| --- | --- | ---: | ---: | ---: |"]
  for r in results:
    if r.get("work") in ("scaling_length", "scaling_batch"):
      lines.append(
          f"| {r['work'][8:]} ({r['mixed_precision']}) | {r['batch']} x "
          f"{r['target_length']} | {r['step_s_median']:.3f} | "
          f"{r['tokens_per_s']:,.0f} | {r['gflop_per_s']:.0f} |")
  return lines


def other_lines(results):
  lines = []
  for r in results:
    if r.get("work") == "matmul_peak":
      lines.append(f"- matmul {r['n']}^3 {r['dtype']}: {r['gflop_per_s']} "
                   f"GFLOP/s median (best {r['gflop_per_s_best']}), load "
                   f"{r['loadavg']}")
    elif r.get("metric") == "latency_batch1":
      lines.append(f"- exported model, batch 1: {r['median_s']:.3f} s "
                   f"median latency")
    elif r.get("metric") == "throughput_batch32":
      lines.append(f"- exported model, batch 32: "
                   f"{r['sentences_per_s']:.2f} sentences/s")
  return lines


def main(argv):
  if len(argv) != 2:
    sys.exit(__doc__)
  results = read(argv[1])
  for block in (speed_table(results), gflops_table(results),
                peer_table(results), scaling_table(results),
                other_lines(results)):
    print("\n".join(block) + "\n")


if __name__ == "__main__":
  main(sys.argv)
