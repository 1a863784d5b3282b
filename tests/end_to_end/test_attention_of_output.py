"""The attention shown for a line is that of the output translated for it:
/api/attention's target equals /api/translate's for the same line and
decode hparams (the app in-process over a real run folder), for sampling,
greedy and beam search; and an ensemble's maps are each member's,
teacher-forced on the ensemble's output, in the library and through the
app serving `--model=A,B`."""
import json
import subprocess
import sys

import numpy as np

import pytest

from t2tlite import run_dir
from t2tlite.data.vocab import Vocabulary
from t2tlite.decode import attention_plots, decoding, machine
from t2tlite.decode.ensemble import Ensemble
from t2tlite.decode.settings import DecodeHParams
from t2tlite.serve import app as app_lib
from t2tlite.serve import validation
from t2tlite.serve.model_source import ModelSource, RequestError

from run_folder import multi30k_lines, needs_multi30k
from shared_run import shared_run_folder
from user_env import clean_env

pytestmark = needs_multi30k

STRATEGIES = ["sampling_temperature=3.0,sampling_seed=7",
              "beam_size=1", "beam_size=3,alpha=0.6"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
  """Two run folders of one vocabulary: an untrained transformer_tiny each
  (seeds 3 and 4), whose flat distributions make samples differ from
  searched outputs; the session's shared runs (read only)."""
  return [shared_run_folder(tmp_path_factory, seed=seed) for seed in (3, 4)]


@pytest.fixture(scope="module")
def source(folders):
  return ModelSource.open(folders[0])


@pytest.fixture(scope="module")
def client(source):
  app = app_lib.make_app(source, validation.Limits())
  return app.test_client()


@pytest.fixture(scope="module")
def ensemble(folders):
  """(members as --model names them: a run folder, then a checkpoint of
  the other run; the app's client)."""
  members = [folders[0], run_dir.latest_checkpoint(folders[1])]
  source = ModelSource.open(",".join(members))
  return members, app_lib.make_app(source, validation.Limits()).test_client()


@pytest.fixture(scope="module")
def reloaded(folders, ensemble):
  """(the ensemble's members loaded again, their vocabulary)."""
  models, info, _ = run_dir.load_models(folders[0], ensemble[0])
  return models, Vocabulary.from_file(info.vocab_file)


def _post(client, path, request):
  answer = client.post(path, data=json.dumps(request),
                       content_type="application/json")
  assert answer.status_code == 200, answer.get_json()
  return answer.get_json()


@pytest.mark.parametrize("overrides", STRATEGIES)
def test_api_attention_shows_the_translated_output(client, overrides):
  line = multi30k_lines("en", 1)[0]
  request = {"decode_hparams": overrides + ",extra_length=6"}
  translated = _post(client, "/api/translate",
                     dict(request, lines=[line]))["translations"][0]
  shown = _post(client, "/api/attention", dict(request, line=line))
  assert shown["target"] == translated
  assert len(shown["pieces"]["target"]) == len(
      shown["attention"]["encdec"][0][0])


def test_sampled_attention_is_not_that_of_the_greedy_output(client):
  """The check above can fail: at temperature 3 the untrained model's
  sampled output is not its greedy one."""
  line = multi30k_lines("en", 1)[0]
  sampled, greedy = (
      _post(client, "/api/attention",
            {"line": line, "decode_hparams": hp + ",extra_length=6"})
      for hp in STRATEGIES[:2])
  assert sampled["target"] != greedy["target"]


def test_api_target_prefixes_start_the_translations(client):
  lines = multi30k_lines("en", 2)
  request = {"lines": lines, "target_prefixes": ["Ein Hund", ""],
             "decode_hparams": "beam_size=2,extra_length=6"}
  translations = _post(client, "/api/translate", request)["translations"]
  assert translations[0].startswith("Ein Hund")
  plain = _post(client, "/api/translate",
                dict(request, target_prefixes=None))["translations"]
  assert translations[1] == plain[1]
  shown = _post(client, "/api/attention", {
      "line": lines[0], "target_prefix": "Ein Hund",
      "decode_hparams": request["decode_hparams"]})
  assert shown["target"] == translations[0]
  # Bad prefixes: 400 with one line naming them; the app goes on.
  for prefixes, message in (
      (["Hund " * 80, ""], "target prefix 1 holds"),
      (["\u65e5\u672c", ""], "cannot encode"),
      (["Ein"], "target_prefixes: expected a list of 2 strings")):
    answer = client.post("/api/translate", data=json.dumps(
        dict(request, target_prefixes=prefixes)),
        content_type="application/json")
    assert answer.status_code == 400, answer.get_json()
    assert message in answer.get_json()["error"]
  answer = client.post("/api/attention", data=json.dumps({
      "line": lines[0], "target_prefix": "\u65e5\u672c"}),
      content_type="application/json")
  assert answer.status_code == 400, answer.get_json()
  assert answer.get_json()["error"].startswith(
      "target_prefix: target prefix 1"), answer.get_json()


def test_a_batch_with_a_bad_prefix_fails_only_that_line(source):
  """The batcher's decode of lines of several requests, one prefix bad:
  the others get what they get alone, the bad one its own error."""
  overrides = "beam_size=2,extra_length=6"
  key = app_lib.TranslateKey(source.decode_hparams(overrides), False)
  translate = app_lib.batch_translator(source)
  lines = multi30k_lines("en", 3)
  good = [app_lib.TranslateLine(lines[0], "Ein Hund"),
          app_lib.TranslateLine(lines[2], "")]
  bad = app_lib.TranslateLine(lines[1], "\u65e5\u672c")
  results = translate(key, [good[0], bad, good[1]])
  assert isinstance(results[1], RequestError)
  assert "cannot encode" in str(results[1])
  assert [results[0], results[2]] == [translate(key, [item])[0]
                                      for item in good]
  assert results[0][0].startswith("Ein Hund")


@pytest.mark.parametrize("overrides", STRATEGIES)
def test_api_attention_of_an_ensemble_has_each_members_maps(
    ensemble, reloaded, overrides):
  """Each member's maps are that member alone teacher-forced on the
  ensemble's output: in the library (decoded_attention_maps, exactly) and
  through the app serving the ensemble."""
  members, client = ensemble
  info = client.get("/api/info").get_json()["model"]
  assert info["ensemble"] == members
  line = multi30k_lines("en", 2)[1]
  hp = overrides + ",extra_length=6"
  translated = _post(client, "/api/translate", {
      "lines": [line], "decode_hparams": hp})["translations"][0]
  shown = _post(client, "/api/attention", {"line": line,
                                           "decode_hparams": hp})
  assert shown["target"] == translated
  assert len(shown["members"]) == 2
  assert shown["members"][0]["attention"] == shown["attention"]
  # The ensemble loaded again here: the ids it decodes for the line.
  models, vocab = reloaded
  decoder = decoding.Decoder(Ensemble(models), vocab,
                             machine.settle(DecodeHParams.parse(hp)))
  outputs, _, ids = decoder.decode_batch([line], with_ids=True)
  assert outputs[0] == translated
  maps = attention_plots.decoded_attention_maps(decoder, line)
  assert len(maps) == 2
  for model, member_maps, member in zip(models, maps, shown["members"]):
    alone = attention_plots.attention_maps(model, vocab, line, ids[0])
    assert member_maps["target"] == outputs[0]
    assert len(member_maps["pieces"]["target"]) == len(ids[0])
    for kind in ("encoder", "decoder_self", "encdec"):
      assert len(member["attention"][kind]) == len(alone["weights"][kind])
      for got, served, want in zip(member_maps["weights"][kind],
                                   member["attention"][kind],
                                   alone["weights"][kind]):
        assert (got == want).all()
        np.testing.assert_allclose(np.array(served), want, atol=1e-4)
  # Members differ, so their maps do.
  assert (maps[0]["weights"]["encdec"][0] !=
          maps[1]["weights"]["encdec"][0]).any()
  first, second = (np.array(m["attention"]["encdec"][0])
                   for m in shown["members"])
  assert np.abs(first - second).max() > 1e-3


def test_a_single_models_attention_has_no_members(client):
  shown = _post(client, "/api/attention",
                {"line": multi30k_lines("en", 1)[0],
                 "decode_hparams": "beam_size=1,extra_length=6"})
  assert "members" not in shown
  assert client.get("/api/info").get_json()["model"]["ensemble"] is None


def test_t2t_serve_names_a_missing_ensemble_checkpoint(folders):
  missing = folders[1] + "/ckpt-999999"
  with pytest.raises(FileNotFoundError, match="ckpt-999999"):
    ModelSource.open(f"{folders[0]},{missing}")
  done = subprocess.run(
      [sys.executable, "-m", "t2tlite.bin.t2t_serve",
       f"--model={folders[0]},{missing}", "--port=0"],
      capture_output=True, text=True, timeout=120, check=False,
      env=clean_env())
  assert done.returncode == 1, done.stderr
  errors = done.stderr.strip().splitlines()
  assert len(errors) == 1 and errors[0].startswith("t2t-serve: error: ")
  assert "ckpt-999999: no checkpoint there" in errors[0]


def test_an_ensemble_checkpoint_of_another_problem_is_refused(
    folders, tmp_path_factory):
  """A member named by its checkpoint is its own run's: its problem (and
  vocabulary) are checked against the first member's."""
  other = shared_run_folder(tmp_path_factory, problem="translate_enfr_wmt")
  checkpoint = run_dir.latest_checkpoint(other)
  with pytest.raises(ValueError, match=(
      f"model: {checkpoint} was trained on problem translate_enfr_wmt")):
    ModelSource.open(f"{folders[0]},{checkpoint}")
