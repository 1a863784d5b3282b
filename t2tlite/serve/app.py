"""t2t-serve's web application (Flask): the page at / and its JSON API.

    GET  /                 the page (static/index.html, app.js, style.css)
    GET  /api/info         the model: problem, default decode hparams,
                           layers, heads, the request limits
    POST /api/translate    {"lines": [...], "decode_hparams": "...",
                            "n_best": false, "target_prefixes": [...]}
                           -> {"translations": [...]} (+ "n_best": per line
                           [{"text", "score"}, ...] best first, or the
                           samples in order when sampling, on request)
    POST /api/attention    {"line": "...", "decode_hparams": "...",
                            "target_prefix": "..."}
                           -> {"source", "target", "pieces": {"source",
                           "target", "decoder_input"}, "attention":
                           {"encoder", "decoder_self", "encdec": [layer]
                           [head][query][key]}} (+ for an ensemble
                           "members": per member {"attention": ...},
                           "attention" being the first's)
    GET  /healthz          200 while the process answers
    GET  /readyz           200 when the model is warmed up; 503 while
                           warming up or draining
    GET  /metrics          Prometheus' text format (serve/metrics.py)

Translate requests go through the batcher (serve/batcher.py): lines of
concurrent requests with the same decode hparams are decoded together,
each line with its own target prefix. Requests asking for the n-best are
decoded in a batch of their own: a translation does not depend on the
batch's other lines, but its score may differ in the last float32 bits,
and an answer must be what it would be alone.

"target_prefixes" (optional, one per line, "" for none): each translation
starts with its line's prefix; "target_prefix" shows the attention of the
output that starts with it.

Every error is {"error": "one line"} with a 4xx status (503 with
Retry-After when the queue is full, warming up or draining); the server
keeps serving.
"""
import dataclasses
import os
import threading
import time
import typing

import flask

from t2tlite.serve import batcher as batching
from t2tlite.serve import validation as checks
from t2tlite.serve.lifecycle import Lifecycle
from t2tlite.serve.metrics import CONTENT_TYPE, ServeMetrics
from t2tlite.serve.model_source import PrefixError, RequestError

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "static")
_DIGITS = 4  # attention weights sent with 4 decimals: a smaller answer


class Busy(Exception):
  """More attention requests compute than --max_concurrent allows (HTTP
  503)."""


class NotReady(Exception):
  """Warming up or draining (HTTP 503)."""


@dataclasses.dataclass(frozen=True)
class TranslateKey:
  """What lines must share to be decoded in one batch: the decode hparams
  (as the request's one parse made them: "beam_size=4" and "beam_size=4 "
  are one key, and the batch decodes with them as they are) and whether the
  n-best is returned. Per-line fields travel with the lines, not here."""
  hparams: object  # DecodeHParams
  n_best: bool


@dataclasses.dataclass
class Serving:
  """The parts t2t-serve drives besides the app (app.extensions["t2tlite"]).

  attention_done: callable(timeout_secs) -> whether the attention requests
    computing (not batched: `batcher` does not see them) finished within
    the timeout; for a drain, once new ones are refused.
  """
  batcher: batching.Batcher
  lifecycle: Lifecycle
  metrics: ServeMetrics
  attention_done: typing.Callable[[float], bool]

  def drain(self, timeout_secs):
    """Once new requests are refused (`Lifecycle.start_draining`): decodes
    the queued translations and waits for the attention computing, within
    timeout_secs in all. Returns whether both finished."""
    deadline = time.monotonic() + timeout_secs
    drained = self.batcher.drain(timeout_secs)
    attention = self.attention_done(max(0.0, deadline - time.monotonic()))
    return drained and attention


RETRY_AFTER_SECS = {batching.QueueFull: 1, batching.TimedOut: 1,
                    batching.Draining: 5, NotReady: 5}


@dataclasses.dataclass(frozen=True)
class TranslateLine:
  """A batch's item: a line and its target prefix ("" for none)."""
  text: str
  prefix: str = ""


def estimated_tokens(item):
  """A line's source tokens, estimated (one per 4 bytes of UTF-8, and
  EOS): what a batch's --max_batch_tokens bounds."""
  return len(item.text.encode("utf-8")) // 4 + 1


def full_batch(batch_limits, max_line_chars):
  """The largest batch the batcher forms of small requests, as lines:
  batch_limits.max_lines lines, each as long as batch_limits.max_tokens
  lets every line of such a batch be (by estimated_tokens; at most
  max_line_chars). Decoded once at start, it makes the server take the
  memory of its largest batch before it is ready, not under load."""
  tokens = max(1, batch_limits.max_tokens // batch_limits.max_lines)
  chars = min(4 * (tokens - 1), max_line_chars)
  line = ("warm up " * (chars // 8 + 1))[:chars]
  # A space at the cut would be stripped somewhere: a full stop instead.
  line = (line[:-1] + "." if line.endswith(" ") else line) or "warm up"
  return [line] * batch_limits.max_lines


def batch_translator(source):
  """The batcher's decode: (TranslateKey, TranslateLines) -> per line
  (translation, n-best or None), each output starting with its line's
  prefix.

  A batch one of whose prefixes cannot be (an export's search finds it:
  a piece the vocabulary lacks, longer than its output may hold; the run
  folder's are checked before batching, `ModelSource.check_prefixes`) is
  decoded again line by line, so that only the request that sent it gets
  its RequestError (as its line's result), not the others batched with
  it.
  """
  def translate(key, items):
    lines = [item.text for item in items]
    prefixes = [item.prefix for item in items]
    if not any(prefixes):
      prefixes = None
    translations, beams = source.translate(lines, key.hparams, key.n_best,
                                           prefixes)
    return list(zip(translations, beams or [None] * len(lines)))

  def decode(key, items):
    try:
      return translate(key, items)
    except RequestError as error:
      if not any(item.prefix for item in items):
        raise
      if len(items) == 1:
        return [error]
    results = []
    for item in items:
      try:
        results.extend(translate(key, [item]))
      except RequestError as error:
        results.append(error)
    return results
  return decode


def _rounded(heads):
  """float numpy [heads, queries, keys] -> nested lists, rounded."""
  return heads.astype("float64").round(_DIGITS).tolist()


def _attention_answer(maps):
  """/api/attention's JSON response of a model_source.Attention."""
  def rounded(weights):
    return {kind: [_rounded(layer) for layer in layers]
            for kind, layers in weights.items()}
  answer = {"source": maps.source, "target": maps.target,
            "pieces": maps.pieces, "attention": rounded(maps.weights)}
  if maps.members is not None:
    answer["members"] = [{"attention": rounded(weights)}
                         for weights in maps.members]
  return flask.jsonify(answer)


def make_app(source, limits, batch_limits=None, lifecycle=None):
  """The Flask app serving `source` (a ModelSource) under `limits`
  (validation.Limits), batching translations within `batch_limits`
  (batcher.BatchLimits). Its app.extensions["t2tlite"] is a `Serving`;
  its batcher is started. lifecycle: default ready at once."""
  app = flask.Flask(__name__, static_folder=STATIC_DIR,
                    static_url_path="/static")
  app.config["MAX_CONTENT_LENGTH"] = limits.max_request_bytes
  app.json.sort_keys = False
  slots = threading.BoundedSemaphore(limits.max_concurrent)
  lifecycle = lifecycle or Lifecycle(ready=True)
  metrics = ServeMetrics()
  batcher = batching.Batcher(batch_translator(source),
                             batch_limits or batching.BatchLimits(),
                             estimated_tokens, metrics).start()
  metrics.track_queue(batcher.queued_lines)

  def attention_done(timeout_secs):
    # Every slot free at once: no attention request computing.
    deadline = time.monotonic() + timeout_secs
    taken = 0
    try:
      while taken < limits.max_concurrent and slots.acquire(
          timeout=max(0.0, deadline - time.monotonic())):
        taken += 1
      return taken == limits.max_concurrent
    finally:
      for _ in range(taken):
        slots.release()

  app.extensions["t2tlite"] = Serving(batcher, lifecycle, metrics,
                                      attention_done)

  def error(status, message, retry_after=None):
    response = flask.jsonify(error=message)
    response.status_code = status
    if retry_after is not None:
      response.headers["Retry-After"] = str(retry_after)
    return response

  def refuse_unless_ready():
    reason = lifecycle.not_ready()
    if reason:
      raise NotReady(reason + "; try again")

  @app.before_request
  def arrived():
    flask.g.arrived = time.monotonic()

  @app.after_request
  def counted(response):
    rule = flask.request.url_rule
    metrics.request(rule.rule if rule else "other", response.status_code,
                    time.monotonic() - flask.g.get("arrived", time.monotonic()))
    return response

  def computing(work):
    # Bounded work (attention maps; translations go through the batcher):
    # at most max_concurrent at a time; the rest wait a while, then are
    # told to come back.
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

  @app.get("/healthz")
  def healthz():
    return flask.jsonify(status="alive")

  @app.get("/readyz")
  def readyz():
    reason = lifecycle.not_ready()
    if reason:
      return error(503, reason, RETRY_AFTER_SECS[NotReady])
    return flask.jsonify(status="ready")

  @app.get("/metrics")
  def metrics_page():
    return flask.Response(metrics.render(), content_type=CONTENT_TYPE)

  @app.post("/api/translate")
  def translate():
    refuse_unless_ready()
    data = body()
    lines, overrides, n_best, prefixes = checks.translate_request(data,
                                                                  limits)
    # A mixture's model: each line gets its target language's tag.
    lines = source.tag_lines(lines,
                             checks.target_languages(data, len(lines)))
    hp = source.decode_hparams(overrides)
    checks.check_search_width(hp, limits)
    source.check_prefixes(lines, hp, n_best, prefixes)
    # Under waitress (channel_request_lookahead > 0) this tells whether
    # the client closed its connection; a dropped request is not decoded.
    gone = flask.request.environ.get("waitress.client_disconnected")
    items = [TranslateLine(line, prefix) for line, prefix in
             zip(lines, prefixes or [""] * len(lines))]
    results = batcher.submit(TranslateKey(hp, n_best), items,
                             alone=n_best, gone=gone)
    for index, (item, result) in enumerate(zip(items, results)):
      if isinstance(result, PrefixError):  # this request's own prefix
        raise result.named(index, item.prefix)
      if isinstance(result, RequestError):
        raise result
    answer = {"translations": [text for text, _ in results]}
    if n_best:
      answer["n_best"] = [beams for _, beams in results]
    return flask.jsonify(answer)

  @app.post("/api/attention")
  def attention():
    refuse_unless_ready()
    data = body()
    line, overrides, prefix = checks.attention_request(data, limits)
    line, = source.tag_lines([line], checks.target_languages(data, 1))
    hp = source.decode_hparams(overrides)
    checks.check_search_width(hp, limits)
    # The answer is made while the slot is held, so that a drain that
    # waits for the slots (attention_done) finds it made.
    return computing(lambda: _attention_answer(
        source.attention(line, hp, prefix)))

  @app.errorhandler(checks.BadRequest)
  @app.errorhandler(RequestError)
  def bad_request(e):
    return error(400, str(e))

  @app.errorhandler(Busy)
  def busy(e):
    return error(503, str(e))

  @app.errorhandler(NotReady)
  @app.errorhandler(batching.Rejected)
  def not_taken(e):
    # ClientGone's answer goes nowhere; the others come back later.
    return error(503, str(e), RETRY_AFTER_SECS.get(type(e)))

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
    return error(413, checks.too_large_message(limits))

  return app
