"""t2t-parse-eval: labeled bracket F1 of predicted parses (EVALB conventions).

    t2t-parse-eval --prediction=dev.pred.txt \
        --reference='../shared/data/wsj_sample/wsj_01[67]*.mrg'

--prediction: one linearized tree per line (t2t-decoder output on
parsing_wsj), aligned with the gold trees. --reference: gold bracketed trees
(.mrg files), a comma-separated list of files or glob patterns, read in order
(each pattern's matches sorted by name).
"""
import glob
import sys

from absl import app
from absl import flags

from t2tlite.data import trees
from t2tlite.evaluate import bleu, parsing_f1
from t2tlite.bin import console

flags.DEFINE_string("prediction", None, "Predicted parses, one a line.")
flags.DEFINE_string("reference", None, "Gold bracketed trees: files or glob "
                    "patterns, comma-separated.")

FLAGS = flags.FLAGS


def reference_paths(spec):
  """Files named by a comma-separated list of paths or glob patterns.

  Raises:
    FileNotFoundError: a part matches no file.
  """
  paths = []
  for part in filter(None, (p.strip() for p in spec.split(","))):
    found = sorted(glob.glob(part))
    if not found:
      raise FileNotFoundError(f"--reference: {part} matches no file")
    paths += found
  return paths


def _run(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
  try:
    predictions = bleu.read_lines(FLAGS.prediction, "prediction")
    gold = parsing_f1.read_reference_trees(reference_paths(FLAGS.reference))
    if len(predictions) != len(gold):
      raise ValueError(
          f"--prediction={FLAGS.prediction} has {len(predictions)} lines but "
          f"--reference holds {len(gold)} trees (not counting trees of empty "
          "elements only); they must be aligned.")
    scores = parsing_f1.evaluate(predictions, gold)
  except (FileNotFoundError, ValueError, trees.TreeError) as error:
    sys.stderr.write(f"t2t-parse-eval: error: {error}\n")
    return 1
  print("\n".join(scores.lines()))
  return 0


def main():
  flags.mark_flags_as_required(["prediction", "reference"])
  console.run(_run, __name__)


if __name__ == "__main__":
  main()
