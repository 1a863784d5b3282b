"""t2t-serve's HTTP server answers in JSON even where waitress answers
before the app: a body far over --max_request_bytes, a malformed request."""
import http.client
import threading

import flask
import pytest

from t2tlite.serve import http_server, validation

LIMITS = validation.Limits(max_request_bytes=1000)


@pytest.fixture(scope="module")
def port():
  app = flask.Flask(__name__)
  app.config["MAX_CONTENT_LENGTH"] = LIMITS.max_request_bytes

  @app.post("/api/translate")
  def translate():
    return flask.jsonify(size=len(flask.request.get_data()))

  @app.errorhandler(413)
  def too_large(e):
    del e
    return flask.jsonify(error=validation.too_large_message(LIMITS)), 413

  server = http_server.create_server(app, LIMITS, host="127.0.0.1", port=0)
  closed = threading.Event()

  def run():
    try:
      server.run()
    except OSError:  # its socket closed under its loop, at teardown
      assert closed.is_set()

  threading.Thread(target=run, daemon=True).start()
  yield server.effective_port
  closed.set()
  server.close()


def send(port, head, body=b""):
  """Raw request bytes -> (status, Content-Type, body)."""
  connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
  connection.connect()
  connection.sock.sendall(head + body)
  response = http.client.HTTPResponse(connection.sock)
  response.begin()
  return (response.status, response.getheader("Content-Type"),
          response.read())


def post(port, size):
  head = (f"POST /api/translate HTTP/1.1\r\nHost: x\r\n"
          f"Content-Length: {size}\r\n\r\n").encode()
  # Far over the limit, waitress answers from the header, unread.
  body = b"x" * size if size <= 2 * LIMITS.max_request_bytes else b""
  return send(port, head, body)


@pytest.mark.parametrize("size", [
    LIMITS.max_request_bytes + 1,                             # Flask's 413
    LIMITS.max_request_bytes + http_server.BACKSTOP_BYTES + 1,  # waitress's
])
def test_a_body_over_the_limit_gets_json(port, size):
  status, kind, body = post(port, size)
  assert (status, kind) == (413, "application/json"), body
  assert flask.json.loads(body) == {
      "error": "request body larger than 1000 bytes (--max_request_bytes)"}


def test_a_body_within_the_limit_reaches_the_app(port):
  status, _, body = post(port, LIMITS.max_request_bytes)
  assert status == 200 and flask.json.loads(body) == {"size": 1000}


def test_a_malformed_request_gets_json(port):
  status, kind, body = send(
      port, b"POST /api/translate HTTP/1.1\r\nHost: x\r\n"
      b"Content-Length: nine\r\n\r\n")
  assert (status, kind) == (400, "application/json"), body
  assert flask.json.loads(body)["error"].startswith("bad request: ")
