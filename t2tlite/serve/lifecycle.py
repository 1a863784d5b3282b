"""A server's life: warming up, then ready, then draining (after SIGTERM).

GET /readyz answers 200 only when ready; translate and attention requests
get a 503 while warming up or draining, so a load balancer sends them
elsewhere.
"""
import threading


class Lifecycle:
  """Thread-safe state: warming up -> ready -> draining."""

  def __init__(self, ready=False):
    self._ready = threading.Event()
    self._draining = threading.Event()
    if ready:
      self._ready.set()

  def set_ready(self):
    self._ready.set()

  def start_draining(self):
    """Returns False if it was draining already."""
    if self._draining.is_set():
      return False
    self._draining.set()
    return True

  @property
  def draining(self):
    return self._draining.is_set()

  def not_ready(self):
    """Why requests are not taken now ("warming up", "draining"), or None."""
    if self._draining.is_set():
      return "draining: the server is stopping"
    if not self._ready.is_set():
      return "warming up: the model is loading"
    return None
