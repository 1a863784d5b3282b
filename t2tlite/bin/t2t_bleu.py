"""t2t-bleu: BLEU of a translation file against a reference file.

    t2t-bleu --translation=out.de --reference=newstest2014.de

Prints sacrebleu's `BLEU = ...` line (cased, detokenized) first, then its
signature, the uncased score and the paper's tokenized BLEU (see
t2tlite.evaluate.bleu).
"""
import sys

from absl import app
from absl import flags

from t2tlite.evaluate import bleu
from t2tlite.bin import console

flags.DEFINE_string("translation", None, "Detokenized system output, one "
                    "sentence a line.")
flags.DEFINE_string("reference", None, "Detokenized reference, aligned by "
                    "line with --translation.")

FLAGS = flags.FLAGS


def _run(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
  try:
    report = bleu.file_bleu(FLAGS.translation, FLAGS.reference)
  except (FileNotFoundError, ValueError) as error:
    sys.stderr.write(f"t2t-bleu: error: {error}\n")
    return 1
  print("\n".join(report.lines()))
  return 0


def main():
  flags.mark_flags_as_required(["translation", "reference"])
  console.run(_run, __name__)


if __name__ == "__main__":
  main()
