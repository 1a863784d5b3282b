"""Epsilon sampling (decode hparam epsilon) wherever sampling works: the
library's Decoder, t2t-decoder, /api/translate and an export give the same
samples for the same settings, and they are not those of plain sampling."""
import json
import subprocess
import sys

import pytest
import tensorflow as tf

from t2tlite import problem_decoding, run_decoding
from t2tlite.decode.machine import settle
from t2tlite.export import exporter
from t2tlite.serve import app as app_lib
from t2tlite.serve import validation
from t2tlite.serve.model_source import ModelSource

from outputs_differ import assert_outputs_differ
from run_folder import multi30k_lines, needs_multi30k
from shared_run import run_copy
from train_helpers import user_env

pytestmark = needs_multi30k

PLAIN = "sampling_temperature=1.0,sampling_seed=4,num_samples=2,extra_length=5"
EPSILON = PLAIN + ",epsilon=0.02"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  """(a writable copy of the shared run folder, its LoadedRun)."""
  folder = run_copy(tmp_path_factory, "epsilon_run")
  return folder, run_decoding.load_run(folder)


def lines():
  return multi30k_lines("en", 4)


def decoded(loaded, overrides):
  hp = problem_decoding.decode_hparams(loaded.info.problem, overrides)
  outputs, _ = loaded.decoder(settle(hp)).decode_lines(lines(),
                                                      progress=False)
  return outputs


@pytest.fixture(scope="module")
def expected(run):
  """The Decoder's epsilon samples: two per line."""
  outputs = decoded(run[1], EPSILON)
  assert all(len(samples) == 2 for samples in outputs)
  assert_outputs_differ(outputs, "epsilon samples")
  return outputs


def test_epsilon_drops_tokens_plain_sampling_draws(run, expected):
  assert expected != decoded(run[1], PLAIN)


@pytest.mark.timeout(240)
def test_t2t_decoder_samples_as_the_decoder(run, expected, tmp_path):
  source = tmp_path / "in.en"
  source.write_text("\n".join(lines()) + "\n", encoding="utf-8")
  result = subprocess.run(
      [sys.executable, "-m", "t2tlite.bin.t2t_decoder",
       f"--output_dir={run[0]}", f"--decode_from_file={source}",
       f"--decode_hparams={EPSILON}",
       "--mixed_precision=float32"],  # as the in-process Decoder
      capture_output=True, text=True, env=user_env())
  assert result.returncode == 0, result.stderr
  assert "epsilon=0.02" in result.stderr  # the strategy's log line
  written = [line.split("\t")[::2] for line in result.stdout.splitlines()]
  assert written == expected


def test_api_translate_samples_as_the_decoder(run, expected):
  client = app_lib.make_app(ModelSource.open(run[0]),
                            validation.Limits()).test_client()
  answer = client.post("/api/translate", data=json.dumps({
      "lines": lines(), "decode_hparams": EPSILON, "n_best": True}),
      content_type="application/json")
  assert answer.status_code == 200, answer.get_json()
  got = [[beam["text"] for beam in line] for line in
         answer.get_json()["n_best"]]
  assert got == expected


def test_an_export_samples_as_the_decoder(run, expected, tmp_path):
  path = exporter.export_saved_model(run[0], export_dir=str(tmp_path),
                                     decode_hparams=EPSILON)
  with open(f"{path}/{exporter.METADATA_FILE}", encoding="utf-8") as f:
    assert json.load(f)["decode_hparams"]["epsilon"] == 0.02
  result = tf.saved_model.load(path).signatures["serving_default"](
      inputs=tf.constant(lines()))
  got = [[t.decode() for t in row] for row in result["outputs"].numpy()]
  assert got == expected
