r"""t2t-serve: a page and JSON API to translate with a model and see its
attention.

    t2t-serve --model=~/t2t_train/ende/export --port=8080
    # then open http://127.0.0.1:8080/

--model names an export (t2t-exporter's version folder, or the folder of
versions: the highest is served) or a run folder (t2t-trainer's
--output_dir). Translations with the export's decode hparams come from the
SavedModel; other decode hparams, the n-best and attention maps come from
the run folder the export was made from (see docs/web.md); with
--xla_lines=N, so do batches of at most N lines, searched with XLA.
--model=A,B,... serves an ensemble of run folders or checkpoints of runs
sharing a vocabulary (as t2t-decoder's --checkpoint_path), decoding from
the first one's run folder; its attention has one set of maps per member.

The API (JSON over HTTP; errors are {"error": "..."} with a 4xx status):

    POST /api/translate  {"lines": ["A dog runs."], "decode_hparams":
                          "beam_size=4", "n_best": true,
                          "target_prefixes": ["Ein Hund"]}
    POST /api/attention  {"line": "A dog runs.", "target_prefix": "Ein"}
    GET  /api/info
    GET  /healthz, /readyz, /metrics (Prometheus)

Translate requests that arrive within --batch_window_ms of each other and
share decode hparams are decoded as one batch (up to --max_batch_lines
lines and --max_batch_tokens tokens); at most --max_queued_lines lines
wait, and a request that does not fit gets HTTP 503 with Retry-After at
once.

The server listens on --host (127.0.0.1: this machine only); /readyz
answers 503 until the model is warmed up: a sentence, then a batch at
the batch limits, so that the memory of the largest batch is taken
before ready (--warm_up_full_batch). SIGTERM or SIGINT (Ctrl-C)
drains it: new requests get 503, those queued and computing are answered,
then it exits 0 (within --drain_secs; a second signal stops at once).
"""
import os
import signal
import sys
import threading
import time

from absl import flags
from absl import logging

from t2tlite.bin import common_flags, console, log_lines
# Light (no TensorFlow, no Flask): the flags' defaults are theirs.
from t2tlite.serve.batcher import BatchLimits, LINGER_MAX_SECS, LINGER_SHARE
from t2tlite.serve.validation import Limits
from t2tlite.train import progress

flags.DEFINE_string("model", None, "An export (version folder, or the folder "
                    "of versions), a run folder, or A,B,...: an ensemble "
                    "of run folders or checkpoints sharing a vocabulary.")
flags.DEFINE_string("host", "127.0.0.1", "Address to listen on (0.0.0.0: "
                    "every interface; the server has no authentication).")
flags.DEFINE_integer("port", 8080, "TCP port (0: any free port, printed).")
flags.DEFINE_integer("threads", 0, "Threads answering HTTP requests (each "
                     "waiting request holds one); 0: enough for "
                     "--max_queued_lines plus a batch, and 8 more.")
flags.DEFINE_integer("max_connections", 1000, "Open client connections "
                     "at most; more wait unaccepted.")
_LIMITS, _BATCH_LIMITS = Limits(), BatchLimits()
flags.DEFINE_float("batch_window_ms", _BATCH_LIMITS.window_secs * 1000,
                   "How long a forming batch waits for another translate "
                   "request to join it (while requests keep coming, at most "
                   f"{LINGER_SHARE:.0%} of the last batch's decode time, up "
                   f"to {LINGER_MAX_SECS * 1000:g} ms, if longer).")
flags.DEFINE_integer("max_batch_lines", _BATCH_LIMITS.max_lines, "Most "
                     "lines decoded in one batch (a larger request is "
                     "decoded alone).")
flags.DEFINE_integer("max_batch_tokens", _BATCH_LIMITS.max_tokens, "Most "
                     "source tokens in one batch, padding included (lines "
                     "x the longest; tokens estimated as one per 4 bytes).")
flags.DEFINE_integer("max_queued_lines", _BATCH_LIMITS.max_queued_lines,
                     "Most lines waiting for a batch; a request that does "
                     "not fit gets HTTP 503.")
flags.DEFINE_float("request_timeout_secs", _BATCH_LIMITS.timeout_secs,
                   "A translate request still queued after this gets HTTP "
                   "503.")
flags.DEFINE_float("drain_secs", 30.0, "On SIGTERM, how long queued and "
                   "computing requests may take before the server exits.")
flags.DEFINE_integer("max_request_bytes", _LIMITS.max_request_bytes,
                     "Largest request body.")
flags.DEFINE_integer("max_lines", _LIMITS.max_lines, "Most lines in one "
                     "translate request.")
flags.DEFINE_integer("max_line_chars", _LIMITS.max_line_chars, "Most "
                     "characters in one line.")
flags.DEFINE_integer("max_beam_size", _LIMITS.max_beam_size, "Largest "
                     "beam_size a request may ask for in its decode_hparams "
                     "(and num_samples, when it samples).")
flags.DEFINE_integer("max_concurrent", _LIMITS.max_concurrent, "Attention "
                     "requests computing at once; more wait up to "
                     "--busy_timeout_secs, then get HTTP 503.")
flags.DEFINE_float("busy_timeout_secs", _LIMITS.busy_timeout_secs, "How "
                   "long an attention request waits for a free computing "
                   "slot.")
flags.declare_key_flag("t2t_usr_dir")
flags.DEFINE_boolean("warm_up", True, "Translate one sentence before "
                     "/readyz says ready, so the first request is not slow.")
flags.DEFINE_boolean("warm_up_full_batch", True, "With --warm_up, also "
                     "decode one batch at --max_batch_lines and "
                     "--max_batch_tokens before ready: the server takes the "
                     "memory of its largest batch at start, not under its "
                     "first load (on a transformer_base-sized model, about "
                     "10 s more on 2 cores).")

flags.DEFINE_integer("xla_lines", 0, "Batches of at most this many lines "
                     "with the model's own decode hparams (no target "
                     "prefixes, no n-best) are searched by the run folder's "
                     "model compiled with XLA (decode hparam xla_lines): the "
                     "same answers, a small model's lone line about twice "
                     "as fast; each new shape compiles once, in seconds "
                     "(the warm-up's line before ready), kept for later "
                     "starts (docs/decoding.md). Needs the run folder; not "
                     "with int8. 0: the SavedModel's search.")

FLAGS = flags.FLAGS


def _limits():
  for name in ("max_request_bytes", "max_lines", "max_line_chars",
               "max_beam_size", "max_concurrent", "max_connections",
               "max_batch_lines", "max_batch_tokens", "max_queued_lines"):
    if FLAGS[name].value < 1:
      raise ValueError(f"--{name}={FLAGS[name].value}: expected >= 1")
  for name in ("threads", "batch_window_ms", "request_timeout_secs",
               "drain_secs", "busy_timeout_secs", "xla_lines"):
    if FLAGS[name].value < 0:
      raise ValueError(f"--{name}={FLAGS[name].value}: expected >= 0")
  if not 0 <= FLAGS.port < 65536:
    raise ValueError(f"--port={FLAGS.port}: expected 0..65535")
  return Limits(max_request_bytes=FLAGS.max_request_bytes,
                max_lines=FLAGS.max_lines,
                max_line_chars=FLAGS.max_line_chars,
                max_beam_size=FLAGS.max_beam_size,
                max_concurrent=FLAGS.max_concurrent,
                busy_timeout_secs=FLAGS.busy_timeout_secs)


def _batch_limits():
  return BatchLimits(window_secs=FLAGS.batch_window_ms / 1000,
                     max_lines=FLAGS.max_batch_lines,
                     max_tokens=FLAGS.max_batch_tokens,
                     max_queued_lines=FLAGS.max_queued_lines,
                     timeout_secs=FLAGS.request_timeout_secs)


def _http_threads():
  # Each waiting request holds a thread: enough for a full queue, a batch
  # computing, and a few to answer 503s, /metrics and /readyz meanwhile.
  return FLAGS.threads or FLAGS.max_queued_lines + FLAGS.max_batch_lines + 8


def _listen(app, limits):
  from t2tlite.serve import http_server
  return http_server.create_server(
      app, limits, host=FLAGS.host, port=FLAGS.port, threads=_http_threads(),
      connection_limit=FLAGS.max_connections,
      # poll(), not select(): more than 1024 open sockets.
      asyncore_use_poll=True,
      # Keep reading a connection while its request waits, so that a
      # client that closes it is seen (waitress.client_disconnected).
      channel_request_lookahead=1,
      ident="t2t-serve")


# The web server's packages, brought by the `serving` extra.
SERVING_EXTRA = "pip install 't2tlite[serving]'"


def _web_packages_missing():
  """The first of the serving extra's packages that cannot be imported, or
  None."""
  for name in ("waitress", "flask", "prometheus_client"):
    try:
      __import__(name)
    except ImportError:
      return name
  return None


def _flushed(server):
  """Whether every connection has sent what its answers wrote."""
  return not any(getattr(channel, "total_outbufs_len", 0)
                 for channel in list(server._map.values()))  # noqa: SLF001


class _Drain:
  """SIGTERM/SIGINT: the first starts a drain (new requests get 503, the
  queue is decoded and answered), after which the server stops; a second
  signal stops it at once. Exit status 0 either way."""

  def __init__(self, server, serving):
    self.server, self.serving = server, serving
    self.done = False

  def on_signal(self, signum, frame):
    del frame
    if self.done or not self.serving.lifecycle.start_draining():
      raise SystemExit(0)  # waitress's loop ends its workers on SystemExit
    _say(f"{signal.Signals(signum).name}, draining")
    threading.Thread(target=self._drain, daemon=True).start()

  def _drain(self):
    deadline = time.monotonic() + FLAGS.drain_secs
    if not self.serving.drain(FLAGS.drain_secs):
      logging.warning("requests still computing after "
                      "--drain_secs=%g s; stopping", FLAGS.drain_secs)
    # The last answers leave through waitress's loop: let it send them.
    while not _flushed(self.server) and time.monotonic() < deadline:
      time.sleep(0.05)
    time.sleep(0.1)
    self.done = True
    os.kill(os.getpid(), signal.SIGTERM)


def _say(message):
  """A line on stdout, stamped as the log lines are (the URL, the warm-up,
  draining: what a person or a script waits for)."""
  print(log_lines.stamped("t2t_serve", message), flush=True)


def _warm_up(source, lifecycle, url, sentence, full_batch):
  """Translates `sentence`, then the lines `full_batch` (None: none),
  then says ready."""
  try:
    if sentence:
      source.translate([sentence])
    if full_batch:
      start = time.monotonic()
      source.translate(full_batch)
      _say(f"warm-up: a full batch ({len(full_batch)} lines of "
           f"{len(full_batch[0])} characters) in "
           f"{progress.format_seconds(time.monotonic() - start)}")
  except Exception as error:  # noqa: BLE001  (the server cannot serve)
    logging.exception("warm-up failed")
    print(f"t2t-serve: error: warm-up failed: {error}", file=sys.stderr,
          flush=True)
    os._exit(1)  # noqa: SLF001  (from this thread: waitress holds the main)
  lifecycle.set_ready()
  _say(f"serving {source.saved_model_dir or source.run_folder} on {url}")


def _run():
  missing = _web_packages_missing()
  if missing:
    # A missing extra, not a bug: one line, exit code 2 (a usage error).
    sys.stderr.write(f"t2t-serve: error: the web server needs the serving "
                     f"extra ({missing} is not installed): {SERVING_EXTRA}\n")
    return 2
  limits = _limits()
  from t2tlite.serve.app import full_batch, make_app
  from t2tlite.serve.lifecycle import Lifecycle
  from t2tlite.serve.model_source import ModelSource
  common_flags.load_plugins()
  source = ModelSource.open(FLAGS.model)
  if source.run_folder:
    common_flags.load_run_plugins(source.run_folder)
  try:
    source.search_small_batches_with_xla(FLAGS.xla_lines)
  except ValueError as error:
    raise console.CommandError(f"--xla_lines={FLAGS.xla_lines}: "
                               f"{error}") from None
  # Before TensorFlow runs (as t2t-decoder): the searches of the model's
  # own decode hparams (the export's, else the problem's) run best on cores
  # of their own. Settled once: their Decoder decodes as settled here;
  # other hparams are settled as their Decoder is made.
  source.settle_base(set_threads=True)
  batch_limits = _batch_limits()
  app = make_app(source, limits, batch_limits, Lifecycle())
  serving = app.extensions["t2tlite"]
  try:
    # Before loading the model: a port in use fails at once.
    server = _listen(app, limits)
  except OSError as error:  # the port is taken, or the host is not ours
    raise console.CommandError(
        f"--host={FLAGS.host} --port={FLAGS.port}: cannot listen there "
        f"({error.strerror or error})") from None
  drain = _Drain(server, serving)
  signal.signal(signal.SIGTERM, drain.on_signal)
  signal.signal(signal.SIGINT, drain.on_signal)
  url = f"http://{FLAGS.host}:{server.effective_port}/"
  # Listening while the model warms up: /healthz answers, /readyz says 503.
  _say(f"warming up at {url} (/readyz: 503 until ready)")
  sentence = "warm up" if FLAGS.warm_up else None
  largest = (full_batch(batch_limits, limits.max_line_chars)
             if FLAGS.warm_up and FLAGS.warm_up_full_batch else None)
  threading.Thread(target=_warm_up, args=(source, serving.lifecycle, url,
                                          sentence, largest),
                   daemon=True).start()
  try:
    server.run()
  finally:
    server.close()
  _say("stopped")


def main():
  console.run(_run, __name__, required=["model"],
              path_flags=["model", "t2t_usr_dir"])


if __name__ == "__main__":
  main()
