"""Dynamic batching: the lines of requests that arrive within a short window
and share a batch key (decode hparams) are decoded as one batch, and each
request gets back its own lines' results.

    batcher = Batcher(decode, BatchLimits(window_secs=0.005), cost)
    batcher.start()
    results = batcher.submit(key, items)   # blocks; raises QueueFull, ...
    batcher.drain(timeout_secs=30)          # stop taking, finish the queue

`decode(key, items)` gets the items (one per line: any value, such as
t2t-serve's TranslateLine, a line and its target prefix) of every request
in the batch, in order, and returns one result per item. One worker thread
calls it, so the model computes one batch at a time (a batch uses every
core: an export runs its concurrent searches inside).

A batch starts from the oldest queued request and takes the later ones with
the same key, oldest first, while its lines stay within max_lines and its
padded tokens (lines x the longest line's cost) within max_tokens. It is
decoded at once when full, else once both hold:

  * window_secs have passed with no request joining it, so that a burst
    of requests arriving together shares one batch; but a steady stream
    waits no longer than the batcher's patience after its oldest request
    arrived: three quarters of the last batch's decode time, at least
    window_secs and at most 50 ms (less than a batch costs the requests
    it would leave behind);
  * the linger after the previous batch is over: three quarters of its
    decode time, at most 50 ms, ended early once the queue holds as many
    more lines as that batch answered. Under load the clients just answered
    send their next requests meanwhile and join this batch instead of
    waiting for the next one (without it, a batch holds half of the
    clients, who wait while the other half computes); once all of them
    may be back, waiting longer would leave the cores idle, so the batch
    is then decoded at once, without a quiet window either (one client
    sending line after line waits for no window).

A request larger than the limits is decoded alone, never split. A request
may ask to be decoded alone (`alone=True`): its batch holds only its own
lines.

Bounds: at most max_queued_lines lines wait (a request that does not fit
raises QueueFull at once); a request still queued at its deadline is taken
out and raises TimedOut; a request whose client has gone (its `gone()` is
true when its batch is formed) is dropped undecoded (ClientGone).
"""
import collections
import dataclasses
import threading
import time

# After a batch: wait for returning clients up to this share of its decode
# time, at most LINGER_MAX_SECS; a burst's batch waits for its last
# request as long (the patience). Answered one after another under the
# interpreter's lock, 16 clients of a small model are back 9-17 ms after
# a batch of about 20 ms: a quarter of it split their next batch
# (docs/performance_log.md, 2026-12-02, "The batcher's linger").
LINGER_SHARE = 0.75
LINGER_MAX_SECS = 0.05


@dataclasses.dataclass(frozen=True)
class BatchLimits:
  """window_secs: how long a forming batch waits for another request.
  max_lines, max_tokens: a batch's lines and padded tokens.
  max_queued_lines: lines waiting (not computing) at most.
  timeout_secs: how long a request may wait in the queue."""
  window_secs: float = 0.005
  max_lines: int = 32
  max_tokens: int = 2048
  max_queued_lines: int = 128
  timeout_secs: float = 30.0


class Rejected(Exception):
  """A request the batcher does not decode; str(error) says why."""


class QueueFull(Rejected):
  """The queue holds max_queued_lines lines already (HTTP 503)."""


class Draining(Rejected):
  """The batcher stopped taking requests (HTTP 503)."""


class TimedOut(Rejected):
  """Still queued at its deadline (HTTP 503)."""


class ClientGone(Rejected):
  """Its client disconnected before its batch was formed."""


class _Request:

  def __init__(self, key, items, costs, alone, gone, deadline):
    self.key, self.items, self.alone, self.gone = key, items, alone, gone
    self.longest = max(costs, default=0)
    self.arrived, self.deadline = time.monotonic(), deadline
    self.done = threading.Event()
    self.results = self.error = None


class Batcher:
  """Queues requests and decodes them in batches on one worker thread.

  Args:
    decode: (key, list of items) -> list of results, one per item.
    limits: BatchLimits.
    cost: item -> its tokens (an estimate is fine: it bounds a batch's
      work); default 1 a line.
    observer: optional, with batch(lines, seconds) and dropped(reason)
      (t2tlite.serve.metrics.ServeMetrics).
  """

  def __init__(self, decode, limits, cost=None, observer=None):
    self._decode, self.limits = decode, limits
    self._cost = cost or (lambda item: 1)
    self._observer = observer
    self._queue = collections.deque()
    self._queued_lines = 0
    self._linger_until = 0.0  # monotonic: see LINGER_SHARE
    # The queued lines at which the linger ends early: those queued when
    # the last batch ended, and as many again as it answered.
    self._linger_lines = 0
    self._patience = limits.window_secs  # see LINGER_SHARE
    self._cond = threading.Condition()
    self._taking = True
    self._thread = threading.Thread(target=self._work, name="batcher",
                                    daemon=True)

  def start(self):
    self._thread.start()
    return self

  def queued_lines(self):
    """Lines waiting for a batch (not those computing)."""
    return self._queued_lines

  def queued_requests(self):
    """Requests waiting for a batch."""
    return len(self._queue)

  # ---- the request side -----------------------------------------------------

  def submit(self, key, items, alone=False, gone=None):
    """Decodes `items` in a batch of requests with the same key; blocks
    until done and returns their results, in order.

    Raises:
      QueueFull, Draining: at once. TimedOut: still queued after
      limits.timeout_secs. ClientGone: gone() was true when its batch
      formed. Whatever decode raised for its batch.
    """
    items = list(items)
    request = _Request(key, items, [self._cost(i) for i in items], alone,
                       gone or (lambda: False),
                       time.monotonic() + self.limits.timeout_secs)
    with self._cond:
      if not self._taking:
        raise Draining("draining: the server is stopping; try another")
      if self._queued_lines + len(items) > self.limits.max_queued_lines:
        raise QueueFull(
            f"busy: {self._queued_lines} lines queued, {len(items)} more "
            f"would pass the limit of {self.limits.max_queued_lines} "
            "(--max_queued_lines); try again")
      self._queue.append(request)
      self._queued_lines += len(items)
      self._cond.notify_all()
    if not request.done.wait(self.limits.timeout_secs):
      with self._cond:
        if request in self._queue:  # not taken into a batch: give up
          self._remove([request])
          raise TimedOut(f"timed out: queued {self.limits.timeout_secs:g} s "
                         "(--request_timeout_secs); try again")
      request.done.wait()  # computing: its answer comes
    if request.error is not None:
      raise request.error
    return request.results

  # ---- the worker side ------------------------------------------------------

  def _remove(self, requests):
    for request in requests:
      self._queue.remove(request)
      self._queued_lines -= len(request.items)

  def _batch(self):
    """The queued requests that would form the next batch (oldest first),
    and whether it is full. Called under the lock."""
    first = self._queue[0]
    batch, lines, longest = [first], len(first.items), first.longest
    if first.alone:
      return batch, True
    for request in list(self._queue)[1:]:
      if request.key != first.key or request.alone:
        continue
      grown = max(longest, request.longest)
      total = lines + len(request.items)
      if (total > self.limits.max_lines or
          total * grown > self.limits.max_tokens):
        return batch, True
      batch.append(request)
      lines, longest = total, grown
    return batch, lines >= self.limits.max_lines

  def _next_batch(self):
    """Waits for the next batch and takes it out of the queue; None once
    drained and stopped."""
    with self._cond:
      while True:
        if not self._queue:  # (a request may time out during the window)
          if not self._taking:
            return None
          self._cond.wait()
          continue
        batch, full = self._batch()
        oldest = batch[0].arrived
        latest = max(request.arrived for request in batch)
        window = self.limits.window_secs
        # A quiet window after the latest, within patience of the oldest.
        ready_at = max(oldest + window,
                       min(latest + window, oldest + self._patience))
        now = time.monotonic()
        if self._queued_lines < self._linger_lines:  # more may come back
          ready_at = max(ready_at, self._linger_until)
        elif now < self._linger_until:
          ready_at = now  # all may be back: no quiet window either
        wait = ready_at - now
        if full or wait <= 0 or not self._taking:
          break
        self._cond.wait(wait)
      self._remove(batch)
      return batch

  def _work(self):
    while True:
      batch = self._next_batch()
      if batch is None:
        return
      start = time.monotonic()
      try:
        self._run(batch)
      finally:
        with self._cond:
          end = time.monotonic()
          share = min(LINGER_SHARE * (end - start), LINGER_MAX_SECS)
          self._linger_until = end + share
          self._patience = max(self.limits.window_secs, share)
          self._linger_lines = self._queued_lines + sum(
              len(request.items) for request in batch)
          self._cond.notify_all()

  def _run(self, batch):
    live = []
    for request in batch:
      if request.gone():
        self._finish(request, error=ClientGone("the client disconnected"),
                     reason="client_gone")
      else:
        live.append(request)
    if not live:
      return
    items = [item for request in live for item in request.items]
    start = time.monotonic()
    try:
      results = list(self._decode(live[0].key, items))
      if len(results) != len(items):
        raise RuntimeError(f"decode returned {len(results)} results for "
                           f"{len(items)} lines")
    except Exception as error:  # noqa: BLE001  (each request gets it)
      for request in live:
        self._finish(request, error=error)
      return
    if self._observer:
      self._observer.batch(len(items), time.monotonic() - start)
    for request in live:
      self._finish(request, results=results[:len(request.items)])
      results = results[len(request.items):]

  def _finish(self, request, results=None, error=None, reason=None):
    request.results, request.error = results, error
    request.done.set()
    if reason and self._observer:
      self._observer.dropped(reason)

  # ---- stopping -------------------------------------------------------------

  def drain(self, timeout_secs):
    """Stops taking requests (Draining), decodes those queued, then ends the
    worker. Returns whether it finished within timeout_secs."""
    with self._cond:
      self._taking = False
      self._cond.notify_all()
    self._thread.join(timeout_secs)
    return not self._thread.is_alive()
