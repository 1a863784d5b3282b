"""fresh_export_client.py's checks on several exports, then saved_model_cli's
commands, in one fresh process (each process that imports TensorFlow costs
seconds): this process too imports only tensorflow and tensorflow_text,
never t2tlite.

    python fresh_export_clients.py JOBS.json RESULT.json

JOBS.json: {"clients": [[SAVED_MODEL_DIR, REQUEST.json, RESULT.json], ...],
"saved_model_cli": [[ARG, ...], ...]}. Each client writes its own
RESULT.json (fresh_export_client.py); RESULT.json here holds, for each
saved_model_cli command in order, {"exit": its status, "stdout": what it
printed}.
"""
import contextlib
import io
import json
import sys

import fresh_export_client  # imports tensorflow and tensorflow_text


def saved_model_cli(args):
  """(exit status, stdout) of `saved_model_cli ARGS...`. saved_model_cli
  has no flag to load op libraries: plain `saved_model_cli run` fails with
  "Op type not registered 'SentencepieceOp'", so its main runs here, after
  tensorflow_text is imported."""
  from tensorflow.python.tools import saved_model_cli as cli
  sys.argv = ["saved_model_cli", *args]
  out, status = io.StringIO(), 0
  with contextlib.redirect_stdout(out):
    try:
      cli.main()
    except SystemExit as done:  # absl's app.run ends with sys.exit
      status = done.code or 0
  return status, out.getvalue()


def main(jobs_path, result_path):
  with open(jobs_path, encoding="utf-8") as f:
    jobs = json.load(f)
  for client in jobs.get("clients", []):
    fresh_export_client.main(*client)
  commands = []
  for args in jobs.get("saved_model_cli", []):
    status, stdout = saved_model_cli(args)
    commands.append({"exit": status, "stdout": stdout})
  with open(result_path, "w", encoding="utf-8") as f:
    json.dump({"saved_model_cli": commands}, f)


if __name__ == "__main__":
  main(*sys.argv[1:])
