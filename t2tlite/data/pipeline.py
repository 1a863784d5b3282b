"""The input pipeline: TFRecord shards -> per-replica batches counted in tokens.

As in tensor2tensor, examples are grouped by length into buckets whose lengths
grow about 10% apart (8, 9, 10, ..., max_length); a bucket of length L is padded
to exactly L and holds batch_size // L examples, so every batch has at most
batch_size padded tokens, and there are only as many shapes as buckets (bounded
retracing, static-ish shapes for XLA).
"""
import numpy as np
import tensorflow as tf

from t2tlite.data import autotune, records

_MIN_BUCKET = 8
_BUCKET_STEP = 1.1
_CYCLE_LENGTH = 16  # shards read at once; fixed so evaluation order is too
_PARSE_BATCH = 256  # records parsed and filtered in one call


def bucket_lengths(max_length, min_length=_MIN_BUCKET, step=_BUCKET_STEP):
  """Padded lengths of the buckets, increasing, the last one `max_length`."""
  lengths, length = [], min_length
  while length < max_length:
    lengths.append(length)
    length = max(length + 1, int(length * step))
  return lengths + [max_length]


def example_length(example):
  """max(len(inputs), len(targets)) of one parsed example: int32 []."""
  return tf.maximum(tf.shape(example["inputs"])[0],
                    tf.shape(example["targets"])[0])


def _parse_and_filter(serialized, max_length, swap):
  """tf.string [n] records -> ragged int32 {"inputs", "targets"} [kept, None]
  of those whose longer side has at most max_length tokens, in order."""
  parsed = records.parse_examples(serialized)
  if swap:
    parsed = {"inputs": parsed["targets"], "targets": parsed["inputs"]}
  keep = tf.maximum(parsed["inputs"].row_lengths(),
                    parsed["targets"].row_lengths()) <= max_length
  return {k: tf.ragged.boolean_mask(v, keep) for k, v in parsed.items()}


def make_dataset(files, batch_size, max_length, training, input_context=None,
                 swap=False, seed=None, repeat=False,
                 shuffle_buffer=10_000):
  """Batches of records, for one input pipeline (replica group).

  Args:
    files: TFRecord shard paths (see `records`).
    batch_size: padded tokens per batch (per replica).
    max_length: longest kept example, EOS included; longer ones are dropped.
    training: shuffle shards and examples (in an order of their own each
      time without a seed); otherwise a deterministic order.
    input_context: `tf.distribute.InputContext`; each input pipeline gets its
      own shards (or every n-th example when there are fewer shards).
    swap: exchange inputs and targets (reversed problems).
    seed: shuffle seed; training with one reads the same batches in the
      same order every time (its parallel reads and parses kept in order).
    repeat: cycle through the data forever.
    shuffle_buffer: examples in the training shuffle buffer.

  Returns:
    tf.data.Dataset of {"inputs": int32 [batch, L], "targets": int32
    [batch, L]}, L a bucket length, batch * L <= batch_size, padding 0.
  """
  check_batch_size(batch_size, max_length)
  return batch_examples(
      example_dataset(files, max_length, training, input_context, swap, seed,
                      repeat, shuffle_buffer), batch_size, max_length)


def check_batch_size(batch_size, max_length):
  if batch_size < max_length:
    raise ValueError(f"batch_size={batch_size} tokens cannot hold one example "
                     f"of max_length={max_length}; raise batch_size.")


def example_dataset(files, max_length, training, input_context=None,
                    swap=False, seed=None, repeat=False,
                    shuffle_buffer=10_000):
  """`make_dataset`'s examples before batching: {"inputs": int32 [n],
  "targets": int32 [n]} each, EOS included, at most max_length long."""
  files = list(files)
  # Evaluation, and training with a seed, read in a fixed order; unseeded
  # training takes whichever shard and parsed chunk is ready first.
  in_order = not training or seed is not None
  pipelines, pipeline_id = ((input_context.num_input_pipelines,
                             input_context.input_pipeline_id)
                            if input_context else (1, 0))
  dataset = tf.data.Dataset.from_tensor_slices(files)
  by_file = pipelines > 1 and len(files) >= pipelines
  if by_file:
    dataset = dataset.shard(pipelines, pipeline_id)
  if training:
    dataset = dataset.shuffle(len(files), seed=seed)
  if repeat:
    dataset = dataset.repeat()
  dataset = dataset.interleave(
      tf.data.TFRecordDataset, cycle_length=min(len(files), _CYCLE_LENGTH),
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=in_order)
  if pipelines > 1 and not by_file:
    dataset = dataset.shard(pipelines, pipeline_id)
  if training:
    dataset = dataset.shuffle(shuffle_buffer, seed=seed)
  # Parsed and length-filtered _PARSE_BATCH records at a time: a function
  # call per record (parse, then filter) took 1.8x the CPU per batch, CPU
  # that a small model's training steps then lack (BUILD_NOTES.md, Input
  # pipeline speed).
  dataset = dataset.batch(_PARSE_BATCH).map(
      lambda serialized: _parse_and_filter(serialized, max_length, swap),
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=in_order)
  # unbatch gives each row as a ragged tensor of ragged rank 0; a map turns
  # it into the plain int32 [n] tensor that padded batching takes.
  return dataset.unbatch().map(dict, num_parallel_calls=tf.data.AUTOTUNE,
                               deterministic=in_order)


def batch_examples(dataset, batch_size, max_length):
  """Examples (`example_dataset`'s) into `make_dataset`'s length buckets."""
  lengths = bucket_lengths(max_length)
  dataset = dataset.bucket_by_sequence_length(
      example_length,
      # Bucket i holds lengths in [boundary[i-1], boundary[i]) and is padded
      # to boundary[i] - 1 = lengths[i]; the last bucket stays empty.
      bucket_boundaries=[length + 1 for length in lengths],
      bucket_batch_sizes=[batch_size // length for length in lengths] + [1],
      padded_shapes={"inputs": [None], "targets": [None]},
      pad_to_bucket_boundary=True)  # default padding value: 0 = PAD
  # Not autotuned: destroying an autotuned iterator stalls (autotune.py).
  return dataset.prefetch(tf.data.AUTOTUNE).with_options(autotune.off())


def mixing_choices(rates, seed=None):
  """An endless dataset of member indices (int64 []; Dataset.random draws
  32 random bits each), index i drawn with
  probability rates[i] / sum(rates), the same sequence for the same seed
  whatever the members' own streams do: what `mixed_examples` follows."""
  rates = np.asarray(rates, np.float64)
  bounds = tf.constant(np.cumsum(rates / rates.sum())[:-1])
  return tf.data.Dataset.random(seed=seed).map(
      lambda r: tf.searchsorted(
          bounds, [tf.cast(r % (1 << 32), tf.float64) / (1 << 32)],
          side="right", out_type=tf.int64)[0])


def mixed_examples(datasets, rates, seed=None):
  """Examples drawn from endless `datasets` by `mixing_choices`."""
  return tf.data.Dataset.choose_from_datasets(
      datasets, mixing_choices(rates, seed))
