"""t2t-serve's HTTP server: waitress, with its own error answers (a body
far over the limit, a malformed request, headers too large) given as the
API's {"error": "one line"} JSON, as the app's are.

    server = create_server(app, limits, host="127.0.0.1", port=8080)
    server.run()

Flask answers a body over --max_request_bytes (validation.Limits) with a
JSON 413 once waitress hands it the request; waitress itself refuses,
before reading it, a body larger than that by more than BACKSTOP_BYTES
(so that a huge upload is not buffered), and those answers come from here.
"""
import json

import waitress
from waitress.channel import HTTPChannel
from waitress.task import ErrorTask

from t2tlite.serve.validation import too_large_message

# How far over --max_request_bytes a body may be before waitress refuses
# it unread (below that, Flask reads and refuses it).
BACKSTOP_BYTES = 2**20


def _json_channel(limits):
  """An HTTPChannel whose waitress errors answer in JSON."""

  class JsonErrorTask(ErrorTask):
    """waitress's error answer, as {"error": ...} with its status."""

    def execute(self):
      error = self.request.error
      message = (too_large_message(limits) if error.code == 413 else
                 f"{error.reason.lower()}: {error.body}")
      body = json.dumps({"error": message}).encode("utf-8") + b"\n"
      self.status = f"{error.code} {error.reason}"
      self.response_headers.append(("Content-Type", "application/json"))
      self.set_close_on_finish()
      self.content_length = len(body)
      self.write(body)

  class JsonErrorChannel(HTTPChannel):
    error_task_class = JsonErrorTask

  return JsonErrorChannel


def create_server(app, limits, **options):
  """waitress.create_server(app, **options) with the request body bounded
  by `limits` (validation.Limits) and its errors in JSON."""
  server = waitress.create_server(
      app, max_request_body_size=limits.max_request_bytes + BACKSTOP_BYTES,
      **options)
  server.channel_class = _json_channel(limits)
  return server
