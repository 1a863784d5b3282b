"""How much of each sentence a parsing model's output covers.

    python bench/parse_coverage.py --predictions=dev.pred.txt --inputs=dev.inputs.txt

--predictions is t2t-decoder output for parsing_wsj, either raw linearized
trees ("(S (NP XX XX )NP ... )S") or trees from --postprocess
("(S (NP (XX The) (XX man)) ...)"); --inputs the sentences decoded, aligned.
Prints one JSON line:
  raw output:   per sentence the number of XX emitted against the number of
                words (a well-trained model emits exactly one per word);
  postprocess:  trees with no phrase under the root ("flat": the model's
                output was empty or unusable), and the words directly
                under the root at its end: where the repair attaches the
                words the output did not cover (in gold trees usually just
                the final punctuation mark).
"""
import argparse
import json
import re

PRETERMINAL = re.compile(r"\(XX [^()]+\)")
# The run of preterminals directly under the root at the end of a tree.
ROOT_TAIL = re.compile(r"((?: \(XX [^()]+\))+)\)\s*$")
PHRASE = re.compile(r"\((?!XX )")


def main():
  parser = argparse.ArgumentParser(
      description=__doc__.splitlines()[0],
      formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
  parser.add_argument("--predictions", required=True)
  parser.add_argument("--inputs", required=True)
  args = parser.parse_args()
  with open(args.predictions, encoding="utf-8") as f:
    predictions = f.read().splitlines()
  with open(args.inputs, encoding="utf-8") as f:
    inputs = f.read().splitlines()
  if len(predictions) != len(inputs):
    parser.error(f"--predictions has {len(predictions)} lines but --inputs "
                 f"has {len(inputs)}; they must be aligned.")
  words = [len(line.split()) for line in inputs]
  result = {"predictions": args.predictions, "sentences": len(inputs),
            "words": sum(words)}
  if any(PRETERMINAL.search(p) for p in predictions):
    tails = [ROOT_TAIL.search(p) for p in predictions]
    tail_words = sum(len(PRETERMINAL.findall(t.group(1))) for t in tails if t)
    result.update({
        "format": "postprocessed",
        "flat_trees": sum(not PHRASE.search(p[1:]) for p in predictions),
        "words_at_root_end": tail_words,
        "fraction_at_root_end": round(tail_words / max(1, sum(words)), 3)})
  else:
    emitted = [p.split().count("XX") for p in predictions]
    result.update({
        "format": "raw", "xx_emitted": sum(emitted),
        "sentences_with_one_xx_per_word": sum(
            e == w for e, w in zip(emitted, words)),
        "first_10_xx_per_words": [f"{e}/{w}" for e, w in
                                  zip(emitted[:10], words[:10])]})
  print(json.dumps(result))


if __name__ == "__main__":
  main()
