"""int8 where its kernel cannot run: TensorFlow's oneDNN path off
(TF_ENABLE_ONEDNN_OPTS=0, the path an AVX2-only CPU takes under
TensorFlow's own default). The commands say so in one line and decode
without int8; an int8 export still translates."""
import json
import os
import subprocess
import sys

import pytest

from outputs_differ import assert_outputs_differ
from run_folder import multi30k_lines, needs_multi30k
from shared_run import shared_run_folder
from train_helpers import user_env

pytestmark = needs_multi30k
SUPPORT = os.path.dirname(os.path.abspath(sys.modules["run_folder"].__file__))

FALLBACK_LINE = "int8=true is not available here, so decoding runs without int8"


def onednn_off_env():
  return {**user_env(), "TF_ENABLE_ONEDNN_OPTS": "0"}


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
  """The session's shared run (read only: exports go to tmp_path)."""
  return shared_run_folder(tmp_path_factory)


# Two t2t-decoder processes (about 40 s on 2 cores): the user's command
# itself, on the path an AVX2 CPU takes by default.
@pytest.mark.timeout(240)
def test_t2t_decoder_int8_without_onednn_decodes_as_float32(run_folder,
                                                            tmp_path):
  source = tmp_path / "in.en"
  source.write_text("\n".join(multi30k_lines("en", 4)) + "\n",
                    encoding="utf-8")
  written = {}
  for int8 in ("true", "false"):
    target = tmp_path / f"out.{int8}"
    run = subprocess.run(
        [sys.executable, "-m", "t2tlite.bin.t2t_decoder",
         f"--output_dir={run_folder}", "--mixed_precision=float32",
         f"--decode_hparams=beam_size=2,extra_length=5,int8={int8}",
         f"--decode_from_file={source}", f"--decode_to_file={target}"],
        capture_output=True, text=True, env=onednn_off_env(), timeout=200)
    assert run.returncode == 0, run.stderr
    said = [line for line in run.stderr.splitlines() if FALLBACK_LINE in line]
    assert len(said) == (1 if int8 == "true" else 0), run.stderr
    if said:  # the reason, named
      assert "TF_ENABLE_ONEDNN_OPTS=0, set by the user" in said[0]
    assert "Traceback" not in run.stderr
    written[int8] = target.read_text(encoding="utf-8")
  assert written["true"] == written["false"]
  assert written["true"].count("\n") == 4
  assert_outputs_differ(written["true"].splitlines())


# An export and a fresh serving process (over a minute on 2 cores): the
# only way to show that a request never fails where the kernel is missing.
@pytest.mark.timeout(600)
def test_int8_export_served_without_onednn_translates_as_float32(
    run_folder, tmp_path):
  # Exported here (where int8 may or may not compute), loaded in a fresh
  # process without oneDNN, as on a server that left it off: each request
  # checks the kernel in the graph and runs the float32 search instead.
  from t2tlite import run_dir
  from t2tlite.data.vocab import Vocabulary
  from t2tlite.decode.decoding import Decoder
  from t2tlite.decode.machine import settle
  from t2tlite.decode.settings import DecodeHParams
  from t2tlite.export import exporter
  decode = "beam_size=2,extra_length=5"
  path = exporter.export_saved_model(
      run_folder, export_dir=str(tmp_path / "export"),
      decode_hparams=decode + ",int8=true")
  ops = exporter.check_serving_ops(path)  # no Python op: TF Serving runs it
  assert "QuantizedMatMulWithBiasAndDequantize" in ops
  lines = multi30k_lines("en", 3) + [""]
  request, result_path = tmp_path / "request.json", tmp_path / "result.json"
  model, info, _ = run_dir.load_trained_model(run_folder)
  vocab = Vocabulary.from_file(info.vocab_file)
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
  expected, scores = Decoder(model, vocab, settle(DecodeHParams.parse(
      decode))).decode_lines(lines, progress=False)
  assert_outputs_differ(expected)
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
