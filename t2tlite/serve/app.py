"""t2t-serve's web application (Flask): the page at / and its JSON API.

    GET  /                 the page (static/index.html, app.js, style.css)
    GET  /api/info         the model: problem, default decode hparams,
                           layers, heads, the request limits
    POST /api/translate    {"lines": [...], "decode_hparams": "...",
                            "n_best": false, "target_prefixes": [...]}
                           -> {"translations": [...]} (+ "n_best": per line
                           [{"text", "score"}, ...] best first, on request)
    POST /api/attention    {"line": "...", "decode_hparams": "...",
                            "target_prefix": "..."}
                           -> {"source", "target", "pieces": {"source",
                           "target", "decoder_input"}, "attention":
                           {"encoder", "decoder_self", "encdec": [layer]
                           [head][query][key]}}

"target_prefixes" (optional, one per line, "" for none): each translation
starts with its line's prefix; "target_prefix" shows the attention of the
output that starts with it.

Every error is {"error": "one line"} with a 4xx status (503 when busy);
the server keeps serving.
"""
import os
import threading

import flask

from t2tlite.serve import validation as checks
from t2tlite.serve.model_source import RequestError

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "static")
_DIGITS = 4  # attention weights sent with 4 decimals: a smaller answer


class Busy(Exception):
  """More requests compute than --max_concurrent allows (HTTP 503)."""


def _rounded(heads):
  """float numpy [heads, queries, keys] -> nested lists, rounded."""
  return heads.astype("float64").round(_DIGITS).tolist()


def make_app(source, limits):
  """The Flask app serving `source` (a ModelSource) under `limits`
  (validation.Limits)."""
  app = flask.Flask(__name__, static_folder=STATIC_DIR,
                    static_url_path="/static")
  app.config["MAX_CONTENT_LENGTH"] = limits.max_request_bytes
  app.json.sort_keys = False
  slots = threading.BoundedSemaphore(limits.max_concurrent)

  def error(status, message):
    return flask.jsonify(error=message), status

  def computing(work):
    # Bounded work: the model computes at most max_concurrent requests at a
    # time; the rest wait a while, then are told to come back.
    if not slots.acquire(timeout=limits.busy_timeout_secs):
      raise Busy(f"busy: {limits.max_concurrent} request(s) computing "
                 "(--max_concurrent); try again")
    try:
      return work()
    finally:
      slots.release()

  def body():
    return checks.parse_body(flask.request.get_data(cache=False))

  @app.get("/")
  def page():
    return flask.send_from_directory(STATIC_DIR, "index.html")

  @app.get("/api/info")
  def info():
    return flask.jsonify(model=source.info(), limits=vars(limits))

  @app.post("/api/translate")
  def translate():
    lines, overrides, n_best, prefixes = checks.translate_request(body(),
                                                                  limits)
    checks.check_beam_size(source.decode_hparams(overrides), limits)
    translations, beams = computing(
        lambda: source.translate(lines, overrides, n_best, prefixes))
    answer = {"translations": translations}
    if n_best:
      answer["n_best"] = beams
    return flask.jsonify(answer)

  @app.post("/api/attention")
  def attention():
    line, overrides, prefix = checks.attention_request(body(), limits)
    checks.check_beam_size(source.decode_hparams(overrides), limits)
    maps = computing(lambda: source.attention(line, overrides, prefix))
    return flask.jsonify(
        source=maps.source, target=maps.target, pieces=maps.pieces,
        attention={kind: [_rounded(layer) for layer in layers]
                   for kind, layers in maps.weights.items()})

  @app.errorhandler(checks.BadRequest)
  @app.errorhandler(RequestError)
  def bad_request(e):
    return error(400, str(e))

  @app.errorhandler(Busy)
  def busy(e):
    return error(503, str(e))

  @app.errorhandler(404)
  def not_found(e):
    del e
    return error(404, f"no such page: {flask.request.path}")

  @app.errorhandler(405)
  def wrong_method(e):
    del e
    return error(405, f"{flask.request.method} is not allowed on "
                 f"{flask.request.path}")

  @app.errorhandler(413)
  def too_large(e):
    del e
    return error(413, f"request body larger than {limits.max_request_bytes} "
                 "bytes (--max_request_bytes)")

  return app
