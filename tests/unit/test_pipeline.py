"""The input pipeline on Multi30k records: token budget, counts, bucket shapes,
determinism, shuffling, per-replica sharding and distribution."""
import collections
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import t2tlite.problems  # noqa: F401  (registers the built-in problems)
import train_helpers
from corpora import read_lines
from t2tlite.data import autotune, pipeline
from t2tlite.hparams_lib import create_hparams
from t2tlite.problem import get_problem

HP = create_hparams("transformer_tiny", "batch_size=600,max_length=24")


def _rows(dataset):
  """Every example of a finite dataset as (inputs, targets) tuples without
  padding, in order; checks each batch on the way."""
  rows = []
  lengths = pipeline.bucket_lengths(HP.max_length)
  for batch in dataset:
    inputs, targets = batch["inputs"].numpy(), batch["targets"].numpy()
    assert inputs.dtype == np.int32 and targets.dtype == np.int32
    size, length = inputs.shape
    assert targets.shape == (size, length)
    assert size * length <= HP.batch_size  # the token budget
    assert length in lengths  # padded to its bucket length
    for a, b in zip(inputs, targets):
      rows.append((tuple(a[a != 0]), tuple(b[b != 0])))
      for ids in (a, b):
        real = (ids != 0).sum()
        assert ids[real - 1] == 1 and not ids[real:].any()  # EOS, then PAD
  return rows


@pytest.mark.parametrize("split, raw_file", [("train", "train.de"),
                                             ("dev", "val.de.gz")])
def test_budget_and_counts(multi30k_data, multi30k_raw, split, raw_file):
  problem, data_dir, summary = multi30k_data
  rows = _rows(problem.dataset(str(data_dir), split, HP, training=False))
  lines_in = len(read_lines(multi30k_raw / raw_file))
  skipped = sum(summary["splits"][split]["skipped"].values())  # datagen
  dropped, total = problem.count_longer(str(data_dir), split, HP.max_length)
  assert dropped > 0  # max_length=24 really filters something
  assert total == lines_in - skipped
  assert len(rows) == lines_in - skipped - dropped
  assert all(max(len(a), len(b)) <= HP.max_length for a, b in rows)


def test_evaluation_is_deterministic(multi30k_data):
  problem, data_dir, _ = multi30k_data
  first = _rows(problem.dataset(str(data_dir), "train", HP, training=False))
  second = _rows(problem.dataset(str(data_dir), "train", HP, training=False))
  assert first == second


def test_pipelines_are_not_autotuned(multi30k_data):
  """Destroying an autotuned iterator stalls (t2tlite/data/autotune.py)."""
  problem, data_dir, _ = multi30k_data
  for training in (True, False):
    dataset = problem.dataset(str(data_dir), "train", HP, training=training)
    assert dataset.options().autotune.enabled is False


def test_per_device_datasets_are_not_autotuned():
  """tf.distribute's MultiDeviceIterator builds one dataset per device
  after the pipeline; destroying an autotuned one stalls as well."""
  from tensorflow.python.data.ops import multi_device_iterator_ops as ops
  autotune.off_per_device()
  create = ops._create_device_dataset
  autotune.off_per_device()  # idempotent
  assert ops._create_device_dataset is create
  devices = ops.MultiDeviceIterator(tf.data.Dataset.range(3), ["/cpu:0"])
  [per_device] = devices._device_iterators
  assert per_device._dataset.options().autotune.enabled is False
  assert [int(devices.get_next()[0]) for _ in range(3)] == [0, 1, 2]


def test_training_shuffles_the_same_examples(multi30k_data):
  problem, data_dir, _ = multi30k_data
  ordered = _rows(problem.dataset(str(data_dir), "train", HP, training=False))
  shuffled = _rows(problem.dataset(str(data_dir), "train", HP, training=True,
                                   seed=3, repeat=False))
  assert shuffled != ordered
  assert collections.Counter(shuffled) == collections.Counter(ordered)


def test_seeded_training_order_is_reproducible(multi30k_data):
  """With a seed, training reads the same batches in the same order every
  time (its shards interleaved and parsed in parallel, in order); another
  seed gives another order."""
  problem, data_dir, _ = multi30k_data

  def first_batches(seed):
    return _rows(problem.dataset(str(data_dir), "train", HP, training=True,
                                 seed=seed).take(40))
  first = first_batches(3)
  assert first_batches(3) == first
  assert first_batches(4) != first


def test_training_repeats_with_one_shape_per_bucket(multi30k_data):
  problem, data_dir, _ = multi30k_data
  dataset = problem.dataset(str(data_dir), "train", HP, training=True, seed=1)
  shapes = {tuple(b["inputs"].shape) for b in dataset.take(400)}
  # An endless stream fills every batch: batch = batch_size // length.
  assert all(size == HP.batch_size // length for size, length in shapes)
  assert len(shapes) <= len(pipeline.bucket_lengths(HP.max_length))


@pytest.mark.parametrize("split", ["train", "dev"])  # 32 shards / 1 shard
def test_input_pipelines_split_the_data(multi30k_data, split):
  problem, data_dir, _ = multi30k_data
  everything = _rows(problem.dataset(str(data_dir), split, HP, False))
  parts = [_rows(problem.dataset(
      str(data_dir), split, HP, False,
      input_context=tf.distribute.InputContext(2, i, 2))) for i in (0, 1)]
  assert parts[0] and parts[1]
  assert collections.Counter(parts[0] + parts[1]) == collections.Counter(
      everything)


def test_reversed_problem_swaps_inputs_and_targets(multi30k_data):
  problem, data_dir, _ = multi30k_data
  forward = _rows(problem.dataset(str(data_dir), "dev", HP, False))
  backward = _rows(get_problem("translate_ende_wmt_rev").dataset(
      str(data_dir), "dev", HP, False))
  assert sorted(backward) == sorted((b, a) for a, b in forward)


def test_bucket_lengths():
  lengths = pipeline.bucket_lengths(256)
  assert lengths[0] == 8 and lengths[-1] == 256
  assert all(b > a for a, b in zip(lengths, lengths[1:]))
  assert all(b <= max(a + 1, a * 1.1) for a, b in zip(lengths, lengths[1:-1]))
  assert pipeline.bucket_lengths(5) == [5]
  with pytest.raises(ValueError, match="batch_size=16"):
    pipeline.make_dataset(["x"], batch_size=16, max_length=32, training=False)


DISTRIBUTED = train_helpers.LEAN_START + textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import t2tlite.problems
    from t2tlite.hparams_lib import create_hparams
    from t2tlite.problem import get_problem
    data_dir = sys.argv[1]
    problem = get_problem("algorithmic_reverse")
    problem.generate_data(data_dir)
    hp = create_hparams("transformer_tiny", "batch_size=256,max_length=32")
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    dataset = problem.distributed_dataset(strategy, data_dir, "train", hp,
                                          training=True)
    shapes = []
    for step, batch in zip(range(5), dataset):
      shapes.append([list(t.shape) for t in
                     strategy.experimental_local_results(batch["inputs"])])
    from tensorflow.python.data.ops import multi_device_iterator_ops
    print(json.dumps({"replicas": strategy.num_replicas_in_sync,
                      "shapes": shapes,
                      "device_datasets_autotuned": not getattr(
                          multi_device_iterator_ops._create_device_dataset,
                          "autotune_off", False)}))
""")


@pytest.mark.timeout(180)
def test_per_replica_batches_with_mirrored_strategy(tmp_path):
  result = subprocess.run(
      [sys.executable, "-c", DISTRIBUTED, str(tmp_path)],
      capture_output=True, text=True, timeout=170,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads(result.stdout.strip().splitlines()[-1])
  assert report["replicas"] == 2
  # Destroying an autotuned iterator stalls (t2tlite/data/autotune.py).
  assert report["device_datasets_autotuned"] is False
  for step in report["shapes"]:
    assert len(step) == 2  # one batch per replica
    for size, length in step:
      assert size * length <= 256  # the budget is per replica


def test_batch_size_of_one_longest_example_is_accepted():
  pipeline.check_batch_size(24, 24)
  with pytest.raises(ValueError, match="max_length=24"):
    pipeline.check_batch_size(23, 24)


def test_examples_are_padded_to_the_smallest_bucket_that_holds_them():
  # Buckets 8, 9, 10, ..., 22, 24 (bucket_lengths(24)); 48 tokens a batch
  # hold 6 examples of length 8, 4 of length 10 and 2 of length 24.
  lengths = [8] * 6 + [10] * 4 + [24] * 2
  examples = [list(range(3, 2 + n)) + [1] for n in lengths]

  def generate():
    for ids in examples:
      yield {"inputs": ids, "targets": ids[::-1]}

  spec = tf.TensorSpec([None], tf.int32)
  dataset = tf.data.Dataset.from_generator(
      generate, output_signature={"inputs": spec, "targets": spec})
  batches = list(pipeline.batch_examples(dataset, 48, 24))
  assert sorted(b["inputs"].shape.as_list() for b in batches) == [
      [2, 24], [4, 10], [6, 8]]
  rows = [tuple(row[row != 0]) for b in batches
          for row in b["inputs"].numpy()]
  assert sorted(rows) == sorted(tuple(ids) for ids in examples)
