"""t2t-exporter: SavedModels with the tokenizer and beam search in the graph."""
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from t2tlite import hardware, precision, run_dir
from t2tlite.data.vocab import Vocabulary
from t2tlite.decode.decoding import Decoder
from t2tlite.decode.machine import settle
from t2tlite.decode.settings import DecodeHParams
from t2tlite.export import exporter, serving_module

import command_flags
import host
from outputs_differ import assert_outputs_differ
from run_folder import TINY, multi30k_lines
from search_graphs import (assert_search_rewrite,
                           saved_model_block_call_rewrites, signature_loops)
from shared_export import DECODE, exported_run_folder, shared_export

SUPPORT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))), "support")
# The ops a SavedModel may hold besides TensorFlow core ops.
TF_TEXT_OPS = {"SentencepieceOp", "SentencepieceTokenizeOp",
               "SentencepieceDetokenizeOp"}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  """(run folder, model, vocab, version folder of its first export): the
  session's shared run exported with DECODE (tests/support/shared_export.py;
  read only: tests that write into a run folder take `writable`)."""
  folder = exported_run_folder(tmp_path_factory)
  model, info, _ = run_dir.load_trained_model(folder)
  return (folder, model, Vocabulary.from_file(info.vocab_file),
          os.path.join(folder, "export", "1"))


@pytest.fixture(scope="module")
def writable(exported, tmp_path_factory):
  """A copy of `exported`'s run folder and export, to write into."""
  folder = str(tmp_path_factory.mktemp("writable") / "run")
  shutil.copytree(exported[0], folder)
  return folder


@pytest.fixture(scope="module")
def decoder(exported):
  """The in-process Decoder of `exported`'s model with DECODE."""
  _, model, vocab, _ = exported
  return Decoder(model, vocab, settle(DecodeHParams.parse(DECODE)))


def run_together(*commands, timeout=200):
  """Runs commands concurrently (they mostly wait on TensorFlow's import);
  returns their CompletedProcess in order, killing any left on failure."""
  procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True) for c in commands]
  try:
    return [_completed(p, timeout) for p in procs]
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
        p.wait()


def _completed(proc, timeout):
  stdout, stderr = proc.communicate(timeout=timeout)
  return subprocess.CompletedProcess(proc.args, proc.returncode, stdout,
                                     stderr)


def sample_lines():
  lines = multi30k_lines("en", 6)
  return [lines[0], "", lines[1][:25], "   ", lines[2], lines[3][:7]]


def test_truncate_and_end_keeps_room_for_eos():
  tokens = tf.ragged.constant([[5, 6, 7, 8], [9], []], tf.int32)
  ids = serving_module.truncate_and_end(tokens, 3).numpy().tolist()
  assert ids == [[5, 6, 1], [9, 1, 0], [1, 0, 0]]


def test_clean_ids_stops_at_eos_and_maps_unknown_ids_to_unk():
  # 50 is the first id past a vocabulary of 50, 49 its last.
  ids = tf.constant([[5, 99, -1, 1, 7], [0, 0, 0, 0, 0], [4, 50, 49, 1, 0]])
  tokens = serving_module.clean_ids(ids, vocab_size=50).to_list()
  assert tokens == [[5, 2, 2], [], [4, 2, 49]]


def test_layout_metadata_and_ops(exported):
  folder, _, vocab, path = exported
  assert path == os.path.join(folder, "export", "1")
  # The first version is 1 (tests that add the next write into copies).
  assert exporter.versions(os.path.dirname(path))[0] == 1
  assert not [n for n in os.listdir(os.path.dirname(path))
              if n.startswith("temp-")]
  with open(os.path.join(path, exporter.METADATA_FILE)) as f:
    metadata = json.load(f)
  assert metadata["decode_hparams"]["beam_size"] == 2
  # "auto" resolved on this machine: the searches the graph holds.
  assert (metadata["decode_hparams"]["concurrent_searches"] ==
          host.auto_searches())
  assert metadata["max_input_length"] == TINY.max_length
  assert metadata["checkpoint"].endswith("ckpt-1")
  # TF Serving's --batching_parameters_file, a BatchingParameters text
  # proto of wrapped numbers: batches of t2t-decoder's batch size.
  with open(os.path.join(path, "assets.extra",
                         "batching_parameters.txt")) as f:
    batching = dict(re.fullmatch(r"(\w+) \{ value: (\d+) \}", line).groups()
                    for line in f.read().splitlines())
  assert batching == {"max_batch_size": "32", "batch_timeout_micros": "5000",
                      "max_enqueued_batches": "4", "num_batch_threads": "1"}
  # The default export computes in float32, whatever this machine prefers.
  assert metadata["precision"] == "float32"
  assert exporter.matmul_dtypes(path) == {"float32"}
  ops = exporter.check_serving_ops(path)
  assert not {"PyFunc", "EagerPyFunc", "PyFuncStateless"} & ops
  assert not [op for op in ops if op.startswith("Xla")]
  assert ops - set(dir(tf.raw_ops)) == TF_TEXT_OPS
  # The text and ids signatures call one saved search; the prefixed one
  # has its own.
  loops = signature_loops(path, ("serving_default", "translate_ids",
                                 "translate_with_prefix"))
  assert loops["serving_default"] == loops["translate_ids"]
  assert loops["serving_default"]
  assert not loops["serving_default"] & loops["translate_with_prefix"]
  # The search's weights are saved made (the output projection's decoding
  # layout among them), not made again at each request.
  saved = [name for name, _ in tf.train.list_variables(
      os.path.join(path, "variables", "variables"))]
  assert [name for name in saved if name.startswith("search_weights/")
          and "output_kernel" in name]
  # Its concurrent searches are optimized as a Decoder's (graph_options).
  rewrites = saved_model_block_call_rewrites(path)
  if host.auto_searches() > 1:
    assert rewrites  # two calls for each search a signature holds
  for rewrite in rewrites:
    assert_search_rewrite(rewrite)


def test_check_serving_ops_rejects_py_function(tmp_path):
  module = tf.Module()
  module.f = tf.function(
      lambda x: tf.py_function(lambda y: y + 1, [x], tf.int32),
      input_signature=[tf.TensorSpec([], tf.int32)])
  tf.saved_model.save(module, str(tmp_path))
  with pytest.raises(ValueError, match="EagerPyFunc"):
    exporter.check_serving_ops(str(tmp_path))
  # An XLA-only op, though tf.raw_ops has it.
  xla = tf.Module()
  xla.f = tf.function(
      lambda x: tf.raw_ops.XlaConcatND(inputs=[x], num_concats=[1]),
      input_signature=[tf.TensorSpec([2], tf.float32)])
  tf.saved_model.save(xla, str(tmp_path / "xla"))
  with pytest.raises(ValueError, match="XlaConcatND"):
    exporter.check_serving_ops(str(tmp_path / "xla"))


PREFIXES = ["Ein Hund", "", "Zwei", "", "", "Ein Mann mit"]
INT8 = DECODE + ",int8=true"


def write_request(vocab, path, prefixes=None):
  """Writes fresh_export_client.py's request for sample_lines() (as text
  and as ids; with `prefixes`, one per line, also those) to `path`."""
  lines = sample_lines()
  encoded = [vocab.encode_text(line) for line in lines]
  width = max(len(ids) for ids in encoded)
  asked = {"lines": lines,
           "ids": [row + [0] * (width - len(row)) for row in encoded]}
  if prefixes is not None:
    asked["prefixes"] = prefixes
  path.write_text(json.dumps(asked))
  return str(path)


@pytest.fixture(scope="module")
def fresh(exported, decoder, tmp_path_factory):
  """One fresh process (tests/support/fresh_export_clients.py) that loads
  `exported`'s export (with PREFIXES), the shared run's bfloat16 export
  and its int8 one (INT8), runs fresh_export_client.py's requests on each,
  then `saved_model_cli show` and `run` on the first; the in-process
  Decoders' results of the same models and decode hparams, computed while
  it runs. {"float32" | "bfloat16" | "int8": (version folder, the client's
  result, (the Decoder's outputs, scores)), "prefixed": the Decoder's
  outputs with PREFIXES, "saved_model_cli": [show, run] as {"exit",
  "stdout"}, "cli_expected": the Decoder's outputs of the lines run}."""
  folder, model, vocab, path = exported
  tmp = tmp_path_factory.mktemp("fresh")
  paths = {"float32": path,
           "bfloat16": shared_export(tmp_path_factory, precision="bfloat16"),
           "int8": shared_export(tmp_path_factory, INT8)}
  plain = write_request(vocab, tmp / "request.json")
  clients = [[paths[name], write_request(vocab, tmp / "prefixed.json",
                                         PREFIXES) if name == "float32"
              else plain, str(tmp / f"{name}.json")] for name in paths]
  lines = sample_lines()
  cli_lines = lines[:3]
  jobs = tmp / "jobs.json"
  jobs.write_text(json.dumps({"clients": clients, "saved_model_cli": [
      ["show", "--all", "--dir", path],
      ["run", "--dir", path, "--tag_set", "serve", "--signature_def",
       "serving_default", "--input_exprs", f"inputs={cli_lines!r}"]]}))
  client = subprocess.Popen(
      [sys.executable, os.path.join(SUPPORT, "fresh_export_clients.py"),
       str(jobs), str(tmp / "result.json")], stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True)
  try:
    bfloat16, _, _ = run_dir.load_trained_model(folder,
                                                dtype="mixed_bfloat16")
    expected = {
        "float32": decoder.decode_lines(lines, progress=False),
        "bfloat16": Decoder(bfloat16, vocab, settle(DecodeHParams.parse(
            DECODE))).decode_lines(lines, progress=False),
        "int8": Decoder(model, vocab, settle(DecodeHParams.parse(
            INT8))).decode_lines(lines, progress=False)}
    prefixed, _ = decoder.decode_lines(lines, progress=False,
                                       prefixes=PREFIXES)
    cli_expected, _ = decoder.decode_lines(cli_lines, progress=False)
    run = _completed(client, timeout=800)
  finally:
    if client.poll() is None:
      client.kill()
      client.wait()
  assert run.returncode == 0, run.stderr[-3000:]
  fresh = {name: (paths[name], read_json(result), expected[name])
           for name, (_, _, result) in zip(paths, clients)}
  for _, result, _ in fresh.values():
    assert result["t2tlite_imported"] is False
  return dict(fresh, prefixed=prefixed, cli_expected=cli_expected,
              saved_model_cli=read_json(tmp / "result.json")[
                  "saved_model_cli"])


def read_json(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def assert_batch_answers_as_each_line_alone(result, expected):
  """What server-side batching relies on: the batch of N lines answers as
  N calls of one line; the texts exactly, the scores to float32 rounding
  (matmuls of another batch size round differently)."""
  alone = result["alone"]
  assert [a["outputs"] for a in alone] == [[o] for o in expected]
  assert [a["scores"][0] for a in alone] == pytest.approx(
      result["text"]["scores"], rel=1e-5, abs=1e-6)


def assert_bad_text_answered(result):
  """An input over max_length is cut (two that differ only past it give
  the same output); invalid UTF-8 is decoded, not refused."""
  long_outputs = result["long"]["outputs"]
  assert long_outputs[0] == long_outputs[1]
  assert len(result["invalid_utf8"]["outputs"]) == 4


def assert_ids_answered_as_text(result, vocab, expected, expected_scores,
                                abs_tolerance):
  """The id signature gives the text signature's sentences, as ids."""
  assert [vocab.decode_ids(row) for row in result["ids"]["outputs"]] == expected
  assert result["ids"]["scores"] == pytest.approx(expected_scores,
                                                  abs=abs_tolerance)


@pytest.mark.timeout(900)  # the first builds `fresh`
def test_fresh_process_matches_decoder_and_survives_bad_inputs(exported,
                                                               fresh):
  _, _, vocab, _ = exported
  _, result, (expected, expected_scores) = fresh["float32"]
  prefixed = fresh["prefixed"]
  # Target prefixes (translate_with_prefix): each non-blank line's output
  # starts with its prefix, as the Decoder's; blank lines stay empty.
  assert result["prefixed"]["outputs"] == prefixed
  for line, prefix, output in zip(sample_lines(), PREFIXES, prefixed):
    assert output.startswith(prefix) if line.strip() else output == ""
  assert "target prefix longer than its output may hold" in (
      result["too_long_prefix"])

  assert_outputs_differ(expected)
  assert_outputs_differ(prefixed, "prefixed outputs")
  assert result["text"]["outputs"] == expected
  assert result["text"]["scores"] == pytest.approx(expected_scores, abs=1e-3)
  assert_batch_answers_as_each_line_alone(result, expected)
  assert_ids_answered_as_text(result, vocab, expected, expected_scores, 1e-3)

  assert result["empty_batch"] == {"outputs": [], "scores": []}
  assert result["empty_string"] == {"outputs": [""], "scores": [0.0]}
  assert_bad_text_answered(result)
  bad = result["bad_ids"]
  assert len(bad["outputs"]) == 3 and bad["scores"][1:] == [0.0, 0.0]
  assert not any(bad["outputs"][1]) and not any(bad["outputs"][2])
  out_len = np.array(result["long_ids"]["outputs"]).shape[1]
  assert out_len == TINY.max_length + DecodeHParams.parse(DECODE).extra_length
  assert result["empty_ids_batch"]["scores"] == []


@pytest.mark.timeout(900)  # the first builds `fresh`
def test_bfloat16_variant_exports_and_runs(exported, fresh):
  path, result, (expected, expected_scores) = fresh["bfloat16"]
  with open(os.path.join(path, exporter.METADATA_FILE)) as f:
    assert json.load(f)["precision"] == "bfloat16"
  assert "bfloat16" in exporter.matmul_dtypes(path)
  exporter.check_serving_ops(path)
  # The same bfloat16 computation as the in-process decoder of that policy.
  assert_outputs_differ(expected)
  assert result["text"]["outputs"] == expected
  assert result["text"]["scores"] == pytest.approx(expected_scores, abs=1e-2)
  assert_ids_answered_as_text(result, exported[2], expected, expected_scores,
                              1e-2)
  assert result["empty_string"] == {"outputs": [""], "scores": [0.0]}
  assert result["empty_batch"] == {"outputs": [], "scores": []}
  assert_bad_text_answered(result)


@pytest.mark.timeout(900)  # the first builds `fresh`
def test_int8_variant_exports_and_runs(exported, fresh):
  path, result, (expected, expected_scores) = fresh["int8"]
  with open(os.path.join(path, exporter.METADATA_FILE)) as f:
    assert json.load(f)["decode_hparams"]["int8"] is True
  ops = exporter.check_serving_ops(path)
  assert "QuantizedMatMulWithBiasAndDequantize" in ops
  # Kernels are quantized (rounded) at export, activations (truncated) at
  # each product: no request quantizes the kernels again.
  assert "Round" not in ops
  # The same int8 search as the in-process decoder with int8=true.
  assert_outputs_differ(expected)
  assert result["text"]["outputs"] == expected
  assert result["text"]["scores"] == pytest.approx(expected_scores, abs=1e-3)
  assert_ids_answered_as_text(result, exported[2], expected, expected_scores,
                              1e-3)
  assert_batch_answers_as_each_line_alone(result, expected)
  assert result["empty_string"] == {"outputs": [""], "scores": [0.0]}
  assert result["empty_batch"] == {"outputs": [], "scores": []}
  assert_bad_text_answered(result)


def test_an_export_lays_out_its_decoder_kernels_wherever_it_is_made(
    monkeypatch):
  """Served on other machines, an export keeps the float32 decoder kernels'
  layout that oneDNN's AVX2 GEMM runs fast, also where a Decoder would
  multiply by them as stored (oneDNN may use AVX-512)."""
  monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "")
  hp = DecodeHParams.parse(DECODE)
  assert exporter.settled_for_export(hp).laid_out_kernels
  assert exporter.settled_for_export(hp).int8_per_call == hp.int8
  assert settle(hp).laid_out_kernels == (
      not hardware.onednn_may_use_avx512())


def test_export_precision_is_checked_before_loading(tmp_path):
  with pytest.raises(ValueError, match="'float16'.*float32 or bfloat16"):
    exporter.export_saved_model(str(tmp_path / "nothing"), precision="float16")


@pytest.mark.timeout(900)  # the first builds `fresh`
def test_saved_model_cli_lists_and_runs_signatures(fresh):
  show, run = fresh["saved_model_cli"]
  assert show["exit"] == 0, show
  for name in ("serving_default", "translate_ids"):
    assert f"signature_def['{name}']" in show["stdout"]
  assert "dtype: DT_STRING" in show["stdout"]

  assert run["exit"] == 0, run
  expected = fresh["cli_expected"]
  assert_outputs_differ(expected)
  printed = run["stdout"].split("Result for output key outputs:")[1]
  printed = printed.split("Result for output key scores:")[0]
  assert printed.strip() == str(np.array([e.encode() for e in expected],
                                          dtype=object))


class _UntracedModule:
  """Stands in for the ServingModule: the failing save below writes no
  graph, so none is traced (a ServingModule traces its signatures)."""

  def __init__(self, model, vocab, settled, **kwargs):
    self.hp = settled.hp

  def signatures(self):
    return {}


def test_failed_export_leaves_no_version_folder(writable, monkeypatch):
  folder = writable
  export_dir = os.path.join(folder, "export")
  before = sorted(os.listdir(export_dir))

  def save_partly(module, path, **kwargs):
    assert isinstance(module, _UntracedModule)
    os.makedirs(os.path.join(path, "variables"))
    with open(os.path.join(path, "saved_model.pb"), "wb") as f:
      f.write(b"partial")
    raise OSError("disk full")

  monkeypatch.setattr(exporter, "ServingModule", _UntracedModule)
  monkeypatch.setattr(tf.saved_model, "save", save_partly)
  with pytest.raises(OSError, match="disk full"):
    exporter.export_saved_model(folder, decode_hparams=DECODE)
  assert sorted(os.listdir(export_dir)) == before


def exporter_command(*args):
  return [sys.executable, "-m", "t2tlite.bin.t2t_exporter", *args]


@pytest.mark.timeout(240)
def test_t2t_exporter_command_adds_the_next_version(writable):
  folder = writable
  export_dir = os.path.join(folder, "export")
  before = exporter.versions(export_dir)
  run, bad = run_together(
      exporter_command(f"--output_dir={folder}",
                       f"--checkpoint_path={folder}/ckpt-1",
                       "--decode_hparams=beam_size=1"),
      exporter_command(f"--output_dir={folder}", "--decode_hparams=beam=3"))
  assert run.returncode == 0, run.stderr[-3000:]
  new = before[-1] + 1
  assert run.stdout.strip() == os.path.join(export_dir, str(new))
  # The log says what was exported: the checkpoint, precision, settings
  # (the searches as settled in the graph: 1 or 2 by the machine's cores).
  assert re.search(
      rf"Exported {re.escape(folder)}/ckpt-1 in float32 \(greedy search"
      rf"(; concurrent_searches=\d)?\) as "
      rf"{re.escape(os.path.join(export_dir, str(new)))}$", run.stderr,
      re.M), run.stderr
  assert exporter.versions(export_dir) == before + [new]
  with open(os.path.join(export_dir, str(new), exporter.METADATA_FILE)) as f:
    assert json.load(f)["decode_hparams"]["beam_size"] == 1

  assert bad.returncode == 1
  assert "t2t-exporter: error:" in bad.stderr and "beam" in bad.stderr
  assert "Traceback" not in bad.stderr


def test_export_best_exports_the_best_checkpoint_apart(writable):
  """t2t-trainer --export_best's call at each new best: OUTPUT_DIR/best's
  checkpoint exported under OUTPUT_DIR/export_best (versions numbered as
  every export's)."""
  folder = writable
  exports_before = exporter.versions(os.path.join(folder, "export"))
  best = os.path.join(folder, "best")
  os.makedirs(best, exist_ok=True)
  for name in os.listdir(folder):
    if name.startswith("ckpt-1."):
      shutil.copy(os.path.join(folder, name), best)
  with command_flags.command_module("t2tlite.bin.t2t_trainer") as command:
    command._export_best(os.path.join(best, "ckpt-1"))
  export_dir = os.path.join(folder, "export_best")
  assert exporter.versions(export_dir) == [1]
  with open(os.path.join(export_dir, "1", exporter.METADATA_FILE)) as f:
    assert json.load(f)["checkpoint"] == os.path.join(best, "ckpt-1")
  # The run's own export folder is left as it was.
  assert exporter.versions(os.path.join(folder, "export")) == exports_before


@pytest.mark.timeout(240)
def test_trainer_exports_when_training_ends(tmp_path):
  output_dir = tmp_path / "train"
  trainer = subprocess.run(
      [sys.executable, "-m", "t2tlite.bin.t2t_trainer",
       "--problem=algorithmic_reverse", "--hparams_set=transformer_tiny",
       "--hparams=num_layers=1,d_model=32,d_ff=64,num_heads=2,d_k=16,d_v=16,"
       "batch_size=128,max_length=16", f"--data_dir={tmp_path}/data",
       f"--output_dir={output_dir}", "--generate_data", "--train_steps=2",
       "--schedule=train", "--export_saved_model"],
      capture_output=True, text=True, timeout=220)
  assert trainer.returncode == 0, trainer.stderr[-3000:]
  path = output_dir / "export" / "1"
  assert f"exported {path}" in trainer.stdout
  with open(path / exporter.METADATA_FILE) as f:
    metadata = json.load(f)
  assert metadata["checkpoint"].endswith("ckpt-2")
  exporter.check_serving_ops(str(path))
  # Training chose this machine's precision (auto), said so first and
  # recorded it; the export computes in float32 all the same.
  auto = precision.choose("auto")
  said = [l for l in trainer.stderr.splitlines()
          if "Training computes in" in l]
  assert len(said) == 1, trainer.stderr[-3000:]
  # (The reason may hold a measured figure, which differs by process.)
  assert (f"Training computes in {auto.precision} (mixed_precision=auto): "
          f"{hardware.describe_device().summary()}") in said[0]
  python_log = [l for l in trainer.stderr.splitlines()
                if re.match(r"\d\d:\d\d:\d\d (?:[A-Z]+ )?\w+: ", l)]
  assert "Training computes in" in python_log[0]
  with open(output_dir / "run.json") as f:
    recorded = json.load(f)["flags"]
  assert recorded["mixed_precision"] == "auto"
  assert {k: recorded["precision"][k] for k in ("precision", "requested")} == {
      "precision": auto.precision, "requested": "auto"}
  assert recorded["precision"]["reason"].startswith(
      hardware.describe_device().summary())
  assert metadata["precision"] == "float32"
  assert exporter.matmul_dtypes(str(path)) == {"float32"}


def test_publish_takes_the_next_number_when_one_is_taken_meanwhile(
    tmp_path, monkeypatch):
  export_dir = tmp_path / "export"
  (export_dir / "1").mkdir(parents=True)
  (export_dir / "1" / "saved_model.pb").write_text("another exporter's")
  tmp = export_dir / "temp-0"
  tmp.mkdir()
  (tmp / "saved_model.pb").write_text("ours")
  real_versions, calls = exporter.versions, []

  def stale_once(folder):  # the first listing predates the other export
    calls.append(folder)
    return [] if len(calls) == 1 else real_versions(folder)

  monkeypatch.setattr(exporter, "versions", stale_once)
  assert exporter._publish(str(tmp), str(export_dir)) == str(export_dir / "2")
  assert (export_dir / "2" / "saved_model.pb").read_text() == "ours"
  assert (export_dir / "1" / "saved_model.pb").read_text() == (
      "another exporter's")



SAMPLING = ("sampling_temperature=1.0,top_k=20,sampling_seed=3,"
            "num_samples=2,extra_length=5")


@pytest.fixture(scope="module")
def sampling_export(exported, tmp_path_factory):
  """The exported run again, sampling: (model, vocab, loaded SavedModel)."""
  folder, model, vocab, _ = exported
  path = exporter.export_saved_model(
      folder, export_dir=str(tmp_path_factory.mktemp("sampling")),
      decode_hparams=SAMPLING)
  return model, vocab, tf.saved_model.load(path)


def test_sampling_hparams_are_fixed_in_the_export(sampling_export):
  model, vocab, loaded = sampling_export
  lines = [line for line in sample_lines() if line.strip()]
  result = loaded.signatures[serving_module.TEXT_SIGNATURE](
      inputs=tf.constant(lines))
  assert result["outputs"].shape == (len(lines), 2)
  decoder = Decoder(model, vocab, settle(DecodeHParams.parse(SAMPLING)))
  expected, scores = decoder.decode_lines(lines, progress=False)
  got = [[t.decode() for t in row] for row in result["outputs"].numpy()]
  assert_outputs_differ(expected, "sampled outputs")
  assert got == expected
  np.testing.assert_allclose(result["scores"], scores, rtol=1e-4, atol=1e-4)


def test_score_signature_scores_as_the_scorer(sampling_export):
  # Decode hparams (here sampling) do not change scores.
  from t2tlite.decode.scoring import Scorer
  model, vocab, loaded = sampling_export
  sources = multi30k_lines("en", 5)
  targets = multi30k_lines("de", 5) + [""]
  score = loaded.signatures[serving_module.SCORE_SIGNATURE]
  result = score(inputs=tf.constant(sources + ["A dog."]),
                 targets=tf.constant(targets))
  expected = Scorer(model, vocab).score_lines(sources + ["A dog."], targets)
  assert_outputs_differ([[s.normalized] for s in expected], "scores")
  np.testing.assert_allclose(result["scores"], [s.total for s in expected],
                             rtol=1e-4)
  np.testing.assert_allclose(result["normalized_scores"],
                             [s.normalized for s in expected], rtol=1e-4)
  # An empty target scores EOS alone.
  assert result["lengths"].numpy().tolist() == [len(s.tokens)
                                                for s in expected]
  assert expected[-1].tokens and len(expected[-1].tokens) == 1
  np.testing.assert_allclose(result["token_scores"][:, 0],
                             [s.tokens[0] for s in expected], rtol=1e-4)
