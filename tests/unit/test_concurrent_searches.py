"""Concurrent searches (decode hparam concurrent_searches): a batch decoded
as independent searches over blocks of its rows gives the outputs of one
search, in order, and the graph holds the searches side by side."""
import functools
import itertools
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from t2tlite.decode import machine
from t2tlite.decode.decoding import Decoder
from t2tlite.decode.machine import (searches_for, set_search_threads,
                                    threads_per_search)
from decode_helpers import decode_ids
from t2tlite.decode.search import balanced_blocks, search_with_hparams
from t2tlite.decode.settings import DecodeHParams
from t2tlite.decode.tree_constraint import TreeConstraint
from t2tlite.hparams_lib import HParams
from t2tlite.models import build_model

from int8_kernel import needs_int8
from outputs_differ import assert_outputs_differ
from search_graphs import weight_transposes
from tree_pieces import (INPUT_PIECES, TARGET_PIECES, check_trees,
                         random_inputs)

# Rows of different lengths (padding differs between the blocks' rows).
INPUTS = tf.constant([[5, 6, 7, 1, 0, 0], [8, 9, 10, 11, 12, 1],
                      [13, 1, 0, 0, 0, 0], [20, 21, 1, 0, 0, 0],
                      [30, 31, 32, 33, 1, 0]], tf.int32)


def test_balanced_blocks_deal_out_the_rows_by_length():
  # Lengths 3, 5, 1, 2, 4 (EOS included).
  for parts, blocks in ((1, [[1, 4, 0, 3, 2]]), (2, [[1, 0, 2], [4, 3]]),
                        (3, [[1, 3], [4, 2], [0]]),
                        (7, [[1], [4], [0], [3], [2], [], []])):
    found = balanced_blocks(INPUTS, parts)
    assert [b.numpy().tolist() for b in found] == blocks
  # Equal lengths keep their order, dealt out in turn.
  equal = tf.ones([5, 3], tf.int32)
  assert [b.numpy().tolist() for b in balanced_blocks(equal, 2)] == [
      [0, 2, 4], [1, 3]]


@pytest.fixture(scope="module")
def searcher(tiny_model):
  """searcher(beam_size, searches): a tf.function searching ids of any
  shape (as a Decoder or an export traces it) with tiny_model; one per
  arguments in this module, so that the tests that run a search and the
  one that reads its graph share its trace."""
  @functools.cache
  def get(beam_size, searches):
    return tf.function(
        lambda x: decode_ids(
            tiny_model, x, beam_size=beam_size, alpha=0.6, extra_length=6,
            return_beams=True, concurrent_searches=searches),
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
        autograph=False)
  return get


@pytest.mark.parametrize("beam_size", [1, 4])
def test_concurrent_searches_give_the_outputs_of_one(searcher, beam_size):
  def run(searches, inputs):
    result = searcher(beam_size, searches)(inputs)
    return result["outputs"].numpy(), result["scores"].numpy()

  one_ids, one_scores = run(1, INPUTS)
  assert_outputs_differ(one_ids.tolist())
  assert np.count_nonzero(one_ids[:, 0, 0]) == INPUTS.shape[0]
  ids, scores = run(2, INPUTS)  # blocks of 3 and 2 rows, out of order
  np.testing.assert_array_equal(ids, one_ids)
  np.testing.assert_allclose(scores, one_scores, atol=1e-5)
  # One row for two searches: one of them searches an empty block.
  ids, scores = run(2, INPUTS[1:2])
  np.testing.assert_array_equal(ids, one_ids[1:2])
  np.testing.assert_allclose(scores, one_scores[1:2], atol=1e-5)


@needs_int8
def test_an_int8_search_over_an_empty_block(tiny_model):
  # One row for two int8 searches (either layout of the kernels), traced
  # once for ids of any shape, as a Decoder traces its search.
  row = INPUTS[1:2]
  one = decode_ids(tiny_model, row, beam_size=2, extra_length=4, int8=True)
  two = tf.function(
      lambda x: decode_ids(tiny_model, x, beam_size=2, extra_length=4,
                           int8=True, concurrent_searches=2),
      input_signature=[tf.TensorSpec([None, None], tf.int32)],
      autograph=False)
  np.testing.assert_array_equal(two(row)["outputs"], one["outputs"])
  # And an empty batch, in one search and in two.
  for searches, empty in itertools.product((1, 2), (row[:0], row[:0, :0])):
    result = (two(empty) if searches == 2 else
              decode_ids(tiny_model, empty, beam_size=2, extra_length=4,
                         int8=True))
    assert result["outputs"].shape[0] == result["scores"].shape[0] == 0
  assert two.experimental_get_tracing_count() == 1


def test_concurrent_searches_are_side_by_side_in_the_graph(searcher):
  def traced(searches):
    return searcher(4, searches).get_concrete_function().graph

  def ops_of_type(graph, *types):
    return [op for op in graph.get_operations() if op.type in types]

  single_graph, graph = traced(1), traced(2)
  assert len(ops_of_type(single_graph, "While", "StatelessWhile")) == 1
  # Two calls of one search function (traced once), each holding the loop.
  calls = ops_of_type(graph, "PartitionedCall", "StatefulPartitionedCall")
  assert len(calls) == 2
  names = {call.get_attr("f").name for call in calls}
  assert len(names) == 1
  library = {f.signature.name: f for f in graph.as_graph_def().library.function}
  search = library[names.pop()]
  assert any(node.op in ("While", "StatelessWhile")
             for node in search.node_def)
  # Kept a call: each call's search is optimized on its own, side by side.
  assert search.attr["_noinline"].b
  # Neither call waits for the other: no path from one to the other.
  first, second = calls

  def upstream(op):
    seen, todo = set(), [op]
    while todo:
      node = todo.pop()
      for parent in [t.op for t in node.inputs] + list(node.control_inputs):
        if parent.name not in seen:
          seen.add(parent.name)
          todo.append(parent)
    return seen

  assert first.name not in upstream(second)
  assert second.name not in upstream(first)

  # The pair shares one copy of the search's weights: the kernels' decoding
  # layouts (transposes of 2-D weights) are made once, as for one search.
  assert weight_transposes(single_graph)
  assert len(weight_transposes(graph)) == len(weight_transposes(single_graph))


def test_constrained_concurrent_searches_give_trees():
  tf.keras.utils.set_random_seed(3)
  model = build_model(HParams(num_layers=1, d_model=16, d_ff=32, num_heads=2,
                              dropout=0.0, max_length=64),
                      len(TARGET_PIECES))
  inputs, words = random_inputs(np.random.default_rng(3), batch=5, max_len=9)
  constraint = TreeConstraint(TARGET_PIECES, INPUT_PIECES)
  outputs = {}
  for searches in (1, 2):
    result = decode_ids(model, inputs, beam_size=3, alpha=0.3,
                        extra_length=4, constraint=constraint,
                        concurrent_searches=searches)
    check_trees(result["outputs"], words)
    outputs[searches] = result["outputs"].numpy()
  np.testing.assert_array_equal(outputs[2], outputs[1])


def test_searches_for_picks_two_on_two_cores_and_one_on_a_gpu(monkeypatch):
  # The machine is set here (cores, no GPU, then a GPU), not read.
  monkeypatch.setattr(tf.config, "list_physical_devices",
                      lambda kind=None: [])
  monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: {0, 1})
  assert searches_for(DecodeHParams()) == 2
  assert searches_for(DecodeHParams(int8=True)) == 2
  assert searches_for(DecodeHParams(concurrent_searches=3)) == 3
  assert searches_for(DecodeHParams(concurrent_searches=1)) == 1
  monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: {0})
  assert searches_for(DecodeHParams()) == 1
  assert searches_for(DecodeHParams(concurrent_searches=2)) == 2
  monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: {0, 1})
  monkeypatch.setattr(
      tf.config, "list_physical_devices",
      lambda kind=None: ["GPU:0"] if kind == "GPU" else [])
  assert searches_for(DecodeHParams()) == 1
  assert searches_for(DecodeHParams(concurrent_searches=2)) == 2


def test_hparams_are_settled_once_and_searched_whole(monkeypatch,
                                                      tiny_model):
  monkeypatch.setattr(tf.config, "list_physical_devices",
                      lambda kind=None: [])
  monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: {0, 1})
  settled = machine.settle(DecodeHParams(beam_size=2))
  assert settled.hp == DecodeHParams(beam_size=2, concurrent_searches=2)
  assert settled.searches == 2 and not settled.int8
  assert settled.threads_per_search is None  # threads only when asked
  assert settled.precision is None  # no precision asked for
  assert machine.settle(settled.hp) == settled  # settles to itself
  with pytest.raises(TypeError, match="settled already"):
    machine.settle(settled)
  with pytest.raises(TypeError, match="machine.settle"):
    search_with_hparams(tiny_model, INPUTS, DecodeHParams())
  with pytest.raises(TypeError, match="machine.settle"):
    Decoder(tiny_model, None, DecodeHParams())
  settled = machine.settle(DecodeHParams(
      beam_size=2, extra_length=5, return_beams=True))
  whole = search_with_hparams(tiny_model, INPUTS, settled)
  # One search's outputs: two give the same
  # (test_concurrent_searches_give_the_outputs_of_one).
  expected = decode_ids(tiny_model, INPUTS, beam_size=2, extra_length=5,
                        return_beams=True)
  np.testing.assert_array_equal(whole["outputs"], expected["outputs"])


@needs_int8
def test_a_per_call_int8_search_runs_int8_where_the_kernel_computes(
    tiny_model):
  """An export's int8 search (int8_per_call) picks int8 at each call: here,
  where the kernel computes, its outputs are the int8 search's."""
  hp = dict(beam_size=2, extra_length=4, concurrent_searches=1)
  export = machine.settle(DecodeHParams(int8=True, **hp), int8_per_call=True)
  assert export.int8 and export.int8_per_call
  got = search_with_hparams(tiny_model, INPUTS, export)["scores"].numpy()
  int8 = decode_ids(tiny_model, INPUTS, int8=True, **hp)["scores"].numpy()
  plain = decode_ids(tiny_model, INPUTS, **hp)["scores"].numpy()
  np.testing.assert_allclose(got, int8, rtol=1e-6)
  assert not np.allclose(got, plain, rtol=1e-6, atol=0)


def test_set_search_threads_leaves_one_search_and_the_users_setting(
    monkeypatch):
  """In this process TensorFlow runs already: a call that tries to set the
  threads warns that it cannot; one that leaves them alone says nothing."""
  warnings = []
  monkeypatch.setattr(machine.logging, "warning",
                      lambda fmt, *args: warnings.append(fmt % args))
  tf.constant(1.0) + 1.0  # pylint: disable=expression-not-assigned
  threads = tf.config.threading.get_intra_op_parallelism_threads()
  monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "3")
  assert set_search_threads(2) is None
  monkeypatch.delenv("TF_NUM_INTRAOP_THREADS")
  assert set_search_threads(1) is None
  assert not warnings
  assert set_search_threads(2) is None
  assert len(warnings) == 1
  assert "keep TensorFlow's thread settings" in warnings[0]
  assert tf.config.threading.get_intra_op_parallelism_threads() == threads


def test_threads_per_search_share_the_cores():
  assert threads_per_search(2, cores=2) == 1
  assert threads_per_search(2, cores=8) == 4
  assert threads_per_search(3, cores=8) == 2
  assert threads_per_search(4, cores=2) == 1  # never none
  assert threads_per_search(1, cores=6) == 6


# (Setting them before TensorFlow starts is checked where programs do it:
# t2t-decoder's log in test_decoder.py, decode_base's intra_op_threads in
# test_bench.py.)
SET_THREADS = """
import os
os.environ.pop("TF_NUM_INTRAOP_THREADS", None)  # pytest-xdist's, not a user's
import tensorflow as tf
from t2tlite.decode import machine
from t2tlite.decode.machine import set_search_threads
from t2tlite.decode.settings import DecodeHParams
# The user's own setting is left alone.
os.environ["TF_NUM_INTRAOP_THREADS"] = "3"
assert set_search_threads(2) is None
del os.environ["TF_NUM_INTRAOP_THREADS"]
assert set_search_threads(1) is None  # one search: TensorFlow's default
assert tf.config.threading.get_intra_op_parallelism_threads() == 0
# A command settles once, at its boundary, before TensorFlow runs:
# searches, their threads and the precision.
settled = machine.settle(DecodeHParams(concurrent_searches=2), "float32",
                         set_threads=True)
threads = tf.config.threading.get_intra_op_parallelism_threads()
assert settled.threads_per_search == threads == machine.threads_per_search(2)
assert settled.searches == 2 and settled.precision.precision == "float32"
# Other threads than the searches', then TensorFlow starts: its threads are
# fixed now, and the searches keep them.
tf.config.threading.set_intra_op_parallelism_threads(threads + 1)
tf.constant(1.0) + 1.0
assert set_search_threads(2) is None
assert tf.config.threading.get_intra_op_parallelism_threads() == threads + 1
print("checked")
"""


@pytest.mark.timeout(120)
def test_set_search_threads_in_a_fresh_process():
  run = subprocess.run([sys.executable, "-c", SET_THREADS],
                       capture_output=True, text=True, timeout=110)
  assert run.returncode == 0, run.stderr
  assert run.stdout.strip() == "checked"
  assert "keep TensorFlow's thread settings" in run.stderr


def test_concurrent_searches_hparam_is_checked():
  assert DecodeHParams.parse("concurrent_searches=2").concurrent_searches == 2
  assert DecodeHParams().concurrent_searches == 0
  with pytest.raises(ValueError, match="concurrent_searches must be >= 0"):
    DecodeHParams.parse("concurrent_searches=-1")
