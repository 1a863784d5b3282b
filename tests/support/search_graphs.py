"""What a traced search graph holds."""
from t2tlite import graph_functions


def weight_transposes(graph):
  """Transposes of 2-D tensors in `graph`: the decoding layouts of kernels
  (`linear.decoding_kernels`), when the search makes its weights."""
  return [op for op in graph.get_operations()
          if op.type == "Transpose" and op.inputs[0].shape.rank == 2]


def assert_search_rewrite(rewrite):
  """`rewrite` (a RewriterConfig) holds `graph_options.one_round`'s
  options: one round, no memory optimizer, and the passes that change
  nothing in a search or a training step turned off."""
  from tensorflow.core.protobuf import rewriter_config_pb2
  rewriter = rewriter_config_pb2.RewriterConfig
  assert rewrite.meta_optimizer_iterations == rewriter.ONE
  assert rewrite.memory_optimization == rewriter.NO_MEM_OPT
  for name in ("layout_optimizer", "implementation_selector",
               "loop_optimization", "experimental_conditional_code_motion"):
    assert getattr(rewrite, name) == rewriter.OFF, name
  assert rewrite.disable_tfg_optimizer


def block_call_rewrites(nodes, library):
  """The Grappler options (RewriterConfig) each call of a concurrent search
  (a function kept a call: `_noinline`) among `nodes` (NodeDefs) passes on
  when it instantiates its search; `library`: {name: FunctionDef}."""
  from tensorflow.core.protobuf import config_pb2
  rewrites = []
  for node in nodes:
    if node.op not in ("PartitionedCall", "StatefulPartitionedCall"):
      continue
    called = library.get(node.attr["f"].func.name)
    if called is not None and called.attr["_noinline"].b:
      config = config_pb2.ConfigProto.FromString(node.attr["config_proto"].s)
      rewrites.append(config.graph_options.rewrite_options)
  return rewrites


def _saved_model(saved_model_dir):
  """The SavedModel proto of saved_model_dir's saved_model.pb."""
  import os
  from tensorflow.core.protobuf import saved_model_pb2
  proto = saved_model_pb2.SavedModel()
  with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
    proto.ParseFromString(f.read())
  return proto


def saved_model_block_call_rewrites(saved_model_dir):
  """`block_call_rewrites` of every graph and function of a SavedModel."""
  rewrites = []
  for meta_graph in _saved_model(saved_model_dir).meta_graphs:
    functions = meta_graph.graph_def.library.function
    library = {f.signature.name: f for f in functions}
    for nodes in [meta_graph.graph_def.node] + [f.node_def for f in functions]:
      rewrites += block_call_rewrites(nodes, library)
  return rewrites


def signature_loops(saved_model_dir, signatures):
  """{signature: the names of the functions holding a while loop (a
  search's) that it reaches through its calls}, for each of a SavedModel's
  `signatures`."""
  meta_graph = _saved_model(saved_model_dir).meta_graphs[0]
  graph = meta_graph.graph_def
  library = {f.signature.name: f for f in graph.library.function}
  nodes = {n.name: n for n in graph.node}

  def called(node_defs):
    return [name for node in node_defs
            for name in graph_functions.called_names(node, library)]

  def loops(signature):
    output = next(iter(meta_graph.signature_def[signature].outputs.values()))
    reached, pending = set(), called([nodes[output.name.split(":")[0]]])
    while pending:
      name = pending.pop()
      if name not in reached:
        reached.add(name)
        pending.extend(called(library[name].node_def))
    return {name for name in reached if any(
        each.op in ("While", "StatelessWhile")
        for each in library[name].node_def)}

  return {signature: loops(signature) for signature in signatures}
