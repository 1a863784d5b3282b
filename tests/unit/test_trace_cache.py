"""A Decoder's traced text search kept for later processes
(t2tlite.decode.trace_cache): the kept search gives the traced one's
outputs and scores bit for bit, on its own model's weights too; a changed
setting is another entry; a damaged entry is traced again, with a
warning. Decoders made here stand for later processes: each registers the
kept functions it loads as a fresh process would."""
import dataclasses
import glob
import json
import os
import types

import pytest

from t2tlite import run_dir
from t2tlite.data.vocab import Vocabulary
from t2tlite.decode import machine, trace_cache
from t2tlite.decode.decoding import Decoder
from t2tlite.decode.settings import DecodeHParams
from t2tlite.models import build_model
from t2tlite.models.transformer import Transformer

import permuted_vocab
from run_folder import TINY, multi30k_lines, needs_multi30k
from shared_run import shared_trained_run

pytestmark = needs_multi30k
SETTINGS = "beam_size=2,alpha=0.6,extra_length=5"


@pytest.fixture
def cache(tmp_path, monkeypatch):
  """A fresh cache folder in use (as a command's `install` sets it)."""
  monkeypatch.setenv(trace_cache.ENV, str(tmp_path / "traces"))
  return tmp_path / "traces"


def _decoder(model, vocab, settings=SETTINGS):
  return Decoder(model, vocab, machine.settle(DecodeHParams.parse(settings)))


def _decoded(decoder, lines):
  return decoder.decode_batch(lines), decoder._text_search


def test_the_kept_search_decodes_as_the_traced_one(tmp_path_factory, cache,
                                                   monkeypatch):
  _, model, vocab = shared_trained_run(tmp_path_factory)
  lines = multi30k_lines("en", 5)
  traced, first = _decoded(_decoder(model, vocab), lines)
  assert not isinstance(first, trace_cache.KeptSearch)
  assert len(glob.glob(str(cache / "*.search"))) == 1
  kept, second = _decoded(_decoder(model, vocab), lines)
  assert isinstance(second, trace_cache.KeptSearch)
  assert kept == traced  # outputs, and scores to the last bit
  # Another run of the same hparams: the kept search on its own weights.
  _, other, other_vocab = shared_trained_run(tmp_path_factory, seed=4)
  theirs, third = _decoded(_decoder(other, other_vocab), lines)
  assert isinstance(third, trace_cache.KeptSearch)
  assert theirs != traced
  monkeypatch.setenv(trace_cache.ENV, "")  # traced, without the cache
  assert _decoded(_decoder(other, other_vocab), lines)[0] == theirs


def test_a_damaged_entry_is_traced_again_with_a_warning(
    tmp_path_factory, cache, caplog):
  _, model, vocab = shared_trained_run(tmp_path_factory)
  lines = multi30k_lines("en", 2)
  traced, _ = _decoded(_decoder(model, vocab), lines)
  entry, = glob.glob(str(cache / "*.search"))
  with open(entry, "r+b") as f:
    f.truncate(os.path.getsize(entry) // 2)
  with caplog.at_level("WARNING"):
    again, search = _decoded(_decoder(model, vocab), lines)
  assert not isinstance(search, trace_cache.KeptSearch)
  assert again == traced
  assert "is not used (ValueError: its functions do not parse" in caplog.text
  # Traced, it was kept again, whole.
  assert isinstance(_decoded(_decoder(model, vocab), lines)[1],
                    trace_cache.KeptSearch)


def test_the_key_follows_what_the_trace_reads(tmp_path_factory, tmp_path):
  folder, model, vocab = shared_trained_run(tmp_path_factory)

  def key(settings=SETTINGS, **changes):
    settled = machine.settle(DecodeHParams.parse(settings))
    parts = dict(model=model, settled=settled, vocab=vocab,
                 target_vocab=vocab, constraint=None)
    parts.update(changes)
    return trace_cache.search_key(**parts)

  assert key() == key()
  assert key("beam_size=3,alpha=0.6,extra_length=5") != key()
  settled = machine.settle(DecodeHParams.parse(SETTINGS))
  assert key(settled=dataclasses.replace(
      settled, weights_first=not settled.weights_first)) != key()
  # The same pieces under other ids; a model of another shape.
  permuted_vocab.permuted_copy(run_dir.read_run_info(folder).vocab_file,
                               tmp_path / "permuted.model")
  permuted = Vocabulary.from_file(str(tmp_path / "permuted.model"))
  assert key(vocab=permuted) != key() != key(target_vocab=permuted)
  assert key(model=build_model(TINY.replace(d_ff=32), vocab.size)) != key()
  # A constraint's code is not in the key: its search is not kept; nor an
  # ensemble's.
  assert key(constraint=object()) is None
  from t2tlite.decode.ensemble import Ensemble
  assert key(model=Ensemble([model, model])) is None


def test_the_code_digest_follows_the_python_files(tmp_path, monkeypatch):
  """Over a stand-in package: any .py file's path or contents change the
  digest (so the key), other files do not."""
  package = tmp_path / "t2tlite"
  (package / "decode").mkdir(parents=True)
  (package / "decode" / "trace_cache.py").write_text("a = 1\n")
  (package / "notes.txt").write_text("x")
  monkeypatch.setattr(trace_cache, "__file__",
                      str(package / "decode" / "trace_cache.py"))

  def digest():
    trace_cache.code_digest.cache_clear()
    return trace_cache.code_digest()

  try:
    first = digest()
    (package / "notes.txt").write_text("y")
    assert digest() == first
    (package / "decode" / "trace_cache.py").write_text("a = 2\n")
    second = digest()
    (package / "decode" / "trace_cache.py").rename(package / "other.py")
    assert len({first, second, digest()}) == 3
  finally:
    trace_cache.code_digest.cache_clear()


def test_an_argument_of_another_shape_or_dtype_is_refused():
  import tensorflow as tf
  named = {"weights:values/kernel": tf.zeros([2, 3])}
  assert trace_cache._argument(named, "weights:values/kernel", "float32",
                               [2, 3]) is named["weights:values/kernel"]
  with pytest.raises(ValueError, match=r"\['float32', \[2, 3\]\] here"):
    trace_cache._argument(named, "weights:values/kernel", "float32", [2, 4])
  with pytest.raises(ValueError, match="bfloat16"):
    trace_cache._argument(named, "weights:values/kernel", "bfloat16", [2, 3])
  with pytest.raises(KeyError):
    trace_cache._argument(named, "weights:values/other", "float32", [2, 3])


def test_install_names_the_folder_unless_the_user_did(tmp_path, monkeypatch):
  monkeypatch.setenv("T2TLITE_CACHE_DIR", str(tmp_path / "cache"))
  for own in ("", str(tmp_path / "mine")):  # off, or a folder of one's own
    monkeypatch.setenv(trace_cache.ENV, own)
    assert trace_cache.install() == own == trace_cache.in_use()
  monkeypatch.delenv(trace_cache.ENV)
  installed = trace_cache.install()
  assert installed == trace_cache.in_use() == trace_cache.folder()
  assert installed.startswith(str(tmp_path / "cache" / "traces" / "tf-"))
  # A cache folder that cannot be made (under a file): the cache is off.
  (tmp_path / "file").write_text("")
  monkeypatch.setenv("T2TLITE_CACHE_DIR", str(tmp_path / "file" / "cache"))
  monkeypatch.delenv(trace_cache.ENV)
  assert trace_cache.install() == "" == trace_cache.in_use()


def _tiny_search(captured, scale=1.0):
  """A traced function shaped as a Decoder's text search (strings -> a
  dict of tensors) that captures `captured`."""
  import tensorflow as tf
  # Not in tf.nest's (sorted) order, as a search's dict need not be.
  return tf.function(
      lambda strings: {"scores": captured * scale, "outputs": strings},
      input_signature=[tf.TensorSpec([None], tf.string)],
      autograph=False).get_concrete_function()


def test_what_cannot_be_kept_is_not(tmp_path, monkeypatch, caplog):
  import tensorflow as tf
  value = tf.constant([1.0, 2.0])
  search = _tiny_search(value)
  # An argument no live process could find: nothing written.
  monkeypatch.setenv(trace_cache.ENV, str(tmp_path / "traces"))
  assert not trace_cache.save("k", search, {})
  assert not (tmp_path / "traces").exists()
  # A folder that cannot be made: a warning, and the command goes on.
  (tmp_path / "file").write_text("")
  monkeypatch.setenv(trace_cache.ENV, str(tmp_path / "file" / "traces"))
  with caplog.at_level("WARNING"):
    assert not trace_cache.save("k", search, {"weights:v": value})
  assert "could not be kept in" in caplog.text
  # No TensorFlow version to name a folder by: no cache.
  monkeypatch.delenv(trace_cache.ENV)
  monkeypatch.setattr(trace_cache.xla_cache, "tensorflow_version",
                      lambda: None)
  assert trace_cache.folder() is None and trace_cache.install() == ""
  assert trace_cache._version("no-such-distribution") is None


def test_an_entry_is_checked_and_its_functions_renamed(tmp_path, monkeypatch):
  import tensorflow as tf
  monkeypatch.setenv(trace_cache.ENV, str(tmp_path))
  value = tf.constant([1.0, 2.0])
  assert trace_cache.save("k" * 32, _tiny_search(value), {"weights:v": value})
  kept = trace_cache.load("k" * 32, {"weights:v": tf.constant([3.0, 4.0])})
  result = kept(tf.constant(["a", "b"]))
  assert result["outputs"].numpy().tolist() == [b"a", b"b"]
  assert result["scores"].numpy().tolist() == [3.0, 4.0]  # its own weights
  meta = {"format": trace_cache._FORMAT, "function": "f"}
  with pytest.raises(ValueError, match="format 0, expected"):
    trace_cache._registered("k", dict(meta, format=0), b"")
  with pytest.raises(ValueError, match="it lacks its function f"):
    trace_cache._registered("k", meta, b"")
  # Calls by attribute and by op name both follow the renaming.
  from tensorflow.core.framework import function_pb2
  function = function_pb2.FunctionDef()
  function.signature.name = "outer"
  by_attr, by_op = function.node_def.add(), function.node_def.add()
  by_attr.op = "PartitionedCall"
  by_attr.attr["f"].func.name = "inner"
  by_op.op = "inner"
  by_list = function.node_def.add()  # a Case's branches
  by_list.op = "Case"
  for name in ("inner", "other"):
    by_list.attr["branches"].list.func.add().name = name
  trace_cache._rename(function, {"outer": "p_outer", "inner": "p_inner"})
  assert function.signature.name == "p_outer"
  assert by_attr.attr["f"].func.name == "p_inner" and by_op.op == "p_inner"
  assert [f.name for f in by_list.attr["branches"].list.func] == [
      "p_inner", "other"]


def test_entries_of_two_keys_run_their_own_search_in_one_process(
    tmp_path, monkeypatch):
  """Processes name their traces alike, so entries of two searches (two
  models, two settings) can hold functions of the same name."""
  import tensorflow as tf
  from tensorflow.core.framework import function_pb2
  monkeypatch.setenv(trace_cache.ENV, str(tmp_path))
  value = tf.constant([1.0, 2.0])
  named = {"weights:v": value}
  a, b = (tmp_path / f"{key * 32}.search" for key in "ab")
  for key, scale in (("a" * 32, 1.0), ("b" * 32, 10.0)):
    assert trace_cache.save(key, _tiny_search(value, scale), named)
  # b rewritten as another process would have written it, its search
  # named as a's.
  name_a = json.loads(a.read_bytes().partition(b"\n")[0])["function"]
  header, _, functions = b.read_bytes().partition(b"\n")
  meta = json.loads(header)
  library = function_pb2.FunctionDefLibrary.FromString(functions)
  for function in library.function:
    trace_cache._rename(function, {meta["function"]: name_a})
  b.write_bytes(json.dumps(dict(meta, function=name_a)).encode() + b"\n" +
                library.SerializeToString())
  strings = tf.constant(["x", "y"])
  scores = [trace_cache.load(key * 32, named)(strings)["scores"]
            for key in "ab"]
  assert [s.numpy().tolist() for s in scores] == [[1.0, 2.0], [10.0, 20.0]]


def test_a_kept_search_runs_on_the_weights_of_another_model_made_here(
    tmp_path_factory, tmp_path, monkeypatch):
  """Keras numbers a process's models (transformer, transformer_1, ...):
  an entry's arguments are found in any of them."""
  import numpy as np
  import tensorflow as tf
  _, model, vocab = shared_trained_run(tmp_path_factory)
  other = build_model(TINY, vocab.size)
  assert other.name != model.name
  monkeypatch.setenv(trace_cache.ENV, str(tmp_path))

  def embeddings(of):
    variable, = (v for v in of.variables
                 if v.path.endswith("/embedding/embeddings"))
    return variable

  assert trace_cache.save(
      "k" * 32, _tiny_search(embeddings(model)),
      trace_cache.named_arguments(model, {}, vocab, vocab))
  kept = trace_cache.load(
      "k" * 32, trace_cache.named_arguments(other, {}, vocab, vocab))
  assert not np.array_equal(embeddings(other), embeddings(model))
  np.testing.assert_array_equal(kept(tf.constant(["a"]))["scores"],
                                embeddings(other).numpy())


def test_an_entry_naming_an_argument_not_found_here_is_traced_again(
    tmp_path, monkeypatch, caplog):
  import tensorflow as tf
  monkeypatch.setenv(trace_cache.ENV, str(tmp_path))
  value = tf.constant([1.0, 2.0])
  assert trace_cache.save("k" * 32, _tiny_search(value), {"weights:v": value})
  with caplog.at_level("WARNING"):
    assert trace_cache.load("k" * 32, {"weights:w": value}) is None
  assert "is not used (KeyError: 'weights:v')" in caplog.text


class _Tweaked(Transformer):
  """A Transformer of one's own: its code is not t2tlite's."""


def test_the_search_of_a_model_class_from_outside_t2tlite_is_not_kept():
  vocab = types.SimpleNamespace(model_proto=b"pieces")
  ours, tweaked = (cls.from_hparams(TINY, 20) for cls in (Transformer,
                                                          _Tweaked))
  settled = machine.settle(DecodeHParams.parse(SETTINGS))
  assert trace_cache.search_key(ours, settled, vocab, vocab, None)
  assert trace_cache.search_key(tweaked, settled, vocab, vocab, None) is None


def test_an_entry_written_in_part_leaves_no_temporary(tmp_path):
  from t2tlite import files
  files.atomic_write_bytes(str(tmp_path / "entry"), b"whole")
  assert (tmp_path / "entry").read_bytes() == b"whole"
  (tmp_path / "taken").mkdir()  # the rename onto a folder fails
  with pytest.raises(OSError):
    files.atomic_write_bytes(str(tmp_path / "taken"), b"new")
  assert sorted(os.listdir(tmp_path)) == ["entry", "taken"]
