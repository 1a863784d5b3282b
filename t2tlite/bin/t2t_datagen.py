r"""t2t-datagen: writes a problem's vocabulary and TFRecord shards to data_dir.

    t2t-datagen --problem=translate_ende_wmt --data_dir=~/t2t_data \
        [--tmp_dir=T] [--raw_data_dir=R] [--t2t_usr_dir=U] [--vocab_size=N]

Re-running keeps complete shards and finishes incomplete work. Prints progress
on stderr and a summary at the end (also saved as
DATA_DIR/PROBLEM.datagen.json).
"""
import sys
import time

from absl import app
from absl import flags

from t2tlite import problem as problem_lib
from t2tlite import registry
from t2tlite.bin import common_flags
from t2tlite.bin import console
from t2tlite.data import datagen

flags.adopt_module_key_flags(common_flags)
flags.DEFINE_integer("vocab_size", None, "Overrides the problem's vocabulary "
                     "size (for small corpora); too large or too small for "
                     "the corpus, it is changed with a warning.",
                     lower_bound=4)

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


def _run(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
  try:
    common_flags.load_plugins()
    problem = problem_lib.get_problem(FLAGS.problem)
    progress = _Progress()
    summary = problem.generate_data(
        FLAGS.data_dir, FLAGS.tmp_dir, raw_data_dir=FLAGS.raw_data_dir,
        vocab_size=FLAGS.vocab_size, progress=progress)
    progress.done()
  except (problem_lib.DataError, registry.RegistryError,
          FileNotFoundError) as error:
    sys.stderr.write(f"\nt2t-datagen: error: {error}\n")
    return 1
  print(datagen.format_summary(summary))
  return 0


def main():
  flags.mark_flags_as_required(["problem", "data_dir"])
  console.run(_run, __name__)


if __name__ == "__main__":
  main()
