"""The functions a graph's node calls, read from its NodeDef (a GraphDef's
or a FunctionDef's): the one walk that renames a kept search's functions
(`decode.trace_cache`) and that the tests and bench follow through a
search's calls. Protos only; no TensorFlow import."""


def function_attrs(node):
  """The NameAttrList protos naming the functions `node` calls through its
  attributes: a call's `f`, a loop's `cond` and `body`, a conditional's
  branches. Setting one's `name` renames that call."""
  for value in node.attr.values():
    if value.HasField("func"):
      yield value.func
    yield from value.list.func


def called_names(node, library):
  """Names of the functions of `library` (names, or {name: FunctionDef})
  that `node` calls: through its attributes, or as its op (a function
  called by name)."""
  names = [func.name for func in function_attrs(node)] + [node.op]
  return [name for name in names if name in library]
