"""A Decoder's traced text search kept for later processes: its graph
functions (FunctionDefs), not its weights.

A Decoder's first batch is mostly the search's trace in Python (about
0.7 s on the quick start's model, more on larger ones). A process that
finds the same search kept by an earlier one registers the kept functions
with TensorFlow and calls them by name, with its own weights: the graph
TensorFlow optimizes and runs is the one the trace made, so outputs and
scores are the traced search's, bit for bit
(tests/unit/test_trace_cache.py).

An entry is keyed by everything the trace reads (`search_key`): the
t2tlite code (a digest of its source files), the TensorFlow, Keras,
tensorflow-text and Python versions, the model's class and architecture,
the Keras dtype policy, the settled decode hparams and the vocabularies'
models; the folder is per TensorFlow version and kind of CPU (as
`t2tlite.xla_cache`'s). So any change of code, model, settings or
TensorFlow traces anew. The weights are arguments, not part of the graph:
another checkpoint of the same model runs the kept search on its own
weights. A search with a decoding constraint, or of a model whose class
is not t2tlite's, is not kept (their code is not in the key). An entry
names each argument by where a live process finds it (a model variable's
path, a search weight's path, a vocabulary's sentencepiece resource); one
that does not resolve, or resolves to another dtype or shape, is not used.

The commands call `install` (through t2tlite.bin), which names the folder
in T2TLITE_TRACE_CACHE for them and the processes they start (an empty
value turns the cache off); library code never calls it, and a Decoder
made where it is not set traces as before. Entries are written under a
temporary name and renamed: a reader never sees half of one.
"""
import functools
import hashlib
import json
import os
import platform
from importlib import metadata

from t2tlite import files, graph_functions, xla_cache

ENV = "T2TLITE_TRACE_CACHE"
_FORMAT = 1  # of an entry's files


def folder():
  """<t2tlite's cache folder>/traces/tf-<version>-<cpu kind>, or None
  where TensorFlow's version is unknown."""
  version = xla_cache.tensorflow_version()
  if version is None:
    return None
  return os.path.join(files.cache_folder(), "traces",
                      f"tf-{version}-{xla_cache.cpu_kind()}")


def install():
  """Names the cache folder in T2TLITE_TRACE_CACHE for this process and
  those it starts, unless it is set already. Returns the folder in use
  ("" for none: TensorFlow's version unknown, or a folder that cannot be
  made or written, where every command would warn that it cannot keep
  its search)."""
  if ENV in os.environ:
    return os.environ[ENV]
  path = folder() or ""
  if path and not xla_cache.can_make(path):
    path = ""
  os.environ[ENV] = path
  return path


def in_use():
  """The folder T2TLITE_TRACE_CACHE names ("" for none)."""
  return os.environ.get(ENV, "")


@functools.cache
def code_digest():
  """sha256 of t2tlite's source files (paths and contents), computed once a
  process."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  digest = hashlib.sha256()
  for folder_path, folders, names in sorted(os.walk(root)):
    folders.sort()
    for name in sorted(names):
      if name.endswith(".py"):
        path = os.path.join(folder_path, name)
        digest.update(os.path.relpath(path, root).encode())
        with open(path, "rb") as f:
          digest.update(f.read())
  return digest.hexdigest()


def _version(distribution):
  try:
    return metadata.version(distribution)
  except metadata.PackageNotFoundError:
    return None


def search_key(model, settled, vocab, target_vocab, constraint):
  """The key of a Decoder's text search, or None where it is not kept (a
  decoding constraint; a model class from outside t2tlite; an ensemble,
  which has no architecture of its own)."""
  model_class = type(model)
  if (constraint is not None or
      not model_class.__module__.startswith("t2tlite.") or
      not hasattr(model, "config") or not hasattr(model, "dtype_policy")):
    return None
  parts = {
      "format": _FORMAT, "code": code_digest(),
      "versions": [xla_cache.tensorflow_version(), _version("keras"),
                   _version("tensorflow-text"), platform.python_version()],
      "model": f"{model_class.__module__}.{model_class.__qualname__}",
      "config": repr(model.config), "policy": model.dtype_policy.name,
      "settled": repr(settled),
      "vocabularies": [hashlib.sha256(v.model_proto).hexdigest()
                       for v in (vocab, target_vocab)]}
  return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()
                        ).hexdigest()[:32]


def named_arguments(model, search_weights, vocab, target_vocab):
  """{name: tensor} of everything a Decoder's search may capture: the
  model's variables (their handles), the search weights, the
  vocabularies' sentencepiece resources. Variable paths are named without
  the model's own name, which Keras numbers by the models a process made
  before ("transformer_1/...")."""
  from tensorflow.python.util import nest
  own = model.name + "/"

  def relative(part):
    part = str(part)
    return part[len(own):] if part.startswith(own) else part

  named = {f"variable:{relative(v.path)}": v.handle
           for v in model.variables}
  for path, value in nest.flatten_with_tuple_paths(search_weights):
    named["weights:" + "/".join(map(relative, path))] = value
  for role, v in (("vocab", vocab), ("target_vocab", target_vocab)):
    named[f"sentencepiece:{role}"] = (
        v.tokenizer._model_resource.resource_handle)
  return named


def _path(key):
  """An entry's file: a line of JSON (what to call, with which arguments),
  then the functions (a serialized FunctionDefLibrary)."""
  return os.path.join(in_use(), key + ".search")


def save(key, concrete, named):
  """Keeps `concrete` (the traced search: tf.string [batch] -> a dict of
  tensors) under `key`, if every argument it captured is one of `named`'s;
  returns whether it did. Failing to write only logs."""
  from absl import logging
  by_id = {id(value): name for name, value in named.items()}
  names = [by_id.get(id(value)) for value in concrete.captured_inputs]
  outputs = concrete.structured_outputs
  if None in names or not isinstance(outputs, dict) or len(
      concrete.outputs) != len(outputs):
    return False
  library = concrete.graph.as_graph_def().library
  library.function.append(concrete.function_def)
  meta = {"format": _FORMAT, "function": concrete.function_def.signature.name,
          "captures": [[name, *_signature(value)] for name, value in
                       zip(names, concrete.captured_inputs)],
          "outputs": sorted(outputs)}  # tf.nest's order of a dict
  path = _path(key)
  try:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # Whole, whoever wrote it last.
    files.atomic_write_bytes(path, json.dumps(meta).encode() + b"\n" +
                             library.SerializeToString())
  except OSError as error:
    logging.warning("The traced search could not be kept in %s (%s); the "
                    "next process traces it again.", os.path.dirname(path),
                    error)
    return False
  return True


class KeptSearch:
  """A kept search, registered with TensorFlow under names of its own:
  called as the traced function is, strings -> {name: tensor}."""

  def __init__(self, function_name, arguments, outputs):
    from tensorflow.python.eager import context
    self._context = context.context()
    self._name, self._arguments = function_name.encode(), arguments
    self._outputs = outputs

  def __call__(self, strings):
    results = self._context.call_function(
        self._name, [strings] + self._arguments, len(self._outputs))
    return dict(zip(self._outputs, results))


def load(key, named):
  """The `KeptSearch` under `key`, or None where there is none or it does
  not fit `named` (logged)."""
  from absl import logging
  path = _path(key)
  if not os.path.exists(path):
    return None
  try:
    with open(path, "rb") as f:
      header, _, library_bytes = f.read().partition(b"\n")
    meta = json.loads(header)
    arguments = [_argument(named, *capture) for capture in meta["captures"]]
    entry = _registered(key, meta, library_bytes)
  except (OSError, ValueError, KeyError, TypeError) as error:
    logging.warning("The kept search %s is not used (%s: %s); tracing it.",
                    path, type(error).__name__, error)
    return None
  return KeptSearch(entry, arguments, meta["outputs"])


def _signature(value):
  """[dtype name, shape] of a tensor."""
  return [value.dtype.name, value.shape.as_list()]


def _argument(named, name, dtype, shape):
  """named[name], which must have the dtype and shape the entry recorded.
  Raises KeyError or ValueError."""
  value = named[name]
  if _signature(value) != [dtype, shape]:
    raise ValueError(f"{name} is {_signature(value)} here, {[dtype, shape]} "
                     "in the entry")
  return value


def _registered(key, meta, library_bytes):
  """Registers the entry's functions under names prefixed with its key (no
  function traced in this process has such a name); returns the search's
  name. Raises ValueError for an entry that does not parse."""
  from google.protobuf.message import DecodeError
  from tensorflow.core.framework import function_pb2
  from tensorflow.python.eager import context
  if meta.get("format") != _FORMAT:
    raise ValueError(f"format {meta.get('format')}, expected {_FORMAT}")
  library = function_pb2.FunctionDefLibrary()
  try:
    library.ParseFromString(library_bytes)
  except DecodeError as error:
    raise ValueError(f"its functions do not parse: {error}") from None
  names = {f.signature.name for f in library.function}
  if meta["function"] not in names:
    raise ValueError(f"it lacks its function {meta['function']}")
  prefix = f"t2tlite_kept_{key[:16]}_"
  renamed = {name: prefix + name for name in names}
  ctx = context.context()
  for function in library.function:
    _rename(function, renamed)
    if not ctx.has_function(function.signature.name):
      ctx.add_function_def(function)
  return renamed[meta["function"]]


def _rename(function, renamed):
  """Renames `function` and the functions its nodes name (calls, loop and
  branch bodies) by `renamed`."""
  function.signature.name = renamed[function.signature.name]
  for node in function.node_def:
    for func in graph_functions.function_attrs(node):
      if func.name in renamed:
        func.name = renamed[func.name]
    if node.op in renamed:  # a function called as an op
      node.op = renamed[node.op]


def search_function(traced, model, settled, vocab, target_vocab, constraint,
                    search_weights):
  """A Decoder's text search to call: the kept one where the cache is in
  use and holds it; else the concrete function of `traced` (the Decoder's
  tf.function of strings), traced here and kept for later processes where
  the cache is in use and the search can be kept (`search_key`). Either
  way called without the tf.function's dispatch, a few tenths of a
  millisecond a call. Call inside `graph_options.one_round()`, as the
  search is called."""
  key = in_use() and search_key(model, settled, vocab, target_vocab,
                                constraint)
  if not key:
    return traced.get_concrete_function()
  named = named_arguments(model, search_weights, vocab, target_vocab)
  kept = load(key, named)
  if kept is not None:
    return kept
  concrete = traced.get_concrete_function()
  save(key, concrete, named)
  return concrete
