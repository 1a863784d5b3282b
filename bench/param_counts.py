"""Prints the parameter count of every paper hparams set beside Table 3's.

    python bench/param_counts.py [--vocab_size=37000]

Prints one JSON line per set, then a Markdown table (the one in BUILD_NOTES.md).
"""
import argparse
import json

import t2tlite

# Table 3's "params x 10^6" column; rows it leaves blank are None.
PAPER_MILLIONS = {
    "transformer_base": 65, "transformer_base_a1": None,
    "transformer_base_a2": None, "transformer_base_a3": None,
    "transformer_base_a4": None, "transformer_base_b1": 58,
    "transformer_base_b2": 60, "transformer_base_c1": 36,
    "transformer_base_c2": 50, "transformer_base_c3": 80,
    "transformer_base_c4": 28, "transformer_base_c5": 168,
    "transformer_base_c6": 53, "transformer_base_c7": 90,
    "transformer_base_d1": None, "transformer_base_d2": None,
    "transformer_base_d3": None, "transformer_base_d4": None,
    "transformer_base_e": None, "transformer_big": 213,
}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--vocab_size", type=int, default=37000)
  args = parser.parse_args()
  rows = []
  for name, paper in PAPER_MILLIONS.items():
    hp = t2tlite.create_hparams(name)
    count = t2tlite.build_model(hp, args.vocab_size).count_params()
    embedding = args.vocab_size * hp.d_model
    result = {"hparams_set": name, "params": count,
              "params_without_embedding": count - embedding,
              "paper_millions": paper, "vocab_size": args.vocab_size}
    print(json.dumps(result), flush=True)
    rows.append(result)
  print("\n| set | ours (M) | ours without embedding (M) | paper (M) |")
  print("| --- | ---: | ---: | ---: |")
  for r in rows:
    paper = "-" if r["paper_millions"] is None else r["paper_millions"]
    print(f"| {r['hparams_set']} | {r['params'] / 1e6:.1f} | "
          f"{r['params_without_embedding'] / 1e6:.1f} | {paper} |")


if __name__ == "__main__":
  main()
