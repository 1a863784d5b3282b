"""The functions a node calls (t2tlite/graph_functions.py)."""
from tensorflow.core.framework import node_def_pb2

from t2tlite import graph_functions


def test_called_names_follow_attributes_lists_and_ops_of_the_library():
  loop = node_def_pb2.NodeDef(op="While")
  loop.attr["cond"].func.name = "cond"
  loop.attr["body"].func.name = "body"
  case = node_def_pb2.NodeDef(op="Case")
  for name in ("left", "not_a_function_here"):
    case.attr["branches"].list.func.add().name = name
  by_op = node_def_pb2.NodeDef(op="search")
  library = {"cond", "body", "left", "search"}
  assert sorted(graph_functions.called_names(loop, library)) == [
      "body", "cond"]
  assert graph_functions.called_names(case, library) == ["left"]
  assert graph_functions.called_names(by_op, library) == ["search"]
  assert graph_functions.called_names(by_op, {"other"}) == []
  # The protos themselves, to rename a call.
  for func in graph_functions.function_attrs(case):
    func.name = "p_" + func.name
  assert [f.name for f in case.attr["branches"].list.func] == [
      "p_left", "p_not_a_function_here"]
