"""t2t-serve's app in-process over a run folder: for sampling decode
hparams one translation (a string) a line whatever num_samples, and the
n-best of a sampling request is its samples (in order), not an error; the
attention of a blank line is a bad request; no attention computed while
warming up or draining, and a drain waits for the attention computing."""
import json
import threading
import time

import pytest

from t2tlite.serve import app as app_lib
from t2tlite.serve import validation
from t2tlite.serve.lifecycle import Lifecycle
from t2tlite.serve.model_source import ModelSource, RequestError

from run_folder import multi30k_lines, needs_multi30k
from shared_run import shared_run_folder

pytestmark = needs_multi30k

SAMPLING = "sampling_temperature=1.0,sampling_seed=5,extra_length=4"


@pytest.fixture(scope="module")
def source(tmp_path_factory):
  """The session's shared run (read only), as t2t-serve opens it."""
  return ModelSource.open(shared_run_folder(tmp_path_factory))


@pytest.fixture(scope="module")
def client(source):
  return app_lib.make_app(source, validation.Limits()).test_client()


def _post(client, request):
  answer = client.post("/api/translate", data=json.dumps(request),
                       content_type="application/json")
  assert answer.status_code == 200, answer.get_json()
  return answer.get_json()


def test_sampled_translations_are_one_string_a_line(client):
  lines = multi30k_lines("en", 2) + [" "]
  several = _post(client, {"lines": lines,
                           "decode_hparams": SAMPLING + ",num_samples=3"})
  assert list(several) == ["translations"]  # no n-best unless asked
  assert [type(t) for t in several["translations"]] == [str, str, str]
  assert several["translations"][2] == ""
  with_n_best = _post(client, {"lines": lines, "n_best": True,
                               "decode_hparams": SAMPLING + ",num_samples=3"})
  assert with_n_best["translations"] == several["translations"]
  assert [len(samples) for samples in with_n_best["n_best"]] == [3, 3, 3]
  for text, samples in zip(with_n_best["translations"],
                           with_n_best["n_best"]):
    assert samples[0]["text"] == text
  # A sentence's first sample is its one sample with num_samples=1.
  one = _post(client, {"lines": lines, "n_best": True,
                       "decode_hparams": SAMPLING})
  assert one["translations"] == several["translations"]
  assert [[s["text"] for s in samples] for samples in one["n_best"]] == [
      [text] for text in several["translations"]]


def test_too_many_samples_are_a_bad_request(client):
  answer = client.post("/api/translate", data=json.dumps({
      "lines": ["A dog."], "decode_hparams": SAMPLING + ",num_samples=500"}),
      content_type="application/json")
  assert answer.status_code == 400
  assert "num_samples=500" in answer.get_json()["error"]


@pytest.mark.parametrize("line", ["", "   "])
def test_attention_of_a_blank_line_is_a_bad_request(source, client, line):
  # The API's validation answers first; the model source refuses it too,
  # for library callers.
  answer = client.post("/api/attention", data=json.dumps({"line": line}),
                       content_type="application/json")
  assert answer.status_code == 400
  assert answer.get_json() == {"error": "line: empty; expected a sentence"}
  with pytest.raises(RequestError, match="^attention: the line is empty$"):
    source.attention(line)


def test_no_request_computes_while_warming_up_or_draining(source):
  lifecycle = Lifecycle()  # warming up
  client = app_lib.make_app(source, validation.Limits(),
                            lifecycle=lifecycle).test_client()
  for state in ("warming up", "draining"):
    if state == "draining":
      lifecycle.set_ready()
      lifecycle.start_draining()
    for path, request in (("/api/translate", {"lines": ["A dog."]}),
                          ("/api/attention", {"line": "A dog."})):
      answer = client.post(path, data=json.dumps(request),
                           content_type="application/json")
      assert answer.status_code == 503, (path, answer.get_json())
      assert answer.get_json()["error"].startswith(state)
      assert answer.headers["Retry-After"] == "5"


def test_a_drain_waits_for_the_attention_computing(source):
  """An attention request computing when the drain starts is answered:
  Serving.drain (t2t-serve's on SIGTERM) returns once its answer is made,
  as Serving.attention_done says."""
  lifecycle = Lifecycle(ready=True)
  app = app_lib.make_app(source, validation.Limits(), lifecycle=lifecycle)
  serving = app.extensions["t2tlite"]
  assert serving.attention_done(0)
  answers = []
  # Decode hparams of their own: a search traced for them (seconds).
  request = {"line": multi30k_lines("en", 1)[0],
             "decode_hparams": "beam_size=3,extra_length=5"}
  thread = threading.Thread(target=lambda: answers.append(
      app.test_client().post("/api/attention", data=json.dumps(request),
                             content_type="application/json")))
  thread.start()
  try:
    deadline = time.monotonic() + 60
    while serving.attention_done(0) and time.monotonic() < deadline:
      time.sleep(0.01)
    assert not serving.attention_done(0), "the attention never computed"
    lifecycle.start_draining()
    assert serving.drain(120)
    # Drained: the attention's answer is made (its slot given back).
    assert serving.attention_done(0)
  finally:
    thread.join(120)
  assert answers and answers[0].status_code == 200, answers
  assert answers[0].get_json()["target"]
