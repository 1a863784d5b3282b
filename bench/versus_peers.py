"""t2tlite beside its peers on the same work, in one sitting, alternating.

    python bench/versus_peers.py --work decode_base --rounds 2 --out FILE.jsonl
    python bench/versus_peers.py --work train_base --rounds 2 --out FILE.jsonl
    python bench/versus_peers.py --table FILE.jsonl     # tables of a finished run

Absolute speed moves from machine to machine and from minute to minute on a
shared one; a ratio means something only when both sides ran in the same
sitting. Each round runs every variant once, ours and the peers' alternately,
one process per measurement, and appends one JSON line per measurement to
`--out` (ours from bench/run.py, the peers' from the peer harness's
run_peer.py, both tagged with the round). Decoding is compared with
CTranslate2, the fastest decoder among the peers (float32 and int8; ours in
float32 as t2t-decoder runs it, float32 as one search (`bench/run.py
--concurrent_searches 1`), bfloat16, int8 (`bench/run.py --int8`) and int8
in a bfloat16 model (both flags));
training with tf-models-official and PyTorch. The table is the median over rounds
of each variant, and each of our variants divided by the best peer of the same
precision and by the fastest peer.

The peer harness (tf-models-official, keras-hub, PyTorch, CTranslate2) is not
part of t2tlite: `--peers_dir` is its folder (default ../shared/peers beside
the checkout) and `--peers_venvs` the virtualenvs its setup.sh made (default
~/peer_venvs).
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

BENCH = pathlib.Path(__file__).resolve().parent

# work -> [(label, precision, command builder)]; "ours" runs bench/run.py.
OURS = {
    "decode_base": [("t2tlite float32", "float32", []),
                    ("t2tlite float32, one search", "float32",
                     ["--concurrent_searches", "1"]),
                    ("t2tlite bfloat16", "bfloat16",
                     ["--mixed_precision=bfloat16"]),
                    ("t2tlite int8", "int8", ["--int8"]),
                    ("t2tlite int8, bfloat16", "int8",
                     ["--int8", "--mixed_precision=bfloat16"])],
    "train_base": [("t2tlite float32", "float32", []),
                   ("t2tlite bfloat16", "bfloat16",
                    ["--mixed_precision=bfloat16"])],
}
# work -> [(label, precision, venv, run_peer.py arguments)]
PEERS = {
    "decode_base": [
        ("CTranslate2 float32", "float32", "torch", ["--impl", "ct2"]),
        ("CTranslate2 int8", "int8", "torch",
         ["--impl", "ct2", "--ct2-compute", "int8"]),
    ],
    "train_base": [
        ("tf-models-official float32", "float32", "tfm", ["--impl", "tfm"]),
        ("tf-models-official bfloat16", "bfloat16", "tfm",
         ["--impl", "tfm", "--bf16"]),
        ("PyTorch float32", "float32", "torch", ["--impl", "torch"]),
        ("PyTorch bfloat16", "bfloat16", "torch",
         ["--impl", "torch", "--bf16"]),
    ],
}
FIGURE = {"decode_base": ("sentences_per_s", "sents_per_s"),
          "train_base": ("tokens_per_s", "tokens_per_s")}


def _last_json_line(text):
  for line in reversed(text.splitlines()):
    if line.startswith("{"):
      return json.loads(line)
  return None


def _run(command, env=None):
  """Runs one measurement; its JSON line, or an {"error": ...} record."""
  done = subprocess.run(command, capture_output=True, text=True, env=env,
                        timeout=1800, check=False)
  record = _last_json_line(done.stdout)
  if done.returncode != 0 or record is None:
    tail = done.stderr.strip().splitlines()[-3:]
    return {"error": f"exit {done.returncode}: {' | '.join(tail)}"}
  return record


def extra_env(label, isa):
  """Environment that caps both sides at one instruction set (`--isa`):
  oneDNN's ONEDNN_MAX_CPU_ISA for TensorFlow; for CTranslate2 both its own
  kernels (CT2_FORCE_CPU_ISA) and the Intel MKL its GEMMs run on
  (MKL_ENABLE_INSTRUCTIONS), which the first does not cap."""
  if not isa:
    return {}
  if label.startswith("CTranslate2"):
    return {"CT2_FORCE_CPU_ISA": isa, "MKL_ENABLE_INSTRUCTIONS": isa}
  return {"ONEDNN_MAX_CPU_ISA": isa}


def variants(work, isa="", float32_only=False):
  """(ours, peers): the entries of OURS[work] and PEERS[work] a sitting
  runs. Under an instruction-set cap ours leave out every variant that
  computes in bfloat16 (oneDNN has none below AVX-512); with float32_only
  both sides are float32 only."""
  ours, peers = OURS[work], PEERS[work]
  if isa:
    ours = [variant for variant in ours
            if "--mixed_precision=bfloat16" not in variant[2]]
  if float32_only:
    ours = [variant for variant in ours if variant[1] == "float32"]
    peers = [variant for variant in peers if variant[1] == "float32"]
  return ours, peers


def measure(args):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  venvs = pathlib.Path(args.peers_venvs).expanduser()
  run_peer = pathlib.Path(args.peers_dir) / "run_peer.py"
  if not run_peer.is_file():
    sys.exit(f"--peers_dir={args.peers_dir}: no run_peer.py there (the peer "
             "harness folder was expected)")
  with open(args.out, "a", encoding="utf-8") as out:
    for round_ in range(1, args.rounds + 1):
      ours, peers = variants(args.work, args.isa, args.float32_only)
      # Alternate: ours, a peer, ours, a peer, ... so drift hits both sides.
      jobs = []
      for i in range(max(len(ours), len(peers))):
        if i < len(ours):
          label, precision, flags = ours[i]
          jobs.append((label, precision, [sys.executable,
                                          str(BENCH / "run.py"), "--work",
                                          args.work, *flags]))
        if i < len(peers):
          label, precision, venv, flags = peers[i]
          python = venvs / f"venv-{venv}" / "bin" / "python"
          jobs.append((label, precision, [str(python), str(run_peer),
                                          "--work", args.work, *flags]))
      for label, precision, command in jobs:
        print(f"round {round_}: {label}", file=sys.stderr, flush=True)
        record = _run(command, dict(env, **extra_env(label, args.isa)))
        record.update(label=label, precision=precision, round=round_,
                      work=args.work, isa=args.isa or "native")
        out.write(json.dumps(record) + "\n")
        out.flush()


def table(path):
  """Markdown table of medians over rounds, with ratios to the best peer."""
  records = [json.loads(line) for line in open(path, encoding="utf-8")
             if line.startswith("{")]
  lines = []
  sittings = sorted({(r["work"], r.get("isa", "native")) for r in records
                     if "label" in r})
  for work, isa in sittings:
    ours_key, peer_key = FIGURE[work]
    by_label = {}
    for r in records:
      if (r.get("work"), r.get("isa", "native")) != (work, isa) or (
          "label" not in r or "error" in r):
        continue
      value = r.get(ours_key, r.get(peer_key))
      by_label.setdefault((r["label"], r["precision"]), []).append(value)
    medians = {k: statistics.median(v) for k, v in by_label.items()}
    lines += [f"\n{work}, {isa} instruction set ({ours_key}; median of "
              "rounds)", "",
              "| variant | runs | median | vs best peer of that precision "
              "| vs fastest peer |",
              "| --- | --- | ---: | ---: | ---: |"]
    peers = {k: v for k, v in medians.items() if not k[0].startswith(
        "t2tlite")}
    for (label, precision), value in sorted(medians.items()):
      same, fastest = "", ""
      if label.startswith("t2tlite") and peers:
        fastest = f"{value / max(peers.values()):.2f}x"
        same_precision = [v for (_, p), v in peers.items() if p == precision]
        if same_precision:
          same = f"{value / max(same_precision):.2f}x"
      runs = ", ".join(f"{v:.2f}" for v in by_label[(label, precision)])
      lines.append(f"| {label} | {runs} | {value:.2f} | {same} | {fastest} |")
    errors = [r for r in records if "error" in r and (
        r.get("work"), r.get("isa", "native")) == (work, isa)]
    for r in errors:
      lines.append(f"\nfailed: {r.get('label')} round {r.get('round')}: "
                   f"{r['error']}")
  return "\n".join(lines)


def main():
  repo = BENCH.parent
  parser = argparse.ArgumentParser(
      description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--work", choices=sorted(OURS))
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--out", help="JSON lines file to append to")
  parser.add_argument("--peers_dir", default=str(repo.parent / "shared" /
                                                 "peers"))
  parser.add_argument("--peers_venvs", default="~/peer_venvs")
  parser.add_argument("--isa", default="", help="cap both sides at this "
                      "instruction set, e.g. AVX2 (an approximation of a "
                      "CPU without AVX-512 on this one); bfloat16 variants "
                      "then fail (oneDNN has no bfloat16 below AVX-512)")
  parser.add_argument("--float32_only", action="store_true",
                      help="run only the float32 variants, ours and the "
                      "peers'")
  parser.add_argument("--table", metavar="FILE",
                      help="print the table of FILE and exit")
  args = parser.parse_args()
  if args.table:
    print(table(args.table))
    return
  if not (args.work and args.out):
    parser.error("--work and --out are required unless --table is given")
  measure(args)
  print(table(args.out))


if __name__ == "__main__":
  main()
