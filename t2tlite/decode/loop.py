"""The one loop of every search (greedy, sampling, beam): output limits,
buffers, the stop test, freezing and dropping the elements that have
stopped. What a step chooses is the strategy's (`Searcher`).

A search runs a generic one-step function

    decode_step(ids int32 [rows], step int32 scalar, cache)
        -> (logits float [rows, V], cache)

from its initial cache (a nest of tensors whose first dimension is the
batch). An element (an input) has `rows_per_element` rows (its beams):
every cache leaf is tiled to them and reordered with them, except those
under a dict key "per_batch" (at any depth), state kept once per element
and shared by its rows (the Transformer's encoded inputs and growing
self-attention caches). Row j of element b is row b * k + j. At step 0
`ids` is 0 (the start symbol); at step i > 0 the token chosen at i - 1.

With `drop_finished` an element that has stopped leaves the search: its
hypotheses are set aside and its rows leave the cache (the "per_batch"
leaves by element, the others by row), so later steps compute only the
elements still searching (as CTranslate2 does) and a batch costs about the
sum of its outputs' lengths. A step function must then hold everything it
reads per element or row in its cache. The shapes change: not under XLA.

Everything runs in `tf.while_loop`s with TensorFlow core ops only
(sequences in [..., max_decode_length] buffers written in place), so a
search exports in a SavedModel; a cache leaf may grow along a dimension
that is empty in the initial cache (keys and values appended one position
per step); with fixed shapes a search compiles with XLA.
"""
import tensorflow as tf

PER_BATCH = "per_batch"


class Searcher:
  """What a strategy does at each step of `search`; the loop does the rest.

  State: `hypotheses`, a nest of tensors [elements, ...] the loop freezes
  for an element that has stopped and gathers when elements leave.
  """
  rows_per_element = 1

  def initial(self, limits, max_decode_length):
    """The hypotheses before step 0 (limits: int32 [elements])."""
    raise NotImplementedError

  def row_tensors(self):
    """A nest of tensors [elements * rows_per_element, ...] the step reads
    by row (gathered when rows leave); {} by default."""
    return {}

  def previous_tokens(self, hypotheses, step):
    """int32 [rows]: each row's last token (0 at step 0)."""
    raise NotImplementedError

  def step(self, logits, hypotheses, step, rules, row_tensors):
    """(hypotheses, parents): the next token's choice. logits: [rows, V];
    rules: the `step_rules.StepRules` over the rows; parents: None, or
    int32 [elements, rows_per_element], the row each new row continues
    (the cache is reordered by it)."""
    raise NotImplementedError

  def stopped(self, hypotheses, step):
    """bool [elements]: elements that are done before their limit."""
    raise NotImplementedError

  def finalize(self, hypotheses):
    """(ids int32 [elements, ...], scores float32 [elements, ...])."""
    raise NotImplementedError


def search(decode_step, initial_cache, searcher, max_decode_length, rules,
           max_lengths=None, drop_finished=False):
  """Runs `searcher`'s steps until every element has stopped.

  An element stops at its limit (max_lengths, else max_decode_length) or
  when `searcher.stopped` says; from then on its hypotheses are frozen
  (its rows go on being computed, unused, unless drop_finished).

  Args:
    decode_step, initial_cache: as above; the cache per element.
    searcher: a `Searcher`.
    max_decode_length: int or int32 scalar, the buffers' length.
    rules: a `step_rules.StepRules` over the elements (tiled to their
      rows here).
    max_lengths: None, or int32 [elements] (each <= max_decode_length).
    drop_finished: bool (Python): stopped elements leave the search.
  Returns:
    `searcher.finalize` of the final hypotheses, in element order.
  """
  k = searcher.rows_per_element
  batch = _batch_size(initial_cache)
  limits = _limits(max_lengths, batch, max_decode_length)
  if k > 1:
    initial_cache = _map_rows(lambda x: tf.repeat(x, k, axis=0),
                              initial_cache)
    rules = rules.repeated(k)
  # What the loop carries of each element: its hypotheses, its rows (the
  # cache and the row tensors of the rules and the strategy), its limit
  # and its index in the batch.
  hypotheses = searcher.initial(limits, max_decode_length)
  state = {"hypotheses": hypotheses,
           "rows": {"cache": initial_cache, "rules": rules.row_tensors(),
                    "searcher": searcher.row_tensors()},
           "elements": {"limit": limits, "index": tf.range(batch)}}
  if drop_finished:
    state["results"] = hypotheses  # of the elements that have left

  def stopped(state, step):
    return searcher.stopped(state["hypotheses"], step) | (
        step >= state["elements"]["limit"])

  def searching(reduce):
    """A loop condition: a step is left and not `reduce` (tf.reduce_all:
    some element still searches; tf.reduce_any: every element does)."""
    return lambda step, state: tf.logical_and(
        step < max_decode_length,
        tf.logical_not(reduce(stopped(state, step))))

  def body(step, state):
    old, rows = state["hypotheses"], state["rows"]
    logits, cache = decode_step(searcher.previous_tokens(old, step), step,
                                rows["cache"])
    new, parents = searcher.step(logits, old, step,
                                 rules.with_row_tensors(rows["rules"]),
                                 rows["searcher"])
    if parents is not None:
      cache = _gather_cache(cache, parents, k)
    if not drop_finished:
      # Stopped elements keep their hypotheses (their rows go on being
      # computed, unused: shapes stay fixed). Dropped, they have left.
      done = stopped(state, step)
      new = tf.nest.map_structure(
          lambda n, o: tf.where(_per_element(done, n.shape.rank), o, n),
          new, old)
    return step + 1, dict(state, hypotheses=new, rows=dict(rows, cache=cache))

  if drop_finished:
    # Phases: the stopped elements leave, then the others search until one
    # of them stops. The inner loop's steps cost what they cost without
    # dropping (no branch at every step).
    def phase(step, state):
      done = stopped(state, step)  # none at step 0, mostly
      state = tf.cond(tf.reduce_any(done),
                      lambda: _without_elements(state, done, k),
                      lambda: state)
      return _loop(searching(tf.reduce_any), body, (step, state),
                   batch_varies=True)

    _, state = _loop(searching(tf.reduce_all), phase,
                     (tf.constant(0), state), batch_varies=True)
    hypotheses = _set_aside(state["results"], state["elements"]["index"],
                            state["hypotheses"])
  else:
    _, state = _loop(searching(tf.reduce_all), body,
                     (tf.constant(0), state))
    hypotheses = state["hypotheses"]
  return searcher.finalize(hypotheses)


def repeat_elements(cache, n):
  """Every leaf of `cache` (per_batch ones too) with each element n times
  in a row: n independent elements per input (samples)."""
  return tf.nest.map_structure(lambda x: tf.repeat(x, n, axis=0), cache)


def write_position(buffer, step, tokens):
  """buffer int32 [..., max_len] with `tokens` [...] written at `step`."""
  at_step = tf.equal(tf.range(tf.shape(buffer)[-1]), step)
  return tf.where(at_step, tokens[..., tf.newaxis], buffer)


def previous_tokens(seqs, step):
  """int32 [...]: the token at position step - 1 of seqs [..., max_len], or
  0 (the start symbol) at step 0."""
  last = tf.gather(seqs, tf.maximum(step - 1, 0), axis=-1)
  return tf.where(step > 0, last, tf.zeros_like(last))


def gather_beams(x, indices):
  """x [batch, k, ...], indices int32 [batch, k'] -> [batch, k', ...]."""
  return tf.gather(x, indices, batch_dims=1)


def _batch_size(cache):
  return tf.shape(tf.nest.flatten(cache)[0])[0]


def _limits(max_lengths, batch, max_decode_length):
  """int32 [batch]: each element's length limit."""
  if max_lengths is None:
    return tf.fill([batch], tf.cast(max_decode_length, tf.int32))
  return tf.minimum(tf.cast(max_lengths, tf.int32), max_decode_length)


def _loop(cond, body, loop_vars, batch_varies=False):
  """tf.while_loop over `loop_vars` (a nest) that lets tensors grow along
  their initially empty dimensions (cache leaves: keys and values appended
  one position per step) and, with batch_varies, change their first
  dimension (a search dropping elements)."""
  def invariant(x):
    dims = [None if size == 0 else size for size in x.shape.as_list()]
    if batch_varies and dims:
      dims[0] = None
    return tf.TensorShape(dims)

  return tf.while_loop(cond, body, loop_vars,
                       shape_invariants=tf.nest.map_structure(invariant,
                                                              loop_vars))


def _per_element(flags, rank):
  """bool [batch] reshaped to [batch, 1, ...] of the given rank."""
  return tf.reshape(flags, [-1] + [1] * (rank - 1))


def _map_rows(fn, cache, per_batch=None):
  """fn applied to every cache leaf but those under a PER_BATCH key, which
  are left as they are or, given per_batch, mapped by it.
  (tf.nest has no public map with paths, so the nest is walked here.)"""
  if isinstance(cache, dict):
    return {key: (_per_batch_leaves(per_batch, value) if key == PER_BATCH
                  else _map_rows(fn, value, per_batch))
            for key, value in cache.items()}
  if isinstance(cache, (list, tuple)):
    return type(cache)(_map_rows(fn, value, per_batch) for value in cache)
  return fn(cache)


def _per_batch_leaves(fn, value):
  return value if fn is None else tf.nest.map_structure(fn, value)


def _gather_cache(cache, indices, k):
  """Reorders cache leaves [batch * k, ...] by indices [batch, k]."""
  batch = tf.shape(indices)[0]
  flat = tf.reshape(indices + k * tf.range(batch)[:, tf.newaxis], [-1])
  return _map_rows(lambda x: tf.gather(x, flat), cache)


def _set_aside(results, index, hypotheses):
  """`results` (hypotheses [batch, ...]) with rows `index` int32
  [elements] replaced by `hypotheses` [elements, ...]."""
  return tf.nest.map_structure(
      lambda all_, some: tf.tensor_scatter_nd_update(
          all_, index[:, tf.newaxis], some), results, hypotheses)


def _without_elements(state, done, k):
  """The loop state with the elements `done` (bool [elements]) set aside
  in state["results"] and their hypotheses, rows and cache dropped."""
  kept = tf.cast(tf.reshape(tf.where(~done), [-1]), tf.int32)
  kept_rows = tf.reshape(kept[:, tf.newaxis] * k + tf.range(k), [-1])
  results = _set_aside(state["results"], state["elements"]["index"],
                       state["hypotheses"])

  def take(indices):
    return lambda x: tf.gather(x, indices)

  rows = state["rows"]
  return {
      "hypotheses": tf.nest.map_structure(take(kept), state["hypotheses"]),
      "elements": tf.nest.map_structure(take(kept), state["elements"]),
      "rows": {"cache": _map_rows(take(kept_rows), rows["cache"],
                                  per_batch=take(kept)),
               "rules": tf.nest.map_structure(take(kept_rows), rows["rules"]),
               "searcher": tf.nest.map_structure(take(kept_rows),
                                                 rows["searcher"])},
      "results": results}
