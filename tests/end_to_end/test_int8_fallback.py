"""int8 where its kernel cannot run: TensorFlow's oneDNN path off
(TF_ENABLE_ONEDNN_OPTS=0, the path an AVX2-only CPU takes under
TensorFlow's own default). The commands say so in one line and decode
without int8; an int8 export still translates."""
import dataclasses
import json
import os
import subprocess
import sys

import pytest

from outputs_differ import assert_outputs_differ
from run_folder import multi30k_lines, needs_multi30k
from shared_export import DECODE, shared_export
from shared_run import shared_run_folder
from train_helpers import user_env

pytestmark = needs_multi30k
SUPPORT = os.path.dirname(os.path.abspath(sys.modules["run_folder"].__file__))

FALLBACK_LINE = "int8=true is not available here, so decoding runs without int8"
# Decoded by t2t-decoder, and with an empty line by the export.
LINES = multi30k_lines("en", 4)


def onednn_off_env():
  return {**user_env(), "TF_ENABLE_ONEDNN_OPTS": "0"}


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
  """The session's shared run (read only: exports go elsewhere)."""
  return shared_run_folder(tmp_path_factory)


@pytest.fixture(scope="module")
def float32(run_folder):
  """(Vocabulary, (outputs, scores)): the in-process float32 Decoder of the
  shared run with DECODE on LINES and an empty line, which int8=true must
  give where int8 cannot run."""
  from t2tlite import run_dir
  from t2tlite.data.vocab import Vocabulary
  from t2tlite.decode.decoding import Decoder
  from t2tlite.decode.machine import settle
  from t2tlite.decode.settings import DecodeHParams
  model, info, _ = run_dir.load_trained_model(run_folder)
  vocab = Vocabulary.from_file(info.vocab_file)
  decoder = Decoder(model, vocab, settle(DecodeHParams.parse(DECODE)))
  expected = decoder.decode_lines(LINES + [""], progress=False)
  assert_outputs_differ(expected[0])
  return vocab, expected


# A t2t-decoder process (about 20 s on 2 cores): the user's command itself,
# on the path an AVX2 CPU takes by default.
@pytest.mark.timeout(240)
def test_t2t_decoder_int8_without_onednn_decodes_as_float32(
    run_folder, float32, tmp_path):
  source, target = tmp_path / "in.en", tmp_path / "out.de"
  source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
  run = subprocess.run(
      [sys.executable, "-m", "t2tlite.bin.t2t_decoder",
       f"--output_dir={run_folder}", "--mixed_precision=float32",
       f"--decode_hparams={DECODE},int8=true",
       f"--decode_from_file={source}", f"--decode_to_file={target}"],
      capture_output=True, text=True, env=onednn_off_env(), timeout=200)
  assert run.returncode == 0, run.stderr
  said = [line for line in run.stderr.splitlines() if FALLBACK_LINE in line]
  assert len(said) == 1, run.stderr
  assert "TF_ENABLE_ONEDNN_OPTS=0, set by the user" in said[0]  # the reason
  assert "Traceback" not in run.stderr
  # What the float32 search gives.
  _, (expected, _) = float32
  assert target.read_text(encoding="utf-8") == "\n".join(
      expected[:len(LINES)]) + "\n"


def test_decoding_without_int8_says_nothing_of_it(monkeypatch):
  """Where int8 cannot run (oneDNN off by the user), decode hparams without
  int8 settle with no fallback line: the line is said only when int8=true
  is asked (machine.settle, where t2t-decoder settles its hparams)."""
  from absl import logging
  from t2tlite import hardware, onednn
  from t2tlite.decode import machine
  from t2tlite.decode.settings import DecodeHParams
  warnings = []
  monkeypatch.setattr(logging, "warning",
                      lambda fmt, *args: warnings.append(fmt % args))
  monkeypatch.setattr(machine, "_int8_reasons_logged", set())
  off = dataclasses.replace(
      hardware.describe_device(), onednn_enabled=False,
      onednn_setting=onednn.Setting("0", onednn.BY_USER))
  settled = machine.settle(DecodeHParams.parse(DECODE + ",int8=false"),
                           device=off)
  assert not settled.int8 and warnings == []
  settled = machine.settle(DecodeHParams.parse(DECODE + ",int8=true"),
                           device=off)
  assert not settled.int8 and len(warnings) == 1
  assert FALLBACK_LINE in warnings[0]


# A fresh serving process (tens of seconds on 2 cores): the only way to
# show that a request never fails where the kernel is missing.
@pytest.mark.timeout(600)
def test_int8_export_served_without_onednn_translates_as_float32(
    float32, tmp_path_factory, tmp_path):
  # The session's int8 export (made where int8 may or may not compute),
  # loaded in a fresh process without oneDNN, as on a server that left it
  # off: each request checks the kernel in the graph and runs the float32
  # search instead.
  from t2tlite.export import exporter
  path = shared_export(tmp_path_factory, DECODE + ",int8=true")
  ops = exporter.check_serving_ops(path)  # no Python op: TF Serving runs it
  assert "QuantizedMatMulWithBiasAndDequantize" in ops
  lines = LINES + [""]
  request, result_path = tmp_path / "request.json", tmp_path / "result.json"
  vocab, (expected, scores) = float32
  encoded = [vocab.encode_text(line) for line in lines]
  width = max(len(ids) for ids in encoded)
  request.write_text(json.dumps({
      "lines": lines, "ids": [row + [0] * (width - len(row))
                              for row in encoded]}))
  client = subprocess.run(
      [sys.executable, os.path.join(SUPPORT, "fresh_export_client.py"), path,
       str(request), str(result_path)], capture_output=True, text=True,
      env=onednn_off_env(), timeout=400)
  assert client.returncode == 0, client.stderr[-3000:]
  assert "InternalError" not in client.stderr
  result = json.loads(result_path.read_text())
  assert result["text"]["outputs"] == expected
  assert result["text"]["scores"] == pytest.approx(scores, abs=1e-3)
  assert [vocab.decode_ids(row) for row in result["ids"]["outputs"]] == (
      expected)
  assert result["empty_string"] == {"outputs": [""], "scores": [0.0]}


@pytest.mark.timeout(200)
def test_bench_int8_gives_a_reason_where_int8_cannot_run():
  bench = os.path.join(os.path.dirname(os.path.dirname(SUPPORT)), "bench",
                       "run.py")
  run = subprocess.run(
      [sys.executable, bench, "--work", "decode_base",
       "--int8", "--steps", "1", "--warmup", "0", "--no_peak_now"],
      capture_output=True, text=True, env=onednn_off_env(), timeout=180)
  assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
  assert run.stdout.strip().splitlines() == [
      "bench/run.py --int8: int8 is not available here: the int8 kernel "
      "exists only on TensorFlow's oneDNN path, and oneDNN off "
      "(TF_ENABLE_ONEDNN_OPTS=0, set by the user)."]
