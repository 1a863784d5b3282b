"""How much of each sentence a parsing model's output covers, and whether
its tags sit on the right words.

    python bench/parse_coverage.py --predictions=dev.pred.txt \
        --inputs=dev.inputs.txt [--gold=parsing_wsj-dev.targets.txt]

--predictions is t2t-decoder output for parsing_wsj, raw linearized trees
("(S (NP NNP NNP )NP ... )S") or trees from --postprocess ("(S (NP (NNP
Pierre) ...)"); --inputs the sentences decoded, aligned;
--gold the linearized gold trees of the same sentences (t2t-datagen's
dev targets file). Prints one JSON line:
  tags emitted against the words of each sentence (a tree over the
  sentence has exactly one per word);
  with --gold and POS tags in both: the share of words whose predicted tag
  is the gold one, over the sentences with one tag per word. A model that
  loses count of the words it has covered puts each tag on a neighbour of
  its word, which this shows even where the brackets look plausible.
"""
import argparse
import json
import re

from t2tlite.data import trees
from t2tlite.evaluate.parsing_f1 import gold_tags

# A bare closing bracket: a bracketed tree, not a linearized one.
BARE_CLOSING = re.compile(r"\)(\s|\)|$)")


def tags(line):
  """The POS tags (or XX) of a linearized or bracketed tree, in order."""
  if BARE_CLOSING.search(line):
    return gold_tags(next(trees.parse_trees(line)))
  return [t for t in line.split() if not (len(t) > 1 and t[0] in "()")]


def main():
  parser = argparse.ArgumentParser(
      description=__doc__.splitlines()[0],
      formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
  parser.add_argument("--predictions", required=True)
  parser.add_argument("--inputs", required=True)
  parser.add_argument("--gold")
  args = parser.parse_args()
  files = {"predictions": args.predictions, "inputs": args.inputs}
  if args.gold:
    files["gold"] = args.gold
  lines = {}
  for name, path in files.items():
    with open(path, encoding="utf-8") as f:
      lines[name] = f.read().splitlines()
  counts = {name: len(v) for name, v in lines.items()}
  if len(set(counts.values())) != 1:
    parser.error(f"the files must be aligned, line for line: {counts}")
  words = [len(line.split()) for line in lines["inputs"]]
  emitted = [len(tags(p)) for p in lines["predictions"]]
  result = {"predictions": args.predictions, "sentences": len(words),
            "words": sum(words), "tags_emitted": sum(emitted),
            "sentences_with_one_tag_per_word": sum(
                e == w for e, w in zip(emitted, words)),
            "first_10_tags_per_words": [f"{e}/{w}" for e, w in
                                        zip(emitted[:10], words[:10])]}
  if args.gold:
    right = total = 0
    for predicted, gold in zip(lines["predictions"], lines["gold"]):
      predicted, gold = tags(predicted), tags(gold)
      if len(predicted) == len(gold):
        right += sum(p == g for p, g in zip(predicted, gold))
        total += len(gold)
    result["tag_accuracy"] = round(right / max(1, total), 4)
    result["words_compared"] = total
  print(json.dumps(result))


if __name__ == "__main__":
  main()
