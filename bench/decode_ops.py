"""How many ops one decode step runs: the ops of the search loop's body, by
precision and strategy, for decode_base's model (transformer_base, vocab
37,000).

    python bench/decode_ops.py [--by_type] [--variants float32,int8]

Traces run.py's decode_base search (the search's weights made once, one
search: --concurrent_searches 1) for each variant (float32, bfloat16, int8,
int8 in bfloat16; greedy and beam 4) and prints one JSON line each: the ops
of the innermost `tf.while_loop` body (the step; the beam search's outer
loop over phases is left out), as traced, before TensorFlow's graph
optimizations, and with --by_type the count of each op type. No timing: a
count does not depend on the machine's load, so it serves while others
use the machine. Variants int8 needs where it does not compute are
skipped with a line saying so.
"""
import argparse
import collections
import json
import sys


import t2tlite  # first: it turns oneDNN on before TensorFlow loads
from t2tlite import graph_functions
import keras
import tensorflow as tf

# Run as a script, bench/ is the first folder on the import path.
import run as bench_run  # decode_settled, decode_base_search

VARIANTS = {
    # name: (mixed_precision, int8)
    "float32": (None, False),
    "bfloat16": ("bfloat16", False),
    "int8": (None, True),
    "int8_bfloat16": ("bfloat16", True),
}
_WHILE_OPS = ("While", "StatelessWhile")


def step_bodies(graph_def):
  """The function graphs of the innermost while-loop bodies under
  graph_def: [FunctionDef], one per innermost loop."""
  functions = {f.signature.name: f for f in graph_def.library.function}

  def whiles(nodes):
    return [node for node in nodes if node.op in _WHILE_OPS]

  def called(nodes):
    """Functions the nodes call (loops' bodies, conditions, branches)."""
    return [functions[name] for node in nodes
            for name in graph_functions.called_names(node, functions)]

  innermost, seen = [], set()

  def visit(nodes):
    for node in whiles(nodes):
      body = functions[node.attr["body"].func.name]
      if body.signature.name in seen:
        continue
      seen.add(body.signature.name)
      if not _has_loop(body.node_def, functions):
        innermost.append(body)
      visit(body.node_def)
    for function in called(nodes):
      if function.signature.name not in seen:
        seen.add(function.signature.name)
        visit(function.node_def)

  visit(graph_def.node)
  return innermost


def _has_loop(nodes, functions, depth=0):
  """Whether the nodes, or a function they call, hold a while loop."""
  for node in nodes:
    if node.op in _WHILE_OPS:
      return True
    if depth < 8:
      for name in graph_functions.called_names(node, functions):
        if _has_loop(functions[name].node_def, functions, depth + 1):
          return True
  return False


def count(variant, beam_size, by_type):
  """One JSON-able dict: the step's op count for one variant."""
  mixed_precision, use_int8 = VARIANTS[variant]
  args = argparse.Namespace(
      mixed_precision=mixed_precision, int8=use_int8, beam_size=beam_size,
      alpha=0.6, xla=False, concurrent_searches=1)
  settled = bench_run.decode_settled(args)
  row = {"variant": variant, "beam_size": beam_size}
  if use_int8 and not settled.int8:
    return dict(row, skipped=f"int8 unavailable: {settled.int8_reason}")
  _, inputs, search = bench_run.decode_base_search(settled)
  graph_def = search.get_concrete_function(
      tf.TensorSpec([None, None], inputs.dtype)).graph.as_graph_def()
  bodies = step_bodies(graph_def)
  if not bodies:
    return dict(row, error="no while loop found")
  body = max(bodies, key=lambda f: len(f.node_def))
  row["step_ops"] = len(body.node_def)
  if by_type:
    row["by_type"] = dict(collections.Counter(
        node.op for node in body.node_def).most_common())
  return row


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--variants", default=",".join(VARIANTS),
                      help="comma-separated, of: " + ", ".join(VARIANTS))
  parser.add_argument("--beam_sizes", default="1,4",
                      help="comma-separated beam sizes (1: greedy)")
  parser.add_argument("--by_type", action="store_true",
                      help="also count the step's ops by type")
  args = parser.parse_args()
  for variant in args.variants.split(","):
    for beam_size in (int(b) for b in args.beam_sizes.split(",")):
      print(json.dumps(count(variant, beam_size, args.by_type)), flush=True)
      keras.backend.clear_session()


if __name__ == "__main__":
  sys.exit(main())
