"""What t2t-serve serves (t2tlite.serve.model_source): which run an export
comes from, what an export answers without that run, and how a request's
errors are named. Most exports here are metadata only (no model is
loaded); the tests marked needs_multi30k use the shared run and export."""
import dataclasses
import os

import pytest
import tensorflow as tf

from t2tlite.export import serving_module
from t2tlite.serve import model_source
from t2tlite.serve.model_source import ModelSource, PrefixError, RequestError

from fake_export import EXPORT_DECODE, fake_export
from run_folder import multi30k_lines, needs_multi30k
from shared_export import shared_export
from shared_run import shared_run_folder

LANGUAGES = {"de": "<2de>", "fr": "<2fr>"}


def fake_run(folder):
  """A folder a run folder's files name (empty: never read here)."""
  os.makedirs(folder)
  for name in ("hparams.json", "run.json", "vocab.model"):
    open(os.path.join(folder, name), "w").close()
  return str(folder)


def test_neither_an_export_nor_a_run_folder_is_named(tmp_path):
  afile = tmp_path / "notes.txt"
  afile.write_text("not a model")
  plain = tmp_path / "plain"
  plain.mkdir()
  for path in (afile, plain):
    with pytest.raises(FileNotFoundError) as error:
      ModelSource.open(str(path))
    assert str(error.value) == (
        f"model={path}: expected an export (a folder with saved_model.pb, "
        "or one of numbered versions) or a run folder (hparams.json, "
        "run.json, vocab.model)")
  # An ensemble's first member names its run.
  with pytest.raises(FileNotFoundError) as error:
    ModelSource.open(f"{plain},{plain}")
  assert str(error.value) == (
      f"model={plain}: expected a run folder, or a checkpoint in one (the "
      "ensemble's first member names its run)")
  with pytest.raises(ValueError, match="^ModelSource needs an export or a "
                     "run folder$"):
    ModelSource()


def test_an_export_finds_the_run_of_its_checkpoint(tmp_path):
  run = fake_run(tmp_path / "run")
  for checkpoint in ("ckpt-5", "averaged/ckpt-5", "best/ckpt-3"):
    export = tmp_path / checkpoint.replace("/", "_")
    fake_export(export / "1", os.path.join(run, checkpoint))
    source = ModelSource.open(str(export))
    assert (source.saved_model_dir, source.run_folder) == (
        str(export / "1"), run)
  # A checkpoint in no run folder: the export alone.
  fake_export(tmp_path / "alone" / "1", str(tmp_path / "gone" / "ckpt-5"))
  assert ModelSource.open(str(tmp_path / "alone")).run_folder is None


def test_an_export_folder_serves_its_highest_complete_version(tmp_path):
  """The highest version with a saved_model.pb, by number as TF Serving
  reads it ("010" is 10, kept as named); "²" (a digit to str.isdigit) is
  no version, and "11" without saved_model.pb is not one yet."""
  run = fake_run(tmp_path / "run")
  export = tmp_path / "export"
  for name in ("2", "010", "\u00b2"):
    fake_export(export / name, os.path.join(run, "ckpt-1"))
  (export / "11").mkdir()
  source = ModelSource.open(str(export))
  assert source.saved_model_dir == str(export / "010")


def test_an_export_without_its_run_answers_only_its_own_settings(tmp_path):
  checkpoint = str(tmp_path / "gone" / "ckpt-7")
  source = ModelSource.open(fake_export(tmp_path / "1", checkpoint))
  # A request's overrides go on top of the export's settings.
  hp = source.decode_hparams("extra_length=3")
  assert (hp.beam_size, hp.alpha, hp.extra_length) == (2, 0.6, 3)
  with pytest.raises(RequestError) as error:
    source.translate(["A dog."], hp)
  assert str(error.value) == (
      f"these decode hparams need the run folder the export came from (its "
      f"metadata names checkpoint {checkpoint}, not found); serve a run "
      "folder, or send no decode_hparams")
  with pytest.raises(RequestError, match="^attention maps need the run"):
    source.attention("A dog.")
  with pytest.raises(RequestError, match="decode hparam 'beam'"):
    source.decode_hparams("beam=3")
  info = source.info()
  assert (info["run_folder"], info["layers"], info["n_best"]) == (
      None, None, False)
  assert info["decode_hparams"]["beam_size"] == 2


def test_xla_for_small_batches_needs_a_run_and_a_search_it_compiles(
    tmp_path):
  run = fake_run(tmp_path / "run")
  gone = str(tmp_path / "gone" / "ckpt-7")
  source = ModelSource.open(fake_export(tmp_path / "alone" / "1", gone))
  source.search_small_batches_with_xla(0)  # off: nothing needed
  with pytest.raises(ValueError) as error:
    source.search_small_batches_with_xla(1)
  assert str(error.value) == (
      "XLA's search needs the run folder the export came from (its "
      f"metadata names checkpoint {gone}, not found)")
  for decode, reason in (
      ("int8=true", "^decode hparam xla_lines needs int8=false"),
      ("sampling_temperature=0.8",
       "^the model's decode hparams sample; XLA's route searches greedy")):
    source = ModelSource.open(fake_export(tmp_path / decode / "1",
                                          os.path.join(run, "ckpt-1"),
                                          decode=decode))
    with pytest.raises(ValueError, match=reason):
      source.search_small_batches_with_xla(2)


def test_the_n_best_of_an_export_returning_beams_needs_no_run(tmp_path):
  gone = str(tmp_path / "gone" / "ckpt-1")
  beams = ModelSource.open(fake_export(
      tmp_path / "beams" / "1", gone, EXPORT_DECODE + ",return_beams=true"))
  one = ModelSource.open(fake_export(tmp_path / "one" / "1", gone))
  assert beams.info()["n_best"] and not one.info()["n_best"]
  # Checking prefixes is left to the export's own graph where it answers.
  beams.check_prefixes(["A dog."], beams.base_hparams, True, ["Ein"])
  with pytest.raises(RequestError, match="^the n-best need the run folder"):
    one.check_prefixes(["A dog."], one.base_hparams, True, ["Ein"])


def test_a_mixtures_export_tags_each_line_with_its_language(tmp_path):
  source = ModelSource.open(fake_export(
      tmp_path / "1", str(tmp_path / "ckpt-1"), target_languages=LANGUAGES))
  assert source.info()["target_languages"] == ["de", "fr"]
  assert source.tag_lines(["A dog.", "<2fr> Un chien."], ["de", None]) == [
      "<2de> A dog.", "<2fr> Un chien."]
  with pytest.raises(RequestError, match="de, fr"):
    source.tag_lines(["A dog."], ["xx"])
  with pytest.raises(RequestError, match="de, fr"):
    source.tag_lines(["A dog."])


def test_an_exports_graph_tags_lines_as_the_model_source(tmp_path):
  """translate_to_language tags in the graph what t2t-serve tags in
  Python before calling serving_default: the same text either way."""
  source = ModelSource.open(fake_export(
      tmp_path / "1", str(tmp_path / "ckpt-1"), target_languages=LANGUAGES))
  lines = ["A dog.", "<2fr> Un chien.", "<2fr> Un chat.", "  ",
           "A <2de> in it.", "<2de>"]
  targets = ["de", None, "de", None, "fr", None]
  graph = serving_module.tag_inputs(
      tf.constant(lines), tf.constant([t or "" for t in targets]),
      LANGUAGES)
  assert [t.decode() for t in graph.numpy()] == source.tag_lines(lines,
                                                                 targets)


@needs_multi30k
def test_a_refused_prefix_is_named_by_its_line_number(tmp_path_factory):
  """The reason of an export's prefix check, read from the error of its
  in-graph assertion, named with the request's line as the run folder's
  check names it."""
  from t2tlite.data.vocab import Vocabulary
  folder = shared_run_folder(tmp_path_factory)
  vocab = Vocabulary.from_file(os.path.join(folder, "vocab.model"))
  ids = tf.function(lambda prefixes: serving_module.prefix_ids(vocab,
                                                               prefixes))
  assert ids(tf.constant(["", "Ein"])).shape[0] == 2
  with pytest.raises(tf.errors.InvalidArgumentError) as raised:
    ids(tf.constant(["Ein", "\u65e5\u672c"]))
  error = PrefixError(model_source._assertion(raised.value.message))
  assert str(error.named(1, "\u65e5\u672c")) == (
      "target_prefixes: target prefix 2 ('\u65e5\u672c'): the target "
      "vocabulary cannot encode (it holds a piece the vocabulary does not "
      "know)")


@needs_multi30k
def test_the_decoders_kept_for_requests_are_the_most_recently_used(
    tmp_path_factory):
  source = ModelSource.open(shared_run_folder(tmp_path_factory))
  n = model_source._DECODER_CACHE  # pylint: disable=protected-access
  hps = [source.decode_hparams(f"beam_size={b}") for b in range(1, n + 2)]
  made = [source._decoder(hp)[0] for hp in hps[:n]]
  assert source._decoder(hps[0])[0] is made[0]  # kept, now the newest
  source._decoder(hps[n])  # one more: the least recently used leaves
  assert list(source._decoders) == hps[2:n] + [hps[0], hps[n]]
  assert source._decoder(hps[2])[0] is made[2]


@needs_multi30k
def test_small_batches_searched_with_xla_answer_as_the_export(
    tmp_path_factory):
  """t2t-serve --xla_lines=1: a line alone with the export's own decode
  hparams comes from the run folder's XLA search, with the export's answer;
  larger batches, prefixes and the n-best do not."""
  # pylint: disable=protected-access
  # Short: one compiled shape (a line of at most 16 tokens).
  lines = [line[:40] for line in multi30k_lines("en", 3)]
  source = ModelSource.open(shared_export(tmp_path_factory))
  expected = source.translate(lines)[0]
  source.search_small_batches_with_xla(1)
  assert [source.translate([line])[0][0] for line in lines] == expected
  assert source.translate(lines[1:])[0] == expected[1:]
  xla = dataclasses.replace(source.base_hparams, xla_lines=1)
  assert list(source._decoders) == [xla]
  decoder = source._decoders[xla][0]
  # Searched by XLA: its compiled search traced, the graph's never.
  assert decoder._xla_search[1].experimental_get_tracing_count() == 1
  assert decoder._text_search is None
  # A prefix or the n-best: not this route (the export answers the one,
  # the run folder's graph Decoder the other).
  source.translate(lines[:1], prefixes=["Ein"])
  assert decoder._decode_with_prefix.experimental_get_tracing_count() == 0
  source.translate(lines[:1], n_best=True)
  assert list(source._decoders)[0] == xla and len(source._decoders) == 2
