"""Decode hparam xla_lines: a Decoder searches its small greedy and beam
batches with XLA over inputs padded to a few shapes, and gives the graph's
outputs and scores; larger batches, sampling and target prefixes keep the
graph. The commands keep XLA's compiled programs in a folder of this
TensorFlow and this kind of CPU (t2tlite.xla_cache)."""
import os

import numpy as np
import pytest

from t2tlite import xla_cache
from t2tlite.decode import machine
from t2tlite.decode.decoding import Decoder, padded_for_xla, xla_shape
from t2tlite.decode.settings import DecodeHParams
from t2tlite.export import exporter

from run_folder import multi30k_lines, needs_multi30k
from shared_run import shared_trained_run


def test_shapes_are_powers_of_two_rows_and_multiples_of_16_tokens():
  assert xla_shape(1, 3) == (1, 16)
  assert xla_shape(2, 16) == (2, 16)
  assert xla_shape(3, 17) == (4, 32)
  assert xla_shape(5, 40) == (8, 48)
  ids = np.array([[5, 6, 1], [7, 1, 0], [8, 9, 1]], np.int32)
  padded = padded_for_xla(ids)
  assert padded.shape == (4, 16)
  np.testing.assert_array_equal(padded[:3, :3], ids)
  np.testing.assert_array_equal(padded[3, :3], ids[0])  # ends as row 0
  assert not padded[:, 3:].any()


def test_the_cache_folder_is_added_to_the_users_other_xla_flags(
    monkeypatch, tmp_path):
  monkeypatch.setenv(xla_cache.ENV, "--tf_xla_auto_jit=0")
  monkeypatch.setenv("T2TLITE_CACHE_DIR", str(tmp_path))
  folder = xla_cache.install()
  assert folder.startswith(str(tmp_path / "xla" / "tf-"))
  assert os.environ[xla_cache.ENV] == (
      f"--tf_xla_auto_jit=0 {xla_cache.FLAG}={folder}")


def test_an_arm_cpus_features_tell_its_kinds_apart(monkeypatch):
  """/proc/cpuinfo of an ARM CPU lists its instruction sets as Features
  (and often no model name)."""
  def kind(features):
    monkeypatch.setattr(xla_cache.hardware, "cpuinfo",
                        lambda: {"CPU implementer": "0x41",
                                 "Features": features})
    return xla_cache.cpu_kind()

  assert kind("fp asimd sve sve2") != kind("fp asimd") == kind("fp asimd")


def test_refused_with_int8_and_below_zero():
  with pytest.raises(ValueError, match="xla_lines needs int8=false"):
    DecodeHParams.parse("xla_lines=4,int8=true")
  with pytest.raises(ValueError, match="xla_lines must be >= 0, got -1"):
    DecodeHParams.parse("xla_lines=-1")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """(model, vocab) of the session's shared tiny run: untrained weights,
  so most outputs run to their length limit, which padding must not
  move."""
  _, model, vocab = shared_trained_run(tmp_path_factory)
  return model, vocab


def _decoders(trained, hparams):
  """(a Decoder of the graph, one with xla_lines=4) of `hparams`, one
  search: the XLA route searches its batches in one
  (Decoder._compiled_search), and so does the graph it is compared with;
  concurrent ones give one's outputs (test_concurrent_searches.py)."""
  model, vocab = trained
  return [Decoder(model, vocab, machine.settle(DecodeHParams.parse(
      hparams + ",concurrent_searches=1" + extra)))
          for extra in ("", ",xla_lines=4")]


@pytest.fixture(scope="module")
def beam_decoders(trained):
  return _decoders(trained,
                   "beam_size=4,alpha=0.6,extra_length=6,return_beams=true")


def _traces(decoder):
  """How often the Decoder's XLA search was traced (XLA then compiles it
  once for each shape of ids it is called with)."""
  return decoder._xla_search[1].experimental_get_tracing_count()


@needs_multi30k
def test_small_batches_decode_as_the_graph(beam_decoders):
  """Every beam of every line, with its score (greedy search is the same
  search with one beam: test_beam_search.py compares the two compiled)."""
  graph, xla = beam_decoders
  lines = multi30k_lines("en", 8)
  # 1 line, then 3 lines of other lengths (rows 4): two shapes.
  for batch in ([lines[0]], lines[1:4]):
    want = graph.decode_batch(batch)
    got = xla.decode_batch(batch)
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-5)
  # One trace for both shapes: a new shape costs XLA's compile alone.
  assert _traces(xla) == 1
  assert xla.decode_batch([lines[4]])[0] == graph.decode_batch(
      [lines[4]])[0]
  # More lines than xla_lines keep the graph (traced for them only).
  assert xla._decode.experimental_get_tracing_count() == 0
  assert xla.decode_batch(lines[:5])[0] == graph.decode_batch(lines[:5])[0]
  assert xla._decode.experimental_get_tracing_count() == 1


@needs_multi30k
def test_prefixes_and_sampling_keep_the_graph(trained, beam_decoders):
  graph, xla = beam_decoders
  line, prefix = multi30k_lines("en", 1), ["Ein"]
  before = _traces(xla)
  got = xla.decode_batch(line, prefix)
  assert got == graph.decode_batch(line, prefix)
  assert all(beam.startswith("Ein") for beam in got[0][0])
  model, vocab = trained
  sampler = Decoder(model, vocab, machine.settle(DecodeHParams.parse(
      "sampling_temperature=1.0,sampling_seed=3,extra_length=6,"
      "concurrent_searches=1,xla_lines=4")))
  assert sampler.decode_batch(line)[0][0]
  assert _traces(sampler) == 0 and _traces(xla) == before


@needs_multi30k
def test_an_export_refuses_it(tmp_path_factory):
  folder, _, _ = shared_trained_run(tmp_path_factory)
  with pytest.raises(ValueError, match="xla_lines=2 is a Decoder's"):
    exporter.export_saved_model(folder, decode_hparams="xla_lines=2")
