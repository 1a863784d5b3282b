"""Grappler's options for the graphs t2tlite runs most: one round of its
optimizers, no memory optimizer and none of the passes that find nothing
to do in them (`one_round`).

TensorFlow optimizes a function's graph (Grappler) the first time it is
called: by default two rounds of about 15 optimizers, and the memory
optimizer (swapping to host memory and recomputation, for training on
GPUs). On the quick start's model (docs/performance_log.md, 2026-11-29, "A
search's graph optimized in one round", "The training step optimized in
one round"):
- a search's graph: the second round removes 4 of about 1,550 nodes (3
  common subexpressions, a dependency), the memory optimizer none;
  Grappler's pass takes 0.32-0.52 s instead of 0.48-0.62 s, a Decoder's
  first batch about 0.83x the time;
- the training step: the second round removes 6 common subexpressions, the
  memory optimizer nothing; together they took 0.58 of its 1.27 s.
No kernel changes, so outputs are the same (decode checksums, training
losses bit for bit). The evaluation loop keeps the default: its second
round rewrites arithmetic.

The layout optimizer, the implementation selector, the loop optimizer and
the TFG (MLIR) passes change no node of a search (float32, bfloat16, int8)
or of the training step, and took about a tenth of a Decoder's first
batch: 1.40 -> 1.27 s on the quick start's model on a Zen 4, later
batches as fast (docs/performance_log.md, 2026-11-30, "Grappler's passes
that change nothing left out").

Grappler reads its options from the function call that instantiates the
function: TensorFlow's thread-local `FunctionCallOptions` when the call is
traced (a call inside a traced function, such as `search.decode`'s
concurrent searches) or made (an eager call, such as a Decoder's or the
trainer's). `one_round()` sets them for the calls made and traced inside
it, in this thread, and restores the thread's own after.
"""
import contextlib

from tensorflow.core.protobuf import config_pb2
from tensorflow.core.protobuf import rewriter_config_pb2
# FunctionCallOptions: the options a function call passes to Grappler; no
# public API sets them per call.
from tensorflow.python.eager import context

_REWRITER = rewriter_config_pb2.RewriterConfig


def one_round_config(serialized):
  """A ConfigProto: `serialized` (a serialized ConfigProto, or None for an
  empty one) with one round of Grappler's optimizers, no memory optimizer,
  and without the passes that change nothing in t2tlite's graphs (the TFG
  passes among them)."""
  config = config_pb2.ConfigProto()
  if serialized:
    config.ParseFromString(serialized)
  rewrite = config.graph_options.rewrite_options
  rewrite.meta_optimizer_iterations = _REWRITER.ONE
  rewrite.memory_optimization = _REWRITER.NO_MEM_OPT
  rewrite.layout_optimizer = _REWRITER.OFF
  rewrite.implementation_selector = _REWRITER.OFF
  rewrite.loop_optimization = _REWRITER.OFF
  rewrite.experimental_conditional_code_motion = _REWRITER.OFF
  rewrite.disable_tfg_optimizer = True
  return config


@contextlib.contextmanager
def one_round():
  """Function calls traced or made inside it (in this thread) have their
  graphs optimized with `one_round_config`."""
  eager = context.context()
  own = eager.function_call_options
  eager.function_call_options = context.FunctionCallOptions(
      executor_type=own.executor_type,
      config_proto=one_round_config(own.config_proto_serialized))
  try:
    yield
  finally:
    eager.function_call_options = own
