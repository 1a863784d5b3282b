r"""t2t-serve: a page and JSON API to translate with a model and see its
attention.

    t2t-serve --model=~/t2t_train/ende/export --port=8080
    # then open http://127.0.0.1:8080/

--model names an export (t2t-exporter's version folder, or the folder of
versions: the highest is served) or a run folder (t2t-trainer's
--output_dir). Translations with the export's decode hparams come from the
SavedModel; other decode hparams, the n-best and attention maps come from
the run folder the export was made from (see docs/web.md).

The API (JSON over HTTP; errors are {"error": "..."} with a 4xx status):

    POST /api/translate  {"lines": ["A dog runs."], "decode_hparams":
                          "beam_size=4", "n_best": true}
    POST /api/attention  {"line": "A dog runs."}
    GET  /api/info

The server listens on --host (127.0.0.1: this machine only) and stops
cleanly on SIGTERM or SIGINT (Ctrl-C).
"""
import signal
import sys

from absl import flags
from absl import logging

from t2tlite.bin import common_flags, console, lazy

# TensorFlow loads when this is first used, after the flags are parsed.
machine = lazy.module("t2tlite.decode.machine")

flags.DEFINE_string("model", None, "An export (version folder, or the folder "
                    "of versions) or a run folder.")
flags.DEFINE_string("host", "127.0.0.1", "Address to listen on (0.0.0.0: "
                    "every interface; the server has no authentication).")
flags.DEFINE_integer("port", 8080, "TCP port (0: any free port, printed).")
flags.DEFINE_integer("threads", 4, "Threads answering HTTP requests.")
flags.DEFINE_integer("max_request_bytes", 65536, "Largest request body.")
flags.DEFINE_integer("max_lines", 32, "Most lines in one translate request.")
flags.DEFINE_integer("max_line_chars", 1000, "Most characters in one line.")
flags.DEFINE_integer("max_beam_size", 16, "Largest beam_size a request may "
                     "ask for in its decode_hparams.")
flags.DEFINE_integer("max_concurrent", 1, "Requests computing at once; more "
                     "wait up to --busy_timeout_secs, then get HTTP 503.")
flags.DEFINE_float("busy_timeout_secs", 30.0, "How long a request waits for "
                   "a free computing slot.")
flags.declare_key_flag("t2t_usr_dir")
flags.DEFINE_boolean("warm_up", True, "Translate one sentence before "
                     "listening, so the first request is not slow.")

FLAGS = flags.FLAGS


def _limits():
  from t2tlite.serve.validation import Limits
  for name in ("threads", "max_request_bytes", "max_lines", "max_line_chars",
               "max_beam_size", "max_concurrent"):
    if FLAGS[name].value < 1:
      raise ValueError(f"--{name}={FLAGS[name].value}: expected >= 1")
  if not 0 <= FLAGS.port < 65536:
    raise ValueError(f"--port={FLAGS.port}: expected 0..65535")
  return Limits(max_request_bytes=FLAGS.max_request_bytes,
                max_lines=FLAGS.max_lines,
                max_line_chars=FLAGS.max_line_chars,
                max_beam_size=FLAGS.max_beam_size,
                max_concurrent=FLAGS.max_concurrent,
                busy_timeout_secs=FLAGS.busy_timeout_secs)


def _stop(signum, frame):
  del frame
  logging.info("t2t-serve: %s, stopping", signal.Signals(signum).name)
  raise SystemExit(0)  # waitress's loop ends its workers on SystemExit


def _listen(waitress, app, limits):
  return waitress.create_server(
      app, host=FLAGS.host, port=FLAGS.port, threads=FLAGS.threads,
      # A backstop: Flask answers bodies over the limit with a JSON 413;
      # waitress only drops (with plain text) those far larger.
      max_request_body_size=limits.max_request_bytes + 2**20,
      ident="t2t-serve")


def _run():
  import waitress

  limits = _limits()
  from t2tlite.serve.app import make_app
  from t2tlite.serve.model_source import ModelSource
  common_flags.load_plugins()
  source = ModelSource.open(FLAGS.model)
  if source.run_folder:
    common_flags.load_run_plugins(source.run_folder)
  # Before TensorFlow runs (as t2t-decoder): the searches of the model's
  # own decode hparams (the export's, else the problem's) run best on cores
  # of their own. Each request's hparams are settled as it comes.
  machine.settle(source.decode_hparams(""), set_threads=True)
  app = make_app(source, limits)
  try:
    # Before loading the model: a port in use fails at once.
    server = _listen(waitress, app, limits)
  except OSError as error:  # the port is taken, or the host is not ours
    raise console.CommandError(
        f"--host={FLAGS.host} --port={FLAGS.port}: cannot listen there "
        f"({error.strerror or error})") from None
  if FLAGS.warm_up:
    source.translate(["warm up"])
  signal.signal(signal.SIGTERM, _stop)
  signal.signal(signal.SIGINT, _stop)
  print(f"t2t-serve: serving {source.saved_model_dir or source.run_folder} "
        f"on http://{FLAGS.host}:{server.effective_port}/", flush=True)
  try:
    server.run()
  finally:
    server.close()
  print("t2t-serve: stopped", flush=True)
  sys.stdout.flush()


def main():
  console.run(_run, __name__, required=["model"],
              path_flags=["model", "t2t_usr_dir"])


if __name__ == "__main__":
  main()
