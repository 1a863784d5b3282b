"""t2t-serve's Prometheus metrics (GET /metrics), through prometheus_client,
in a registry of their own (not the process-wide default):

    t2t_serve_requests_total{path, status}   requests answered
    t2t_serve_request_seconds{path, status}   latency histogram
    t2t_serve_batch_lines                     lines per decoded batch
    t2t_serve_batch_seconds                   a batch's decode time
    t2t_serve_queued_lines                    lines waiting for a batch
    t2t_serve_sentences_total                 lines decoded
    t2t_serve_dropped_total{reason}           queued requests not decoded
                                              (client_gone)
"""
import prometheus_client as prom

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0, 30.0, 60.0)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CONTENT_TYPE = prom.CONTENT_TYPE_LATEST


class ServeMetrics:
  """The metrics of one server."""

  def __init__(self):
    self.registry = prom.CollectorRegistry(auto_describe=True)
    self._requests = prom.Counter(
        "t2t_serve_requests", "HTTP requests answered, by path and status.",
        ["path", "status"], registry=self.registry)
    self._latency = prom.Histogram(
        "t2t_serve_request_seconds", "Time from a request's arrival to its "
        "answer, by path and status.", ["path", "status"],
        buckets=_LATENCY_BUCKETS,
        registry=self.registry)
    self._batch_lines = prom.Histogram(
        "t2t_serve_batch_lines", "Lines in each decoded batch.",
        buckets=_BATCH_BUCKETS, registry=self.registry)
    self._batch_seconds = prom.Histogram(
        "t2t_serve_batch_seconds", "Decode time of each batch.",
        buckets=_LATENCY_BUCKETS, registry=self.registry)
    self._sentences = prom.Counter(
        "t2t_serve_sentences", "Lines decoded.", registry=self.registry)
    self._dropped = prom.Counter(
        "t2t_serve_dropped", "Queued requests dropped undecoded, by reason.",
        ["reason"], registry=self.registry)
    self._queued = prom.Gauge("t2t_serve_queued_lines", "Lines waiting "
                              "for a batch.", registry=self.registry)

  def track_queue(self, queued_lines):
    """queued_lines: a callable read at each scrape (the queue depth)."""
    self._queued.set_function(queued_lines)

  def request(self, path, status, seconds):
    self._requests.labels(path=path, status=str(status)).inc()
    self._latency.labels(path=path, status=str(status)).observe(seconds)

  def batch(self, lines, seconds):
    self._batch_lines.observe(lines)
    self._batch_seconds.observe(seconds)
    self._sentences.inc(lines)

  def dropped(self, reason):
    self._dropped.labels(reason=reason).inc()

  def render(self):
    """The metrics in Prometheus' text format (bytes)."""
    return prom.generate_latest(self.registry)
