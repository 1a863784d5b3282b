"""Sharded TFRecord files of `tf.train.Example`s, written resumably.

Each example has two int64 features, "inputs" [n] and "targets" [m], both ending
with EOS (id 1). For problem data name P, split S and N shards, `data_dir` holds

    P-S-00000-of-0000N          records; written as `<name>.incomplete`, renamed
                                when complete
    P-S-00000-of-0000N.json     the shard's statistics, written just before the
                                rename (examples, tokens, skips, length counts)

Sample k of a split goes to shard k % N, so a re-run regenerates exactly the
shards that are missing (it reads the samples again but encodes only those).
Texts are whitespace-normalised first (runs of spaces, tabs and line breaks
become one space), so a sample is one line of a text file.
"""
import collections
import json
import os
import re

import tensorflow as tf

from t2tlite.data.samples import DataError, Skipped
from t2tlite.ids import EOS_ID

_ENCODE_BATCH = 1000
_WHERE_KEPT = 5  # locations kept per skip reason, for the summary


def shard_paths(data_dir, data_name, split, num_shards):
  return [os.path.join(data_dir, f"{data_name}-{split}-{i:05d}-of-"
                                 f"{num_shards:05d}")
          for i in range(num_shards)]


def is_complete(path):
  return os.path.exists(path) and os.path.exists(path + ".json")


def find_shards(data_dir, data_name, split):
  """The complete shard files of a split.

  Raises:
    DataError: no shards, or some are missing or incomplete.
  """
  pattern = re.compile(
      rf"^{re.escape(data_name)}-{split}-(\d{{5}})-of-(\d{{5}})$")
  names = [n for n in sorted(os.listdir(data_dir)) if pattern.match(n)] if (
      os.path.isdir(data_dir)) else []
  totals = {int(pattern.match(n).group(2)) for n in names}
  if not names:
    raise DataError(f"No {split} records of {data_name} in {data_dir}; run "
                    f"t2t-datagen --problem={data_name} --data_dir={data_dir}")
  paths = shard_paths(data_dir, data_name, split, max(totals))
  incomplete = [p for p in paths if not is_complete(p)]
  if len(totals) > 1 or incomplete:
    raise DataError(
        f"The {split} records of {data_name} in {data_dir} are incomplete "
        f"({len(paths) - len(incomplete)} of {len(paths)} shards); re-run "
        f"t2t-datagen --problem={data_name} --data_dir={data_dir} to finish.")
  return paths


def make_example(inputs, targets):
  """Serialized `tf.train.Example` of two id lists (already ending with EOS).

  Deterministic: the features map is written in key order, not in the
  order of the process's hash seed, so every run writes the same bytes.
  """
  feature = {
      name: tf.train.Feature(int64_list=tf.train.Int64List(value=ids))
      for name, ids in (("inputs", inputs), ("targets", targets))}
  return tf.train.Example(features=tf.train.Features(
      feature=feature)).SerializeToString(deterministic=True)


_FEATURES = {"inputs": tf.io.RaggedFeature(tf.int64),
             "targets": tf.io.RaggedFeature(tf.int64)}


def parse_example(serialized):
  """tf.string [] -> {"inputs": int32 [n], "targets": int32 [m]}."""
  parsed = tf.io.parse_single_example(serialized, _FEATURES)
  return {k: tf.cast(v, tf.int32) for k, v in parsed.items()}


def parse_examples(serialized):
  """tf.string [batch] -> {"inputs", "targets"}: ragged int32 [batch, None]."""
  parsed = tf.io.parse_example(serialized, _FEATURES)
  return {k: tf.cast(v, tf.int32) for k, v in parsed.items()}


def new_stats():
  return {"examples": 0, "input_tokens": 0, "target_tokens": 0,
          "skipped": {}, "skipped_where": {}, "lengths": {}}


def _skip(stats, reason, where):
  stats["skipped"][reason] = stats["skipped"].get(reason, 0) + 1
  kept = stats["skipped_where"].setdefault(reason, [])
  if where and len(kept) < _WHERE_KEPT:
    kept.append(where)


def _count(stats, inputs, targets, length):
  stats["examples"] += 1
  stats["input_tokens"] += len(inputs)
  stats["target_tokens"] += len(targets)
  stats["lengths"][str(length)] = stats["lengths"].get(str(length), 0) + 1


def merge_stats(many):
  """Sums shard statistics (lengths are max(len(inputs), len(targets)))."""
  total = new_stats()
  lengths = collections.Counter()
  for stats in many:
    for key in ("examples", "input_tokens", "target_tokens"):
      total[key] += stats[key]
    for reason, count in stats["skipped"].items():
      total["skipped"][reason] = total["skipped"].get(reason, 0) + count
    for reason, where in stats["skipped_where"].items():
      kept = total["skipped_where"].setdefault(reason, [])
      kept.extend(where[:_WHERE_KEPT - len(kept)])
    lengths.update({int(k): v for k, v in stats["lengths"].items()})
  total["lengths"] = {str(k): lengths[k] for k in sorted(lengths)}
  return total


def read_stats(paths):
  stats = []
  for path in paths:
    with open(path + ".json", encoding="utf-8") as f:
      stats.append(json.load(f))
  return merge_stats(stats)


def _clean(text):
  # One example per line in text files: no line breaks inside a sample.
  return " ".join(text.split()) if isinstance(text, str) else ""


def write_split(samples, vocab, paths, target_vocab=None, max_length=None,
                text_paths=None, progress=None):
  """Encodes and writes the samples of one split into `paths`, resumably.

  Args:
    samples: iterator of {"inputs": str, "targets": str} or `Skipped`.
    vocab: the inputs' `Vocabulary` (ids get EOS appended).
    paths: shard paths (`shard_paths`); complete ones are kept as they are.
    target_vocab: the targets' `Vocabulary`; None: `vocab`.
    max_length: if set, examples with more tokens (EOS included) on either
      side are skipped and counted.
    text_paths: optional (inputs_path, targets_path): the kept samples' text,
      one per line (for decoding and scoring dev/test later).
    progress: optional callable(samples_read).

  Returns:
    Merged statistics plus "shards" and "reused_shards".
  """
  num_shards = len(paths)
  stats = [None if is_complete(p) else new_stats() for p in paths]
  todo = [i for i, s in enumerate(stats) if s is not None]
  text_paths = text_paths or ()
  need_text = not all(os.path.exists(p) for p in text_paths)
  if todo or need_text:
    _write(samples, (vocab, target_vocab or vocab), paths, stats, todo,
           max_length, text_paths if need_text else (), progress)
  summary = read_stats(paths)
  summary.update(shards=num_shards, reused_shards=num_shards - len(todo))
  return summary


def _write(samples, vocabs, paths, stats, todo, max_length, text_paths,
           progress):
  writers = {i: tf.io.TFRecordWriter(paths[i] + ".incomplete") for i in todo}
  texts = [open(p + ".incomplete", "w", encoding="utf-8") for p in text_paths]
  pending = []

  def flush():
    encoded = [vocab.encode(tf.constant([p[k] for p in pending])).to_list()
               for k, vocab in zip((2, 3), vocabs)]
    for (shard, index, _, _), inputs, targets in zip(pending, *encoded):
      inputs, targets = inputs + [EOS_ID], targets + [EOS_ID]
      length = max(len(inputs), len(targets))
      if max_length and length > max_length:
        _skip(stats[shard], f"longer than max_length={max_length}",
              f"sample {index}")
        continue
      writers[shard].write(make_example(inputs, targets))
      _count(stats[shard], inputs, targets, length)
    pending.clear()

  try:
    for index, sample in enumerate(samples):
      shard = index % len(paths)
      if progress and index % 1000 == 0:
        progress(index)
      if isinstance(sample, Skipped):
        if stats[shard] is not None:
          _skip(stats[shard], sample.reason, sample.where)
        continue
      inputs, targets = _clean(sample["inputs"]), _clean(sample["targets"])
      if not inputs or not targets:
        if stats[shard] is not None:
          _skip(stats[shard], "empty inputs or targets", f"sample {index}")
        continue
      for f, text in zip(texts, (inputs, targets)):
        f.write(text + "\n")
      if stats[shard] is not None:
        pending.append((shard, index, inputs, targets))
        if len(pending) >= _ENCODE_BATCH:
          flush()
    if pending:
      flush()
  except BaseException:
    for writer in writers.values():
      writer.close()
    for f in texts:
      f.close()
    for path in [paths[i] for i in todo] + list(text_paths):
      if os.path.exists(path + ".incomplete"):
        os.remove(path + ".incomplete")
    raise
  for i in todo:
    writers[i].close()
    with open(paths[i] + ".json.incomplete", "w", encoding="utf-8") as f:
      json.dump(stats[i], f)
    os.replace(paths[i] + ".json.incomplete", paths[i] + ".json")
    os.replace(paths[i] + ".incomplete", paths[i])
  for f, path in zip(texts, text_paths):
    f.close()
    os.replace(path + ".incomplete", path)
