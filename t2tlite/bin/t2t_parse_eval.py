"""t2t-parse-eval: labeled bracket F1 of predicted parses (EVALB conventions).

    t2t-parse-eval --prediction=dev.pred.txt \
        --reference='../shared/data/wsj_sample/wsj_01[67]*.mrg'

--prediction: one linearized tree per line (t2t-decoder output on
parsing_wsj), aligned with the gold trees. --reference: gold bracketed trees
(.mrg files), a comma-separated list of files or glob patterns, read in order
(each pattern's matches sorted by name; `~` expanded in each).
"""
import glob
import os

from absl import flags

from t2tlite.bin import console
from t2tlite.evaluate import parsing_f1

flags.DEFINE_string("prediction", None, "Predicted parses, one a line.")
flags.DEFINE_string("reference", None, "Gold bracketed trees: files or glob "
                    "patterns, comma-separated.")

FLAGS = flags.FLAGS


def reference_paths(spec):
  """Files named by a comma-separated list of paths or glob patterns, a
  leading `~` of each expanded.

  Raises:
    FileNotFoundError: a part matches no file.
  """
  paths = []
  for part in filter(None, (p.strip() for p in spec.split(","))):
    found = sorted(glob.glob(os.path.expanduser(part)))
    if not found:
      raise FileNotFoundError(f"--reference: {part} matches no file")
    paths += found
  return paths


def _run():
  predictions = console.read_flag_lines("prediction")
  try:
    gold = parsing_f1.read_reference_trees(reference_paths(FLAGS.reference))
  except ValueError as error:  # names a file; say which flag gave it
    raise ValueError(f"--reference: {error}") from None
  if len(predictions) != len(gold):
    raise ValueError(
        f"--prediction={FLAGS.prediction} has {len(predictions)} lines but "
        f"--reference holds {len(gold)} trees (not counting trees of empty "
        "elements only); they must be aligned.")
  print("\n".join(parsing_f1.evaluate(predictions, gold).lines()))


def main():
  console.run(_run, __name__, required=["prediction", "reference"],
              path_flags=["prediction", "reference"])


if __name__ == "__main__":
  main()
