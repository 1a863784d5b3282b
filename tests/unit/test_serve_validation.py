"""t2t-serve's request checks, its lifecycle and model-source lookup (no
model needed)."""
import json
import os
import re

import pytest

from t2tlite.serve import validation
from t2tlite.serve.lifecycle import Lifecycle
from t2tlite.serve.model_source import ModelSource

import command_flags

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
])
def test_translate_request_rejects(data, message):
  with pytest.raises(validation.BadRequest, match=message):
    validation.translate_request(data, LIMITS)


@pytest.mark.parametrize("data, message", [
    ({}, "line: missing"), ({"line": "  "}, "line: empty"),
    ({"line": 3}, "line: expected a string"),
    ({"line": "a", "lines": []}, "unknown field 'lines'"),
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
    ("busy_timeout_secs", -1.0, ">= 0"), ("port", 70000, "0..65535")])
def test_a_serving_limit_out_of_range_is_named(flag, value, expected):
  with command_flags.command_module("t2tlite.bin.t2t_serve",
                                    **{flag: value}) as command:
    with pytest.raises(ValueError) as error:
      command._limits()
  assert str(error.value) == f"--{flag}={value}: expected {expected}"


def test_app_answers_what_it_cannot_do_in_one_json_line(tmp_path):
  """Over an export whose run folder is gone: decode hparams of its own
  are a bad request (400), as are unknown pages and methods (404, 405)."""
  from t2tlite.decode.settings import DecodeHParams
  from t2tlite.export.layout import METADATA_FILE
  from t2tlite.serve import app as app_lib
  os.makedirs(tmp_path / "1" / os.path.dirname(METADATA_FILE))
  (tmp_path / "1" / "saved_model.pb").write_bytes(b"")
  (tmp_path / "1" / METADATA_FILE).write_text(json.dumps({
      "checkpoint": str(tmp_path / "gone" / "ckpt-1"),
      "problem": "translate_ende_wmt",
      "decode_hparams": vars(DecodeHParams(beam_size=2))}))
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
