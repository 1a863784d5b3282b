"""What t2t-datagen does for a text problem: vocabulary, then records per split.

Everything lands in data_dir under the problem's data name P:

    vocab.P.model                 sentencepiece model (trained once, reused)
    vocab.P.targets.model         the targets' own model, when the problem
                                  declares a target_vocab_type
    P-<split>-NNNNN-of-NNNNN      TFRecord shards (+ .json statistics each)
    P-<split>.inputs.txt          the text of the samples of every split but
    P-<split>.targets.txt         train, as in the records, for decoding and
                                  BLEU/F1 later
    P.datagen.json                the summary of the last complete run

Re-running keeps what is complete: the vocabulary, complete shards and text
files. Training a new vocabulary (of either side) deletes P's old records
(their ids are stale). With `vocab_from` (another run's vocabulary, for a
run that fine-tunes it) the vocabulary files are copies of that run's, and
records encoded with any other are deleted likewise.
"""
import json
import os
import re

from absl import logging

from t2tlite import files
from t2tlite.data import records
from t2tlite.data import vocab as vocab_lib
from t2tlite.data import vocab_source
from t2tlite.data.samples import DataError


def generate(problem, data_dir, tmp_dir=None, raw_data_dir=None,
             vocab_size=None, progress=None, vocab_from=None):
  """Generates a Text2TextProblem's vocabulary and records.

  Args:
    problem: a `Text2TextProblem` (a `_rev` variant writes the same files).
    data_dir: output folder (created).
    tmp_dir: downloads and scratch space; default `data_dir/tmp`.
    raw_data_dir: local raw corpus for problems that read one.
    vocab_size: overrides `problem.vocab_size`, the size of the shared (or
      input) vocabulary (reduced with a warning when the corpus cannot
      support it).
    progress: optional callable(split, samples_read), called every 1000
      samples.
    vocab_from: None, or another run's vocabulary to encode with instead of
      training one: a run folder (or a checkpoint inside one) or a
      sentencepiece .model file (`vocab_source.resolve`).

  Returns:
    {"problem", "data_dir", "vocab": {"file", "type", "size", "requested",
    "reused", and with vocab_from "copied_from"} (plus "targets": the same
    keys, for a separate target vocabulary; "requested" is None for a
    "word" one), "splits": {split:
    {"examples", "input_tokens", "target_tokens", "skipped": {reason: n},
    "skipped_where": {reason: [where]}, "lengths", "shards",
    "reused_shards"}}}; also saved as P.datagen.json.
  """
  data_dir = os.path.expanduser(data_dir)
  os.makedirs(data_dir, exist_ok=True)
  tmp_dir = os.path.expanduser(tmp_dir or os.path.join(data_dir, "tmp"))
  raw_data_dir = raw_data_dir and os.path.expanduser(raw_data_dir)
  splits = problem.available_splits(tmp_dir, raw_data_dir)  # fails early
  copied = {}
  if vocab_from:
    copied = _adopt_vocabulary(problem, data_dir, vocab_from)
  vocab_info = _ensure_vocabulary(problem, data_dir, tmp_dir, raw_data_dir,
                                  vocab_size, "inputs")
  if not problem.shares_vocabulary:
    vocab_info["targets"] = _ensure_vocabulary(
        problem, data_dir, tmp_dir, raw_data_dir, None, "targets")
  if copied:
    vocab_info["copied_from"] = copied["inputs"]
    if "targets" in vocab_info:
      vocab_info["targets"]["copied_from"] = copied["targets"]
  summary = {"problem": problem.data_name, "data_dir": data_dir,
             "vocab": vocab_info, "splits": {}}
  # The stored sides (a _rev problem writes NAME's files, unswapped).
  vocab, target_vocab = (
      vocab_lib.Vocabulary.from_file(problem.stored_vocab_file(data_dir, side))
      for side in ("inputs", "targets"))
  for split in splits:
    paths = records.shard_paths(data_dir, problem.data_name, split,
                                problem.num_shards.get(split, 1))
    text_paths = (None if split == "train" else
                  problem.stored_text_files(data_dir, split))
    summary["splits"][split] = records.write_split(
        problem.generate_samples(split, tmp_dir, raw_data_dir), vocab, paths,
        target_vocab=target_vocab,
        max_length=problem.max_length if split == "train" else None,
        text_paths=text_paths,
        progress=(lambda n, split=split: progress(split, n)) if progress
        else None)
  path = os.path.join(data_dir, f"{problem.data_name}.datagen.json")
  files.atomic_write_text(path, json.dumps(summary, indent=1))
  return summary


def _adopt_vocabulary(problem, data_dir, vocab_from):
  """Makes data_dir's vocabulary files copies of another run's (deleting
  records encoded with any other); returns {side: the file copied}.

  Raises:
    DataError: vocab_from holds no vocabulary, or one shared vocabulary where
      the problem has two (or the reverse).
  """
  try:
    source = vocab_source.resolve(vocab_from)
  except vocab_source.VocabSourceError as error:
    raise DataError(str(error)) from None
  if problem.shares_vocabulary and source.targets:
    raise DataError(
        f"vocab_from={vocab_from}: that run has an input and a target "
        f"vocabulary ({source.inputs}, {source.targets}), but "
        f"{problem.name} shares one between inputs and targets")
  if not problem.shares_vocabulary and not source.targets:
    raise DataError(
        f"vocab_from={vocab_from}: one shared vocabulary ({source.inputs}), "
        f"but {problem.name} gives its targets their own")
  copied = {"inputs": source.inputs}
  if source.targets:
    copied["targets"] = source.targets
  for side, path in copied.items():
    destination = problem.vocab_file(data_dir, side)
    if (os.path.exists(destination) and
        vocab_source.same_file_contents(path, destination)):
      continue
    if os.path.exists(destination):
      logging.info("Replacing %s with %s (vocab_from).", destination, path)
    remove_records(data_dir, problem.data_name, problem.splits)
    files.atomic_copy(path, destination)
  return copied


def _ensure_vocabulary(problem, data_dir, tmp_dir, raw_data_dir, vocab_size,
                       side):
  """Reuses or trains the vocabulary of a stored side; returns its summary.

  A shared vocabulary is trained on both sides; a separate one (see
  `Text2TextProblem.target_vocab_type`) on its own side only.
  """
  path = problem.stored_vocab_file(data_dir, side)
  if side == "targets":
    vocab_type = problem.target_vocab_type
    requested = None if vocab_type == "word" else (
        problem.target_vocab_size or problem.vocab_size)
  else:
    vocab_type = problem.vocab_type
    requested = vocab_size or problem.vocab_size
  info = {"file": path, "type": vocab_type, "requested": requested}
  if os.path.exists(path):
    size = vocab_lib.Vocabulary.from_file(path).size
    if vocab_size and vocab_size != size:
      logging.warning(
          "Keeping the existing vocabulary %s (%d pieces); vocab_size=%d "
          "is not applied. Delete it to train a new one (its records are "
          "then regenerated).", path, size, vocab_size)
    return dict(info, size=size, reused=True)
  remove_records(data_dir, problem.data_name, problem.splits)
  text_side = None if problem.shares_vocabulary else side
  size = vocab_lib.train_sentencepiece(
      lambda: problem.vocab_texts(tmp_dir, raw_data_dir, side=text_side),
      path, requested, model_type=vocab_type,
      input_sentence_size=problem.vocab_sample_size,
      byte_fallback=problem.vocab_byte_fallback)
  return dict(info, size=size, reused=False)


def remove_records(data_dir, data_name, splits):
  names = "|".join(re.escape(split) for split in splits)
  stale = re.compile(
      rf"^{re.escape(data_name)}-({names})(-\d{{5}}-of-\d{{5}}"
      rf"(\.json)?|\.(inputs|targets)\.txt)$")
  for name in os.listdir(data_dir):
    if stale.match(name):
      logging.info("Removing %s (encoded with an older vocabulary).", name)
      os.remove(os.path.join(data_dir, name))


def vocab_line(label, vocab):
  requested = (f" (requested {vocab['requested']})" if vocab["requested"]
               and vocab["size"] != vocab["requested"] else "")
  how = "reused" if vocab["reused"] else "trained"
  if vocab.get("copied_from"):
    how, requested = f"copied from {vocab['copied_from']}", ""
  return (f"  {label} ({how}): {vocab['file']}, {vocab['size']} pieces"
          if vocab.get("copied_from") else
          f"  {label} ({how}): {vocab['file']}, {vocab['type']}, "
          f"{vocab['size']} pieces{requested}")


def format_summary(summary):
  """The closing report of a `generate` summary (or of a mixture's, with
  its "members"), as text lines."""
  vocab = summary["vocab"]
  lines = [f"{summary['problem']} -> {summary['data_dir']}"]
  if "members" in summary:
    lines.append(vocab_line("vocabulary", vocab) +
                 f", tags {' '.join(vocab['tags'])}")
    for name, member in summary["members"].items():
      lines.append(f"  {name} ({member['tag']}):")
      lines.append(format_splits(member["splits"]))
    return "\n".join(lines)
  if "targets" in vocab:
    lines += [vocab_line("input vocabulary", vocab),
              vocab_line("target vocabulary", vocab["targets"])]
  else:
    lines.append(vocab_line("vocabulary", vocab))
  lines.append(format_splits(summary["splits"]))
  return "\n".join(lines)


def format_splits(splits):
  """The table of a summary's splits, as text lines."""
  width = max([6] + [len(split) for split in splits])
  lines = [f"  {'split':{width}} {'examples':>10} {'input tok':>12} "
           f"{'target tok':>12} {'shards':>12}  skipped"]
  for split, stats in splits.items():
    skipped = ", ".join(
        f"{count} {reason} (e.g. "
        f"{'; '.join(stats['skipped_where'][reason][:2]) or '-'})"
        for reason, count in stats["skipped"].items()) or "none"
    shards = str(stats["shards"]) + (
        f" ({stats['reused_shards']} kept)" if stats["reused_shards"] else "")
    lines.append(f"  {split:{width}} {stats['examples']:>10,} "
                 f"{stats['input_tokens']:>12,} {stats['target_tokens']:>12,} "
                 f"{shards:>12}  {skipped}")
  return "\n".join(lines)
