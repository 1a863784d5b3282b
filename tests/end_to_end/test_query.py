"""t2t-query: PredictRequests to TF Serving, tested against a stand-in.

TF Serving's tensorflow_model_server cannot be installed here; a real gRPC
PredictionService on 127.0.0.1 that runs the exported SavedModel through the
TF1 loader (tests/support/serving_stand_in.py) stands in for it.
"""
import contextlib
import io
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

pytest.importorskip("tensorflow_serving",
                    reason="tensorflow-serving-api is not installed (pip "
                    "install 't2tlite[serving]')")
import grpc  # noqa: E402
from tensorflow_serving.apis import predict_pb2  # noqa: E402

from t2tlite import run_dir  # noqa: E402
from t2tlite.data.vocab import Vocabulary  # noqa: E402
from t2tlite.decode.decoding import Decoder  # noqa: E402
from t2tlite.decode.machine import settle  # noqa: E402
from t2tlite.decode.settings import DecodeHParams  # noqa: E402
from t2tlite.export import query  # noqa: E402

import command_flags  # noqa: E402
from run_folder import multi30k_lines  # noqa: E402
import serving_stand_in  # noqa: E402
from shared_export import DECODE, exported_run_folder  # noqa: E402

NAME = "ende"
# Whichever test comes first builds the module's export and stand-in (a
# minute or two on a loaded machine): the limit holds that as well.
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
  """(server address, Decoder with the exported settings, the stand-in's
  servicer): the stand-in serves the session's shared export (DECODE;
  tests/support/shared_export.py, read only), runs for the module's tests
  and is stopped after them."""
  folder = exported_run_folder(tmp_path_factory)
  model, info, _ = run_dir.load_trained_model(folder)
  vocab = Vocabulary.from_file(info.vocab_file)
  stand_in = serving_stand_in.start(NAME, os.path.join(folder, "export"))
  try:
    # The session's first run optimizes the graph (tens of seconds on a
    # loaded machine): done here, so that no test's deadline depends on
    # whether it is the first to query.
    query.query(stand_in.address, NAME, ["A dog."], timeout=300)
    yield (stand_in.address,
           Decoder(model, vocab, settle(DecodeHParams.parse(DECODE))),
           stand_in.servicer)
  finally:
    stand_in.server.stop(None)


@contextlib.contextmanager
def failing(servicer, name, code, details):
  """The stand-in answers requests for servable `name` with (code,
  details) inside the block."""
  servicer.fail_for[name] = (code, details)
  try:
    yield
  finally:
    del servicer.fail_for[name]


def test_request_holds_text_as_a_string_batch():
  request = query.make_predict_request(["A dog.", "Zwölf"], NAME,
                                       version=3)
  assert request.model_spec.name == NAME
  assert request.model_spec.signature_name == "serving_default"
  assert request.model_spec.version.value == 3
  tensor = request.inputs["inputs"]
  assert tensor.dtype == tf.string.as_datatype_enum
  assert tf.make_ndarray(tensor).tolist() == [b"A dog.",
                                              "Zwölf".encode("utf-8")]


def _response(outputs, scores):
  response = predict_pb2.PredictResponse()
  response.outputs["outputs"].CopyFrom(
      tf.make_tensor_proto(np.array(outputs, dtype=object)))
  response.outputs["scores"].CopyFrom(
      tf.make_tensor_proto(np.array(scores, dtype=np.float32)))
  return response


def test_parse_response_of_best_outputs_and_of_beams():
  best = query.parse_predict_response(
      _response(["Ein Hund.".encode(), b"\xff"], [-1.5, 0.0]))
  assert best == [query.QueryResult("Ein Hund.", -1.5),
                  query.QueryResult("\ufffd", 0.0)]
  assert query.format_result(best[0], with_scores=True) == "Ein Hund.\t-1.5000"
  beams = query.parse_predict_response(
      _response([[b"a", b"b"], [b"c", b"d"]], [[-1, -2], [-3, -4]]))
  assert beams[1] == query.QueryResult(["c", "d"], [-3.0, -4.0])
  assert query.format_result(beams[0]) == "a\t-1.0000\tb\t-2.0000"


def test_querying_without_the_serving_api_names_the_extra(monkeypatch):
  # As where tensorflow-serving-api is not installed.
  for name in ("tensorflow_serving", "tensorflow_serving.apis",
               "tensorflow_serving.apis.predict_pb2",
               "tensorflow_serving.apis.prediction_service_pb2_grpc"):
    monkeypatch.setitem(sys.modules, name, None)
  with pytest.raises(ImportError) as error:
    query.serving_apis()
  assert str(error.value).startswith(
      "Querying TF Serving needs the tensorflow-serving-api package: pip "
      "install 't2tlite[serving]' (or tensorflow-serving-api matching your "
      "TensorFlow version). (")


def test_parse_response_without_text_outputs_names_the_flag():
  response = predict_pb2.PredictResponse()
  response.outputs["logits"].CopyFrom(tf.make_tensor_proto([1.0]))
  with pytest.raises(ValueError, match="signature_name"):
    query.parse_predict_response(response)
  # Outputs without their scores are no text signature's answer either.
  response.outputs["outputs"].CopyFrom(tf.make_tensor_proto([b"a"]))
  with pytest.raises(ValueError, match=r"^The response has no scores "
                     r"output \(it has \['logits', 'outputs'\]\)"):
    query.parse_predict_response(response)


def test_query_returns_the_decoder_outputs(served):
  address, decoder, servicer = served
  lines = multi30k_lines("en", 3) + [""]
  expected, scores = decoder.decode_lines(lines, progress=False)
  results = query.query(address, NAME, lines, timeout=60)
  assert [r.output for r in results] == expected
  assert [r.score for r in results] == pytest.approx(scores, abs=1e-3)
  assert servicer.requests[-1] == (NAME, "serving_default", None)


# A status and details of the test's choosing: what t2t-query reports is
# the server's answer, whatever it is.
ERROR_CODE = grpc.StatusCode.RESOURCE_EXHAUSTED
ERROR_DETAILS = "test_query's own error: 7 requests queued"


def test_query_sends_the_model_spec_and_raises_the_servers_status(served):
  address, _, servicer = served
  with failing(servicer, "other", ERROR_CODE, ERROR_DETAILS):
    with pytest.raises(grpc.RpcError) as error:
      query.query(address, "other", ["A dog."], signature_name="sig_x",
                  version=7, timeout=30)
  assert error.value.code() == ERROR_CODE
  assert error.value.details() == ERROR_DETAILS
  assert servicer.requests[-1] == ("other", "sig_x", 7)


def t2t_query(*args, stdin=None):
  """Starts t2t-query; returns the Popen (stdin written and closed)."""
  proc = subprocess.Popen(
      [sys.executable, "-m", "t2tlite.bin.t2t_query", *args],
      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True)
  return proc, stdin


def test_t2t_query_command(served):
  address, decoder, servicer = served
  lines = multi30k_lines("en", 2)
  with failing(servicer, "missing", ERROR_CODE, ERROR_DETAILS):
    started = [
        t2t_query(f"--server={address}", f"--servable_name={NAME}",
                  f"--inputs_once={lines[0]}"),
        t2t_query(f"--server={address}", f"--servable_name={NAME}",
                  "--print_scores", "--timeout=60",
                  stdin="\n".join([lines[1], "", lines[0]]) + "\n"),
        t2t_query(f"--server={address}", "--servable_name=missing",
                  "--inputs_once=A dog."),
    ]
    try:
      done = [proc.communicate(stdin or "", timeout=200) + (proc.returncode,)
              for proc, stdin in started]
    finally:
      for proc, _ in started:
        if proc.poll() is None:
          proc.kill()
          proc.wait()
  (once, once_err, once_code), (many, many_err, many_code), (
      missing_out, missing_err, missing_code) = done
  expected, scores = decoder.decode_lines([lines[1], "", lines[0]],
                                          progress=False)
  assert once_code == 0, once_err[-3000:]
  assert once == expected[2] + "\n"
  assert many_code == 0, many_err[-3000:]
  printed = [line.split("\t") for line in many.splitlines()]
  assert [p[0] for p in printed] == expected
  assert [float(p[1]) for p in printed] == pytest.approx(scores, abs=1e-3)
  assert missing_code == 1 and missing_out == ""
  assert missing_err.strip().splitlines()[-1] == (
      f"t2t-query: error: --server={address} --servable_name=missing: "
      f"{ERROR_CODE.name}: {ERROR_DETAILS}")
  assert "Traceback" not in missing_err


def test_query_lines_of_inputs_once_and_of_stdin(monkeypatch):
  monkeypatch.setattr(sys, "stdin", io.StringIO("  A dog. \n\nTwo men."))
  with command_flags.command_module("t2tlite.bin.t2t_query") as command:
    # Each line as typed, spaces kept; an empty line is sent too.
    assert list(command._lines()) == ["  A dog. ", "", "Two men."]
  # --inputs_once is sent once, even empty; standard input is not read.
  for text in ("A cat.", ""):
    with command_flags.command_module("t2tlite.bin.t2t_query",
                                      inputs_once=text) as command:
      assert list(command._lines()) == [text]
