r"""t2t-decoder: translates (or parses) text with a trained model.

    t2t-decoder --output_dir=~/t2t_train/ende [--problem=translate_ende_wmt] \
        [--checkpoint_path=C] --decode_hparams="beam_size=4,alpha=0.6" \
        --decode_from_file=newstest2014.en --decode_to_file=out.de
    t2t-decoder --output_dir=O --decode_interactive     # one line at a time

Hparams, problem and vocabulary come from output_dir (written by
t2t-trainer), so no overrides are repeated. The newest checkpoint is used
unless --checkpoint_path names one (a prefix such as O/ckpt-100, or a folder
such as O/averaged). --checkpoint_path=A,B,... decodes with an ensemble:
each of A, B, ... is a checkpoint of O (prefix or folder), another run
folder or a checkpoint of one, of the same problem and vocabulary, and the
search averages the models' log-probabilities at every step
(docs/decoding.md). Outputs are detokenized, one per input line, in input
order; an empty input line gives an empty output line. With
--target_prefix_file each output starts with its line's prefix. With
return_beams=true each line holds every beam and its score, tab-separated:
`text_1<TAB>score_1<TAB>text_2<TAB>score_2...`; so does sampling with
num_samples > 1 (decode hparams sampling_temperature > 0, top_k, top_p,
epsilon, sampling_seed, num_samples; docs/decoding.md), its samples in
order.
A model trained on a mixture of problems (`--problem=A+B`) decodes each
line into the language --target_language names (`de`: the tag <2de> goes
before the line), or the one of the tag the line starts with (a tag in the
file wins); an unknown language is an error naming those it knows.
Inputs longer than any training example (run.json records the longest) get
a warning on stderr: a model rarely handles lengths it never saw.
"""
import os
import sys

from absl import app
from absl import flags
from absl import logging

from t2tlite import files
from t2tlite.bin import common_flags, console, lazy, precision_flags, run_flags
from t2tlite.data import languages

# TensorFlow loads when these are first used, after the flags are parsed.
problem_lib = lazy.module("t2tlite.problem")
describe = lazy.module("t2tlite.decode.describe")

flags.DEFINE_string("decode_from_file", None, "Input text, one sentence a "
                    "line.")
flags.DEFINE_string("decode_to_file", None, "Where outputs go (default: "
                    "standard output).")
flags.DEFINE_boolean("decode_interactive", False, "Read sentences from "
                     "standard input, print each output at once.")
flags.DEFINE_string("target_prefix_file", None, "With --decode_from_file: "
                    "target prefixes, one a line: output i starts with "
                    "line i (an empty line: no prefix). Every search, "
                    "sampling and ensembles; a prefix longer than its "
                    "output's limit (input length + extra_length) or one "
                    "the target vocabulary cannot encode is an error.")
flags.DEFINE_boolean("postprocess", False, "Apply the problem's postprocess "
                     "to outputs (parsing: bracketed trees instead of "
                     "sequences; t2t-parse-eval reads either).")
flags.DEFINE_string("target_language", None, "A model of a mixture of "
                    "problems: the language to decode into (de: the tag "
                    "<2de> before each line that does not start with a tag "
                    "of its own); the languages are in run.json's "
                    "target_languages.")
flags.adopt_module_key_flags(run_flags)
precision_flags.define_compute_flag("decoding")
flags.declare_key_flag("mixed_precision")
# Of the shared data flags the decoder reads only these two.
flags.declare_key_flag("problem")
flags.declare_key_flag("t2t_usr_dir")

FLAGS = flags.FLAGS


def _output_line(output, score, source, postprocess, return_beams):
  """The line written for one input: "" for an empty input, else the
  (postprocessed) output, or every beam and its score, tab-separated."""
  if not source.strip():
    return ""
  if not return_beams:
    return postprocess(output, source)
  return "\t".join(f"{postprocess(text, source)}\t{s:.4f}"
                   for text, s in zip(output, score))


def _postprocess_fn(problem_name):
  if not FLAGS.postprocess:
    return lambda text, source: text
  problem = problem_lib.get_problem(problem_name)
  return lambda text, source: problem.postprocess(text, inputs=source)


class _LengthWarning:
  """Warns once, on stderr, when an input is longer (in tokens, EOS
  included) than the longest training example; silent for runs that did not
  record that length."""

  def __init__(self, vocab, longest_train_example):
    self._vocab, self._longest = vocab, longest_train_example
    self._warned = False

  def check(self, lines, first_line_number=1):
    if self._warned or not self._longest or not lines:
      return
    import tensorflow as tf
    tokens = (self._vocab.encode(tf.constant(lines)).row_lengths() +
              1).numpy()
    longer = [i for i, n in enumerate(tokens) if n > self._longest]
    if longer:
      self._warned = True
      first = longer[0]
      sys.stderr.write(
          f"t2t-decoder: warning: {len(longer)} input line(s) are longer "
          f"than any training example (line {first + first_line_number}: "
          f"{tokens[first]} tokens; the longest training example had "
          f"{self._longest}, EOS included); their outputs are likely "
          "wrong.\n")
      sys.stderr.flush()


def _load(settled):
  """(Decoder, problem name, _LengthWarning) from the flags, decoding as
  `settled` says; errors raise."""
  run = run_flags.load_trained(settled)  # an ensemble: A,B,...
  info = run.info
  logging.info("Decoding with %s (%s), %s", run.checkpoint, info.problem,
               describe.describe(settled.hp))
  decoder = run.decoder(settled)
  if decoder.constraint is not None:
    logging.info("Outputs constrained by %s (decode hparam "
                 "constrained=false turns it off).",
                 type(decoder.constraint).__name__)
  return (decoder, info.problem,
          _LengthWarning(run.vocab, info.longest_train_example))


def _read_input():
  """The --decode_from_file lines, read (and --decode_to_file's folder
  checked) before the model loads, so that mistakes fail fast."""
  lines = console.read_flag_lines("decode_from_file")
  folder = os.path.dirname(os.path.abspath(FLAGS.decode_to_file or "."))
  if not os.path.isdir(folder):
    raise FileNotFoundError(f"--decode_to_file={FLAGS.decode_to_file}: "
                            f"folder {folder} does not exist")
  prefixes = None
  if FLAGS.target_prefix_file:
    prefixes = console.read_flag_lines("target_prefix_file")
    if len(prefixes) != len(lines):
      raise ValueError(
          f"--target_prefix_file={FLAGS.target_prefix_file}: "
          f"{len(prefixes)} lines, expected one per --decode_from_file "
          f"line ({len(lines)})")
  return lines, prefixes


def _decode_file(decoder, postprocess, lines, prefixes, length_warning):
  hp = decoder.hp
  length_warning.check(lines)
  try:
    outputs, scores = decoder.decode_lines(lines, prefixes=prefixes)
  except ValueError as error:
    if prefixes is None:
      raise
    # A prefix that cannot be: the error names its line.
    raise ValueError(f"--target_prefix_file={FLAGS.target_prefix_file}: "
                     f"{error}") from None
  results = [_output_line(out, score, src, postprocess, hp.multiple_outputs)
             for out, score, src in zip(outputs, scores, lines)]
  if FLAGS.decode_to_file:
    files.atomic_write_text(FLAGS.decode_to_file,
                            "".join(line + "\n" for line in results))
    logging.info("Wrote %d lines to %s", len(results), FLAGS.decode_to_file)
  else:
    sys.stdout.writelines(r + "\n" for r in results)


def _decode_interactive(decoder, postprocess, length_warning, known):
  hp = decoder.hp
  prompt = sys.stdin.isatty()
  while True:
    if prompt:
      sys.stderr.write("> ")
      sys.stderr.flush()
    line = sys.stdin.readline()
    if not line:
      return
    line = line.rstrip("\n")
    try:
      line = languages.tag_line(line, known, FLAGS.target_language)
    except languages.LanguageError as error:
      sys.stderr.write(f"t2t-decoder: error: {error}\n")
      continue
    length_warning.check([line])
    (output,), (score,) = decoder.decode_lines([line], progress=False)
    print(_output_line(output, score, line, postprocess,
                       hp.multiple_outputs),
          flush=True)


def _run():
  if bool(FLAGS.decode_from_file) == FLAGS.decode_interactive:
    raise app.UsageError("Give exactly one of --decode_from_file and "
                         "--decode_interactive.")
  common_flags.load_plugins()
  if FLAGS.target_prefix_file and FLAGS.decode_interactive:
    raise app.UsageError("--target_prefix_file goes with --decode_from_file "
                         "(line i is input line i's prefix).")
  # Before TensorFlow runs: concurrent searches run best on cores of their
  # own (intra-op threads are fixed once TensorFlow runs), and the model
  # loads in the precision settled here.
  info, settled = run_flags.settled_decode("Decoding")
  if FLAGS.problem and FLAGS.problem != info.problem:
    raise ValueError(
        f"--problem={FLAGS.problem}, but {FLAGS.output_dir} was trained on "
        f"{info.problem}; leave --problem out to use the trained one.")
  known = info.target_languages
  if FLAGS.target_language is not None:
    languages.check_language(FLAGS.target_language, known)
  lines, prefixes = (None, None) if FLAGS.decode_interactive else (
      _read_input())
  if lines is not None:
    lines = languages.tag_lines(
        lines, known, FLAGS.target_language,
        where=f"--decode_from_file={FLAGS.decode_from_file}")
  decoder, problem_name, length_warning = _load(settled)
  postprocess = _postprocess_fn(problem_name)
  if FLAGS.decode_interactive:
    _decode_interactive(decoder, postprocess, length_warning, known)
  else:
    _decode_file(decoder, postprocess, lines, prefixes, length_warning)


def main():
  console.run(_run, __name__, required=["output_dir"],
              path_flags=["output_dir", "checkpoint_path", "decode_from_file",
                          "target_prefix_file",
                          "decode_to_file", "t2t_usr_dir"])


if __name__ == "__main__":
  main()
