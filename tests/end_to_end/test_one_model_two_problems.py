"""One model of two problems (`--problem=A+B`, t2tlite.mixture): a tiny
model trained once by t2t-trainer on copying and reversing digit lines
(tests/support/plugins/digit_languages.py) learns both, each member's dev
metric in metrics.jsonl and best/ chosen on their mean; it decodes each by
its tag, and t2t-serve's API answers two languages for one line in one
batch, each as alone."""
import json
import os

import pytest

from t2tlite import problem_decoding, run_decoding
from t2tlite.data import languages
from t2tlite.decode import machine
from t2tlite.serve import app as app_lib
from t2tlite.serve import validation
from t2tlite.serve.model_source import ModelSource
from t2tlite.train import best as best_lib

from train_helpers import SUPPORT_DIR, command

MIXTURE = "plugin_copy_digits+plugin_reverse_digits"
COPY, REVERSE = "cp", "plugin_reverse_digits"
LINES = ["3 1 4 1 5", "9 2 6", "5 3 5 8 9 7"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  folder = tmp_path_factory.mktemp("mixture")
  command("t2t-trainer", f"--t2t_usr_dir={SUPPORT_DIR}/plugins",
          f"--problem={MIXTURE}", "--hparams_set=transformer_tiny",
          "--hparams=batch_size=512,max_length=16,warmup_steps=100,"
          "learning_rate_cooldown_steps=100",
          f"--data_dir={folder}/data", f"--output_dir={folder}/run",
          "--generate_data", "--train_steps=300", "--local_eval_frequency=0",
          "--eval_decode_hparams=beam_size=1", "--random_seed=1")
  return str(folder / "run")


def test_learns_both_members_and_keeps_the_best_mean(run):
  record = best_lib.read_metrics(run)[-1]
  for member in ("plugin_copy_digits", "plugin_reverse_digits"):
    assert record[f"exact_match/{member}"] >= 50, record
  assert record["exact_match/mean"] == pytest.approx(
      (record["exact_match/plugin_copy_digits"] +
       record["exact_match/plugin_reverse_digits"]) / 2)
  assert best_lib.read_best(run)["metric"] == "exact_match/mean"
  with open(os.path.join(run, "run.json")) as f:
    assert json.load(f)["target_languages"] == {
        COPY: "<2cp>", REVERSE: "<2plugin_reverse_digits>"}


def test_decodes_each_member_by_its_tag(run):
  loaded = run_decoding.load_run(run)
  decoder = loaded.decoder(machine.settle(
      problem_decoding.decode_hparams(loaded.info.problem, "beam_size=1")))
  known = loaded.info.target_languages
  copied, _ = decoder.decode_lines(
      languages.tag_lines(LINES, known, COPY), progress=False)
  reversed_, _ = decoder.decode_lines(
      languages.tag_lines(LINES, known, REVERSE), progress=False)
  assert copied == LINES
  assert reversed_ == [" ".join(line.split()[::-1]) for line in LINES]


def test_one_batch_of_two_languages_gives_each_what_it_gives_alone(run):
  client = app_lib.make_app(ModelSource.open(run),
                            validation.Limits()).test_client()

  def translate(request):
    answer = client.post("/api/translate", data=json.dumps(request),
                         content_type="application/json")
    return answer.status_code, answer.get_json()

  line = LINES[0]
  status, both = translate({"lines": [line, line],
                            "target_language": [COPY, REVERSE]})
  assert status == 200, both
  alone = [translate({"lines": [line], "target_language": language})[1]
           ["translations"][0] for language in (COPY, REVERSE)]
  assert both["translations"] == alone == [line, "5 1 4 1 3"]
  status, error = translate({"lines": [line], "target_language": "de"})
  assert status == 400
  assert "this model knows cp, plugin_reverse_digits" in error["error"]
  status, error = translate({"lines": [line]})
  assert status == 400 and "is needed" in error["error"]
  info = client.get("/api/info").get_json()["model"]
  assert info["target_languages"] == [COPY, REVERSE]
