"""t2t-serve's HTTP server answers in JSON even where waitress answers
before the app: a body far over --max_request_bytes, a malformed request,
headers too large."""
import contextlib
import http.client
import threading

import flask
import pytest

from t2tlite.serve import http_server, validation

LIMITS = validation.Limits(max_request_bytes=1000)
# waitress's max_request_header_size for the test server.
HEADER_LIMIT = 4096


def make_app(limits):
  app = flask.Flask(__name__)
  app.config["MAX_CONTENT_LENGTH"] = limits.max_request_bytes

  @app.post("/api/translate")
  def translate():
    return flask.jsonify(size=len(flask.request.get_data()))

  @app.errorhandler(413)
  def too_large(e):
    del e
    return flask.jsonify(error=validation.too_large_message(limits)), 413

  return app


@contextlib.contextmanager
def serving(limits, **options):
  """A server on 127.0.0.1 in a thread: its port."""
  server = http_server.create_server(make_app(limits), limits,
                                     host="127.0.0.1", port=0, **options)
  closed = threading.Event()

  def run():
    try:
      server.run()
    except OSError:  # its socket closed under its loop, at teardown
      assert closed.is_set()

  threading.Thread(target=run, daemon=True).start()
  try:
    yield server.effective_port
  finally:
    closed.set()
    server.close()


@pytest.fixture(scope="module")
def port():
  with serving(LIMITS, max_request_header_size=HEADER_LIMIT) as port:
    yield port


def send(port, head, body=b""):
  """Raw request bytes -> (status, Content-Type, body)."""
  response = answer(port, head, body)
  return (response.status, response.getheader("Content-Type"),
          response.read())


def answer(port, head, body=b"", connection=None):
  """Raw request bytes -> the http.client.HTTPResponse, read."""
  if connection is None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.connect()
  connection.sock.sendall(head + body)
  response = http.client.HTTPResponse(connection.sock)
  response.begin()
  return response


def post_head(size):
  return (f"POST /api/translate HTTP/1.1\r\nHost: x\r\n"
          f"Content-Length: {size}\r\n\r\n").encode()


def post(port, size):
  # Far over the limit, waitress answers from the header, unread.
  body = (b"x" * size if size <= LIMITS.max_request_bytes +
          http_server.BACKSTOP_BYTES else b"")
  return send(port, post_head(size), body)


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


@pytest.mark.parametrize("limit", [1000, http_server.BACKSTOP_BYTES + 1000])
def test_waitress_reads_every_body_up_to_the_backstop_past_the_limit(limit):
  # Whatever the limit (also one over the backstop itself), Flask sees and
  # refuses a body up to BACKSTOP_BYTES over it. (Not run: a second
  # server's loop in this process would race the module's.)
  limits = validation.Limits(max_request_bytes=limit)
  server = http_server.create_server(make_app(limits), limits,
                                     host="127.0.0.1", port=0)
  try:
    assert server.adj.max_request_body_size == (
        limit + http_server.BACKSTOP_BYTES)
  finally:
    server.close()


def test_a_malformed_request_gets_json(port):
  status, kind, body = send(
      port, b"POST /api/translate HTTP/1.1\r\nHost: x\r\n"
      b"Content-Length: nine\r\n\r\n")
  assert (status, kind) == (400, "application/json"), body
  assert flask.json.loads(body)["error"].startswith("bad request: ")


def test_headers_too_large_get_json_saying_so(port):
  status, kind, body = send(
      port, b"GET /api/translate HTTP/1.1\r\nHost: x\r\nX-Big: " +
      b"a" * HEADER_LIMIT + b"\r\n\r\n")
  assert (status, kind) == (431, "application/json"), body
  assert flask.json.loads(body) == {
      "error": "request header fields too large: exceeds max_header of "
               f"{HEADER_LIMIT}"}


@pytest.mark.parametrize("head", [
    post_head(LIMITS.max_request_bytes + http_server.BACKSTOP_BYTES + 1),
    b"POST /api/translate HTTP/1.1\r\nHost: x\r\nContent-Length: nine\r\n\r\n",
], ids=["body_refused_unread", "malformed"])
def test_waitress_closes_the_connection_after_its_error(port, head):
  """A body refused unread must not be parsed as the next request."""
  connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
  connection.connect()
  response = answer(port, head, connection=connection)
  response.read()
  assert response.status in (400, 413)
  assert response.getheader("Connection") == "close"
  assert connection.sock.recv(1) == b""  # closed by the server
  connection.close()
