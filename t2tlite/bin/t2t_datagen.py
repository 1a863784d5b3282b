r"""t2t-datagen: writes a problem's vocabulary (or its input and target
vocabularies) and TFRecord shards to data_dir.

    t2t-datagen --problem=translate_ende_wmt --data_dir=~/t2t_data \
        [--tmp_dir=T] [--raw_data_dir=R] [--t2t_usr_dir=U] [--vocab_size=N]
        [--vocab_from=RUN_OR_MODEL]

Re-running keeps complete shards and finishes incomplete work. Prints progress
on stderr and a summary at the end (also saved as
DATA_DIR/PROBLEM.datagen.json).
"""
import sys
import time

from absl import flags

from t2tlite import registry
from t2tlite.bin import common_flags
from t2tlite.bin import console
from t2tlite.bin import lazy
from t2tlite.data.samples import DataError

# TensorFlow loads when these are first used, after the flags are parsed.
datagen = lazy.module("t2tlite.data.datagen")
problem_lib = lazy.module("t2tlite.problem")

flags.adopt_module_key_flags(common_flags)
flags.DEFINE_integer("vocab_size", None, "Overrides the problem's vocabulary "
                     "size (for small corpora; the input vocabulary's when "
                     "the targets have their own); too large or too small "
                     "for the corpus, it is changed with a warning.",
                     lower_bound=4)
flags.DEFINE_string("vocab_from", None, "Encode with another run's "
                    "vocabulary instead of training one: a run folder (or a "
                    "checkpoint inside one) or a sentencepiece .model file. "
                    "A run that fine-tunes that run needs it "
                    "(docs/fine_tuning.md); records encoded with another "
                    "vocabulary are regenerated.")

FLAGS = flags.FLAGS


class _Progress:
  """On a terminal, rewrites one stderr line twice a second; otherwise
  writes a line every 30 seconds."""

  def __init__(self):
    self._tty = sys.stderr.isatty()
    self._every = 0.5 if self._tty else 30.0
    self._last = time.monotonic()

  def __call__(self, split, samples):
    now = time.monotonic()
    if now - self._last >= self._every:
      self._last = now
      line = f"  {split}: {samples:,} samples read"
      sys.stderr.write(f"\r{line}" if self._tty else f"{line}\n")
      sys.stderr.flush()

  def done(self):
    if self._tty:
      sys.stderr.write("\r" + " " * 60 + "\r")


def _run():
  common_flags.check_data_dir(FLAGS.data_dir)
  common_flags.load_plugins()
  problem = problem_lib.get_problem(FLAGS.problem)
  progress = _Progress()
  try:
    summary = problem.generate_data(
        FLAGS.data_dir, FLAGS.tmp_dir, raw_data_dir=FLAGS.raw_data_dir,
        vocab_size=FLAGS.vocab_size, progress=progress,
        vocab_from=FLAGS.vocab_from)
  finally:
    progress.done()
  print(datagen.format_summary(summary))


def main():
  console.run(_run, __name__, required=["problem", "data_dir"],
              path_flags=["data_dir", "tmp_dir", "raw_data_dir", "t2t_usr_dir",
                          "vocab_from"],
              errors=(console.CommandError, DataError,
                      registry.RegistryError, FileNotFoundError))


if __name__ == "__main__":
  main()
