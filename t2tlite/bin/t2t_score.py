r"""t2t-score: the model's log-probability of given translations.

    t2t-score --output_dir=~/t2t_train/ende [--checkpoint_path=C] \
        --source_file=corpus.en --target_file=corpus.de \
        --scores_file=corpus.scores [--per_token] [--batch_size=64]

Line i of --scores_file holds pair i's total log-probability (natural log,
the target's EOS included) and that total divided by its target tokens
(EOS included), tab-separated; with --per_token a third field holds each
target token's log-probability (the target's sentencepiece pieces, then
EOS), space-separated. Pairs are scored in batches of similar length and
written in input order. The total is the score greedy search gives that
output (beam search's before its length penalty).

The two files must have the same number of lines, and no line may be empty
(an empty line is usually a misaligned corpus): either fails with an error
naming the file and line, before the model loads.

A model of a mixture of problems scores each source line with its
target-language tag, as t2t-decoder decodes it: --target_language=de puts
<2de> before each line that does not start with a known tag of its own; a
line without a tag and no --target_language is an error naming the line and
the languages the model knows.
"""
import os

from absl import flags
from absl import logging

from t2tlite import files
from t2tlite.data import languages
from t2tlite.bin import common_flags, console, lazy, run_flags  # noqa: F401

# TensorFlow loads when this is first used, after the flags are parsed.
run_dir = lazy.module("t2tlite.run_dir")

flags.declare_key_flag("output_dir")
flags.declare_key_flag("checkpoint_path")
flags.DEFINE_string("source_file", None, "Source sentences, one a line.")
flags.DEFINE_string("target_file", None, "Their target sentences, one a "
                    "line, aligned with --source_file.")
flags.DEFINE_string("scores_file", None, "Where the scores go, one line a "
                    "pair: total<TAB>normalized[<TAB>per-token scores].")
flags.DEFINE_boolean("per_token", False, "Also write each target token's "
                     "log-probability.")
flags.DEFINE_string("target_language", None, "A model of a mixture of "
                    "problems: the language the targets are in (de: the "
                    "tag <2de> before each source line that does not start "
                    "with a tag of its own).")
flags.DEFINE_integer("batch_size", 64, "Pairs scored together.",
                     lower_bound=1)

FLAGS = flags.FLAGS


def _read_pairs():
  """The two files' lines, checked: same count, no empty line."""
  sources = console.read_flag_lines("source_file")
  targets = console.read_flag_lines("target_file")
  if len(sources) != len(targets):
    raise ValueError(
        f"--source_file={FLAGS.source_file} has {len(sources)} lines but "
        f"--target_file={FLAGS.target_file} has {len(targets)}: pairs are "
        "read line by line")
  for flag, lines in (("source_file", sources), ("target_file", targets)):
    for number, line in enumerate(lines, 1):
      if not line.strip():
        raise ValueError(f"--{flag}={FLAGS[flag].value} line {number} is "
                         "empty: every pair needs a source and a target "
                         "sentence")
  folder = os.path.dirname(os.path.abspath(FLAGS.scores_file))
  if not os.path.isdir(folder):
    raise FileNotFoundError(f"--scores_file={FLAGS.scores_file}: folder "
                            f"{folder} does not exist")
  return sources, targets


def _check_lengths(model, source_ids, target_ids):
  """A model with learned positions has none past max_length."""
  config = model.config
  if config.position_encoding != "learned":
    return
  for flag, rows in (("source_file", source_ids),
                     ("target_file", target_ids)):
    for number, row in enumerate(rows, 1):
      if len(row) > config.max_length:
        raise ValueError(
            f"--{flag}={FLAGS[flag].value} line {number} has {len(row)} "
            f"tokens (EOS included); this model has learned positions for "
            f"at most {config.max_length} (hparams max_length)")


def _tagged(sources, known):
  """The source lines as the model reads them (`languages.tag_lines`)."""
  return languages.tag_lines(sources, known, FLAGS.target_language,
                             where=f"--source_file={FLAGS.source_file}")


def format_line(score, per_token):
  line = f"{score.total:.6f}\t{score.normalized:.6f}"
  if per_token:
    line += "\t" + " ".join(f"{s:.6f}" for s in score.tokens)
  return line


def _run():
  from t2tlite.data.vocab import Vocabulary
  from t2tlite.decode.scoring import Scorer
  sources, targets = _read_pairs()
  common_flags.load_run_plugins(FLAGS.output_dir)
  model, info, path = run_dir.load_trained_model(FLAGS.output_dir,
                                                 FLAGS.checkpoint_path)
  sources = _tagged(sources, info.target_languages)
  logging.info("Scoring %d pairs with %s", len(sources), path)
  vocab = Vocabulary.from_file(info.vocab_file)
  target_vocab = Vocabulary.from_file(info.target_vocab_file)
  scorer = Scorer(model, vocab, target_vocab)
  source_ids, target_ids = scorer.encode(sources, targets)
  _check_lengths(model, source_ids, target_ids)
  scores = scorer.score_ids(source_ids, target_ids, FLAGS.batch_size)
  files.atomic_write_text(FLAGS.scores_file, "".join(
      format_line(s, FLAGS.per_token) + "\n" for s in scores))
  logging.info("Wrote %d scores to %s", len(scores), FLAGS.scores_file)


def main():
  console.run(_run, __name__,
              required=["output_dir", "source_file", "target_file",
                        "scores_file"],
              path_flags=["output_dir", "checkpoint_path", "source_file",
                          "target_file", "scores_file"])


if __name__ == "__main__":
  main()
