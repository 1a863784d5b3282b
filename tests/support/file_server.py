"""A real HTTP server on 127.0.0.1 serving a folder, for download tests: it
records the paths asked for and can cut chosen files short."""
import contextlib
import functools
import http.server
import threading


class _Handler(http.server.SimpleHTTPRequestHandler):
  """Serves the folder; a file named in `cut_short` announces its full size
  but sends only half of it, then closes the connection."""

  def __init__(self, *args, requests, cut_short, **kwargs):
    self._requests, self._cut_short = requests, cut_short
    super().__init__(*args, **kwargs)

  def do_GET(self):
    self._requests.append(self.path)
    name = self.path.rsplit("/", 1)[-1]
    if name not in self._cut_short:
      return super().do_GET()
    body = open(self.translate_path(self.path), "rb").read()
    self.send_response(200)
    self.send_header("Content-Length", str(len(body)))
    self.end_headers()
    self.wfile.write(body[:len(body) // 2])
    self.close_connection = True
    return None

  def log_message(self, *args):  # keep the test output clean
    del args


@contextlib.contextmanager
def serving(folder, cut_short=()):
  """Serves `folder` on a free port of 127.0.0.1 in a thread.

  Yields:
    (base URL without a trailing slash, list of the request paths so far).
  """
  requests = []
  handler = functools.partial(_Handler, directory=str(folder),
                              requests=requests, cut_short=set(cut_short))
  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
  server.daemon_threads = True
  thread = threading.Thread(target=server.serve_forever, daemon=True)
  thread.start()
  try:
    yield f"http://127.0.0.1:{server.server_address[1]}", requests
  finally:
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)
