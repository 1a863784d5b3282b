"""A search's graph and the training step are optimized with one round of
Grappler's optimizers, no memory optimizer and none of the passes that
change nothing in them (t2tlite.graph_options),
wherever they are traced or called: a Decoder's batches, the searches of
an export, the trainer's steps."""
import threading

import pytest
from tensorflow.core.protobuf import config_pb2
from tensorflow.core.protobuf import rewriter_config_pb2
from tensorflow.python.eager import context

from t2tlite import graph_options
from t2tlite.decode import machine
from t2tlite.decode.decoding import Decoder
from t2tlite.decode.settings import DecodeHParams
from t2tlite.train import strategy as strategy_lib

from run_folder import multi30k_lines, needs_multi30k
from search_graphs import assert_search_rewrite, block_call_rewrites
from shared_run import shared_trained_run
import train_helpers

REWRITER = rewriter_config_pb2.RewriterConfig


def _rewrite_options():
  """This thread's Grappler options for the function calls it makes."""
  serialized = context.context().function_call_options.config_proto_serialized
  return config_pb2.ConfigProto.FromString(
      serialized).graph_options.rewrite_options


def test_one_round_sets_this_threads_options_and_restores_them():
  before = _rewrite_options()
  assert before.meta_optimizer_iterations == REWRITER.DEFAULT_NUM_ITERS
  seen = {}
  with pytest.raises(RuntimeError, match="inside"):
    with graph_options.one_round():
      assert_search_rewrite(_rewrite_options())
      # Other threads keep their own.
      other = threading.Thread(
          target=lambda: seen.update(other=_rewrite_options()))
      other.start()
      other.join()
      raise RuntimeError("inside")
  assert seen["other"] == before
  assert _rewrite_options() == before


@needs_multi30k
def test_a_decoders_searches_are_optimized_with_the_search_options(
    tmp_path_factory):
  _, model, vocab = shared_trained_run(tmp_path_factory)
  decoder = Decoder(model, vocab, machine.settle(DecodeHParams.parse(
      "beam_size=2,concurrent_searches=2")))
  decoder.decode_batch(multi30k_lines("en", 2))  # traced and called
  graph = decoder._decode.get_concrete_function().graph.as_graph_def()
  library = {f.signature.name: f for f in graph.library.function}
  rewrites = block_call_rewrites(graph.node, library)
  assert len(rewrites) == 2  # the two searches
  for rewrite in rewrites:
    assert_search_rewrite(rewrite)


def test_the_trainers_steps_are_called_with_one_round(tmp_path):
  trainer = train_helpers.tiny_trainer(
      str(tmp_path), strategy_lib.make_strategy(0, tf_config=""),
      train_steps=2)
  step, seen = trainer._train_step, []

  def recorded(iterator):  # the real step, and the options it is called with
    seen.append(_rewrite_options())
    return step(iterator)

  trainer._train_step = recorded
  trainer.train()
  assert len(seen) == 2
  for rewrite in seen:
    assert_search_rewrite(rewrite)
  # Between the steps (evaluation, checkpoints) the thread's own are back.
  assert _rewrite_options().meta_optimizer_iterations == (
      REWRITER.DEFAULT_NUM_ITERS)


def test_one_round_keeps_the_threads_other_options():
  eager = context.context()
  own = eager.function_call_options
  config = config_pb2.ConfigProto(inter_op_parallelism_threads=3)
  config.graph_options.rewrite_options.constant_folding = REWRITER.OFF
  eager.function_call_options = context.FunctionCallOptions(
      executor_type="SINGLE_THREADED_EXECUTOR", config_proto=config)
  try:
    with graph_options.one_round():
      options = eager.function_call_options
      inside = config_pb2.ConfigProto.FromString(
          options.config_proto_serialized)
  finally:
    eager.function_call_options = own
  assert options.executor_type == "SINGLE_THREADED_EXECUTOR"
  assert inside.inter_op_parallelism_threads == 3
  assert inside.graph_options.rewrite_options.constant_folding == REWRITER.OFF
  assert_search_rewrite(inside.graph_options.rewrite_options)
