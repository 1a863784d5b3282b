"""t2t-serve's request checks, its lifecycle and model-source lookup, and
its app's own behaviour over a source that needs no model (EchoSource)."""
import json
import os
import re
import threading

import numpy as np
import pytest

from t2tlite.serve import validation
from t2tlite.serve.lifecycle import Lifecycle
from t2tlite.serve.model_source import Attention, ModelSource, PrefixError

import command_flags
from fake_export import fake_export
from train_helpers import poll

LIMITS = validation.Limits(max_lines=2, max_line_chars=10)


@pytest.mark.parametrize("body, message", [
    (b"", "empty body"),
    (b"\xff\xfe", "invalid JSON"),
    (b'{"a": ', "invalid JSON"),
    (b'"text"', "expected a JSON object, got str"),
])
def test_parse_body_rejects(body, message):
  with pytest.raises(validation.BadRequest, match=message):
    validation.parse_body(body)


def test_translate_request_reads_the_fields():
  data = validation.parse_body(json.dumps(
      {"lines": ["A dog.", ""], "decode_hparams": "beam_size=2",
       "n_best": True, "target_prefixes": ["Ein", ""]}).encode())
  assert validation.translate_request(data, LIMITS) == (
      ["A dog.", ""], "beam_size=2", True, ["Ein", ""])
  assert validation.translate_request({"lines": ["x"]}, LIMITS) == (
      ["x"], "", False, None)
  # A line of exactly the limit's characters is accepted.
  assert validation.translate_request({"lines": ["a" * 10]}, LIMITS)[0] == [
      "a" * 10]
  assert validation.attention_request(
      {"line": "x", "target_prefix": "Ein"}, LIMITS) == ("x", "", "Ein")


@pytest.mark.parametrize("data, message", [
    ({}, "lines: expected a list of strings, got none"),
    ({"lines": ["a", "b", "c"]}, "3 lines, more than the limit of 2"),
    ({"lines": ["a" * 11]}, r"lines\[0\]: 11 characters"),
    ({"lines": ["a\nb"]}, "without line breaks"),
    ({"lines": ["a\rb"]}, r"lines\[0\]: one sentence a line"),
    ({"lines": [None]}, r"lines\[0\]: expected a string, got NoneType"),
    ({"lines": ["a"], "n_best": 1}, "n_best: expected true or false"),
    ({"lines": ["a"], "decode_hparams": ["beam_size=2"]},
     "decode_hparams: expected a string"),
    ({"lines": ["a"], "line": "b"}, "unknown field 'line'"),
    ({"lines": ["a"], "target_prefixes": "Ein"},
     "target_prefixes: expected a list of 1 strings"),
    ({"lines": ["a"], "target_prefixes": [3]},
     r"target_prefixes\[0\]: expected a string"),
    ({"lines": ["a", "b"], "target_prefixes": ["Ein"]},
     "target_prefixes: expected a list of 2 strings, one per line"),
])
def test_translate_request_rejects(data, message):
  with pytest.raises(validation.BadRequest, match=message):
    validation.translate_request(data, LIMITS)


@pytest.mark.parametrize("data, message", [
    ({}, "line: missing"), ({"line": "  "}, "line: empty"),
    ({"line": 3}, "line: expected a string"),
    ({"line": "a", "lines": []}, "unknown field 'lines'"),
    ({"line": "a", "target_prefix": "Ein\nHund"},
     "target_prefix: one sentence a line"),
    ({"line": "a", "target_prefix": "b" * 11}, "target_prefix: 11 characters"),
])
def test_attention_request_rejects(data, message):
  with pytest.raises(validation.BadRequest, match=message):
    validation.attention_request(data, LIMITS)


def test_target_language_gives_one_language_a_line():
  assert validation.target_languages({"lines": ["a", "b"]}, 2) is None
  assert validation.target_languages({"target_language": "de"}, 2) == [
      "de", "de"]
  # null in a list: that line takes the model's default.
  assert validation.target_languages({"target_language": ["de", None]},
                                     2) == ["de", None]


@pytest.mark.parametrize("value, message", [
    (["de"], "^target_language: expected one language, or a list of 2, "
     "one per line$"),
    (["de", "fr", "en"], "or a list of 2"),
    (3, "^target_language: expected a language such as \"de\", got int$"),
    (["de", 3], r"^target_language\[1\]: expected a language"),
])
def test_target_language_rejects(value, message):
  with pytest.raises(validation.BadRequest, match=message):
    validation.target_languages({"target_language": value}, 2)


def test_model_source_names_what_it_expected(tmp_path):
  with pytest.raises(FileNotFoundError, match="expected an export"):
    ModelSource.open(str(tmp_path))
  # The highest version holding a SavedModel is opened (10, not 3 or the
  # unfinished 11); its missing metadata is the error here.
  for version, pb in (("3", True), ("10", True), ("11", False)):
    os.makedirs(tmp_path / "export" / version)
    if pb:
      (tmp_path / "export" / version / "saved_model.pb").write_bytes(b"")
  with pytest.raises(FileNotFoundError,
                     match=r"export/10: a SavedModel without assets.extra"):
    ModelSource.open(str(tmp_path / "export"))


def test_search_width_bounds_the_beam_or_the_samples():
  """--max_beam_size bounds what a request decodes a line: its beam, or
  when it samples its num_samples (each a row of the search)."""
  from t2tlite.decode.settings import DecodeHParams
  limits = validation.Limits(max_beam_size=4)
  validation.check_search_width(DecodeHParams(beam_size=4), limits)
  # A sampling request's beam_size is unused: not bounded.
  validation.check_search_width(DecodeHParams(
      beam_size=8, sampling_temperature=1.0, num_samples=4), limits)
  with pytest.raises(validation.BadRequest,
                     match=r"beam_size=5: more than the limit of 4 "
                     r"\(--max_beam_size\)"):
    validation.check_search_width(DecodeHParams(beam_size=5), limits)
  with pytest.raises(validation.BadRequest,
                     match=r"num_samples=500: more than the limit of 4 "
                     r"\(--max_beam_size\)"):
    validation.check_search_width(DecodeHParams(
        sampling_temperature=1.0, num_samples=500), limits)


def test_lifecycle_takes_requests_only_between_ready_and_draining():
  lifecycle = Lifecycle()
  assert lifecycle.not_ready() == "warming up: the model is loading"
  lifecycle.set_ready()
  assert lifecycle.not_ready() is None and not lifecycle.draining
  assert lifecycle.start_draining() and lifecycle.draining
  assert lifecycle.not_ready() == "draining: the server is stopping"
  # A second signal finds it draining already (t2t-serve then stops at once).
  assert not lifecycle.start_draining()
  assert lifecycle.draining


def test_a_server_stopped_while_warming_up_says_it_is_draining():
  lifecycle = Lifecycle()
  assert lifecycle.start_draining()
  assert lifecycle.not_ready() == "draining: the server is stopping"
  # Ready after all (the warm-up ends): still draining.
  lifecycle.set_ready()
  assert lifecycle.not_ready() == "draining: the server is stopping"


@pytest.mark.parametrize("flag, value, expected", [
    ("max_lines", 0, ">= 1"), ("drain_secs", -1.0, ">= 0"),
    ("busy_timeout_secs", -1.0, ">= 0"), ("xla_lines", -1, ">= 0"),
    ("port", 70000, "0..65535")])
def test_a_serving_limit_out_of_range_is_named(flag, value, expected):
  with command_flags.command_module("t2tlite.bin.t2t_serve",
                                    **{flag: value}) as command:
    with pytest.raises(ValueError) as error:
      command._limits()
  assert str(error.value) == f"--{flag}={value}: expected {expected}"


def test_app_answers_what_it_cannot_do_in_one_json_line(tmp_path):
  """Over an export whose run folder is gone: decode hparams of its own
  are a bad request (400), as are unknown pages and methods (404, 405)."""
  from t2tlite.serve import app as app_lib
  fake_export(tmp_path / "1", str(tmp_path / "gone" / "ckpt-1"),
              "beam_size=2")
  client = app_lib.make_app(ModelSource.open(str(tmp_path)),
                            validation.Limits()).test_client()
  for method, path, body, status, message in (
      ("post", "/api/translate", {"lines": ["A dog."],
                                  "decode_hparams": "beam_size=1"}, 400,
       "^these decode hparams need the run folder the export came from"),
      ("post", "/api/attention", {"line": "A dog."}, 400,
       "^attention maps need the run folder"),
      ("post", "/api/nothing", {}, 404, "^no such page: /api/nothing$"),
      ("get", "/api/translate", None, 405,
       "^GET is not allowed on /api/translate$")):
    answer = getattr(client, method)(path, json=body)
    assert answer.status_code == status, (path, answer.get_json())
    assert re.search(message, answer.get_json()["error"]), path
  info = client.get("/api/info").get_json()
  assert info["model"]["export"] == str(tmp_path / "1")
  assert info["limits"]["max_lines"] == validation.Limits().max_lines


class EchoSource:
  """A model source without a model, for the app's own behaviour: a
  line's translation is its prefix and the line upper-cased; the prefix
  "Zz" is refused as an export's search refuses one. Each translate or
  attention call is recorded, releases `started` and then waits while
  `hold` is clear."""

  def __init__(self):
    self.batches, self.hold = [], threading.Event()
    self.hold.set()
    self.started = threading.Semaphore(0)

  def info(self):
    return {"problem": "echo"}

  def tag_lines(self, lines, targets=None):
    del targets
    return lines

  def decode_hparams(self, overrides):
    from t2tlite.decode.settings import DecodeHParams
    del overrides
    return DecodeHParams()

  def check_prefixes(self, lines, hp, n_best=False, prefixes=None):
    del lines, hp, n_best, prefixes

  def _computing(self, lines):
    self.batches.append(list(lines))
    self.started.release()
    assert self.hold.wait(30)

  def translate(self, lines, hp=None, n_best=False, prefixes=None):
    del hp
    self._computing(lines)
    prefixes = prefixes or [""] * len(lines)
    if "Zz" in prefixes:
      raise PrefixError("the target vocabulary cannot encode 'Zz'")
    texts = [f"{prefix} {line.upper()}".strip()
             for line, prefix in zip(lines, prefixes)]
    return texts, ([[{"text": t, "score": -1.0}] for t in texts]
                   if n_best else None)

  def attention(self, line, hp=None, target_prefix=None):
    del hp, target_prefix
    self._computing([line])
    weights = np.array([[[0.123456, 0.876544]]], dtype=np.float32)
    return Attention(line, line.upper(), {"source": [line]},
                     {"encdec": [weights]})


def _post(app, path, request, answers=None):
  """POSTs `request` as JSON; appends the answer to `answers` (from a
  thread), else returns it."""
  answer = app.test_client().post(path, json=request)
  if answers is None:
    return answer
  answers.append(answer)
  return None


def _posting(app, path, request, answers):
  thread = threading.Thread(target=_post, args=(app, path, request, answers),
                            daemon=True)
  thread.start()
  return thread


def _echo_app(limits=None, **kwargs):
  from t2tlite.serve import app as app_lib
  source = EchoSource()
  return source, app_lib.make_app(source, limits or validation.Limits(),
                                  **kwargs)


def test_an_n_best_request_is_decoded_in_a_batch_of_its_own():
  source, app = _echo_app()
  batcher = app.extensions["t2tlite"].batcher
  source.hold.clear()
  answers, threads = [], [_posting(app, "/api/translate",
                                   {"lines": ["busy"]}, [])]
  assert source.started.acquire(timeout=10)
  for line in ("a", "b"):
    threads.append(_posting(app, "/api/translate",
                            {"lines": [line], "n_best": True}, answers))
    assert poll(lambda n=len(threads) - 1: batcher.queued_requests() == n, 10)
  source.hold.set()
  for thread in threads:
    thread.join(10)
  assert source.batches == [["busy"], ["a"], ["b"]]
  assert sorted(answer.get_json()["n_best"][0][0]["text"]
                for answer in answers) == ["A", "B"]


def test_a_refused_target_prefix_is_named_by_its_line():
  _, app = _echo_app()
  for lines, prefixes, named in (
      (["a"], ["Zz"], "target prefix 1 ('Zz')"),
      (["a", "b"], ["Ein", "Zz"], "target prefix 2 ('Zz')")):
    answer = _post(app, "/api/translate",
                   {"lines": lines, "target_prefixes": prefixes})
    assert answer.status_code == 400
    assert answer.get_json() == {"error": f"target_prefixes: {named}: "
                                 "the target vocabulary cannot encode 'Zz'"}
  answer = _post(app, "/api/translate",
                 {"lines": ["a", "b"], "target_prefixes": ["Ein", ""]})
  assert answer.get_json() == {"translations": ["Ein A", "B"]}


def test_attention_past_max_concurrent_is_busy_until_its_slot_is_free():
  source, app = _echo_app(validation.Limits(max_concurrent=1,
                                            busy_timeout_secs=0))
  source.hold.clear()
  answers = []
  computing = _posting(app, "/api/attention", {"line": "a"}, answers)
  assert source.started.acquire(timeout=10)
  busy = _post(app, "/api/attention", {"line": "b"})
  assert busy.status_code == 503
  assert busy.get_json() == {"error": "busy: 1 request(s) computing "
                             "(--max_concurrent); try again"}
  source.hold.set()
  computing.join(10)
  for answer in answers + [_post(app, "/api/attention", {"line": "c"})]:
    assert answer.status_code == 200
  # Weights are sent with 4 decimals.
  assert answers[0].get_json()["attention"] == {
      "encdec": [[[[0.1235, 0.8765]]]]}


def test_attention_is_done_only_once_every_request_computing_is():
  source, app = _echo_app(validation.Limits(max_concurrent=2))
  done = app.extensions["t2tlite"].attention_done
  assert done(0)
  source.hold.clear()
  answers = []
  computing = _posting(app, "/api/attention", {"line": "a"}, answers)
  assert source.started.acquire(timeout=10)
  assert not done(0.05)
  source.hold.set()
  computing.join(10)
  assert done(0) and answers[0].status_code == 200


def test_readyz_says_why_it_is_not_ready_and_when_to_come_back():
  lifecycle = Lifecycle()
  _, app = _echo_app(lifecycle=lifecycle)
  client = app.test_client()
  for state in ("warming up", "ready", "draining"):
    if state == "ready":
      lifecycle.set_ready()
    if state == "draining":
      lifecycle.start_draining()
    answer = client.get("/readyz")
    if state == "ready":
      assert answer.status_code == 200
      assert answer.get_json() == {"status": "ready"}
      assert "Retry-After" not in answer.headers
    else:
      assert answer.status_code == 503
      assert answer.get_json()["error"].startswith(state + ": ")
      assert answer.headers["Retry-After"] == "5"
    assert client.get("/healthz").status_code == 200


def test_a_request_past_the_queue_bound_is_told_to_come_back():
  from t2tlite.serve import batcher as batching
  _, app = _echo_app(batch_limits=batching.BatchLimits(max_queued_lines=1))
  answer = _post(app, "/api/translate", {"lines": ["a", "b"]})
  assert answer.status_code == 503
  assert answer.headers["Retry-After"] == "1"
  assert answer.get_json()["error"].endswith(
      "would pass the limit of 1 (--max_queued_lines); try again")
  assert _post(app, "/api/translate", {"lines": ["a"]}).get_json() == {
      "translations": ["A"]}


def test_metrics_count_requests_by_route_not_by_path():
  from prometheus_client.parser import text_string_to_metric_families
  _, app = _echo_app()
  client = app.test_client()
  for path in ("/healthz", "/nothing/1", "/nothing/2"):
    client.get(path)
  answer = client.get("/metrics")
  assert answer.content_type.startswith("text/plain")
  counts = {
      (sample.labels["path"], sample.labels["status"]): sample.value
      for family in text_string_to_metric_families(answer.get_data(True))
      for sample in family.samples
      if sample.name == "t2t_serve_requests_total"}
  assert counts == {("/healthz", "200"): 1.0, ("other", "404"): 2.0}
