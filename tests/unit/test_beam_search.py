"""Beam and greedy search: hand-set logits with hand-computed results, and the
Transformer's cached decoding against an uncached recomputation."""
import dataclasses
import functools
import math

import numpy as np
import pytest
import tensorflow as tf

from search_calls import beam_search, greedy_search, sample_search
from t2tlite.decode.step_rules import without_repeats as _without_repeats
from t2tlite.decode import machine
from t2tlite.decode import search as search_module
from decode_helpers import decode_ids, plan_of
from t2tlite.decode.settings import DecodeHParams
from t2tlite.decode.strategy import DecodePlan, Sample
from t2tlite.hparams_lib import HParams
from t2tlite.layers.search_weights import LaidOutKernel
from t2tlite.models import build_model

PAD, EOS, A, B = 0, 1, 2, 3
VOCAB = 4


def prefix_model(spec, batch=1):
  """A decode_step whose next-token distribution depends on the whole prefix.

  Args:
    spec: {prefix tuple: {token: probability}}; tokens left out have
      probability 0. Prefixes not in spec go to a "sink" state giving EOS, A
      and B 1/3 each.
  Returns:
    (decode_step, initial cache {"state": int32 [batch]}, a tf.Variable
    counting decode_step calls).
  """
  prefixes = list(spec)
  sink = len(prefixes)
  index = {p: i for i, p in enumerate(prefixes)}
  next_state = [[index.get(p + (t,), sink) for t in range(VOCAB)]
                for p in prefixes] + [[sink] * VOCAB]
  logits = np.full([sink + 1, VOCAB], -1e9, np.float32)
  for state, prefix in enumerate(prefixes):
    for token, p in spec[prefix].items():
      logits[state, token] = math.log(p)
  logits[sink, [EOS, A, B]] = math.log(1 / 3)
  next_state, logits = tf.constant(next_state), tf.constant(logits)
  calls = tf.Variable(0)

  def decode_step(ids, step, cache):
    calls.assign_add(1)
    moved = tf.gather_nd(next_state, tf.stack([cache["state"], ids], 1))
    state = tf.where(step > 0, moved, index[()])
    return tf.gather(logits, state), {"state": state}

  return decode_step, {"state": tf.zeros([batch], tf.int32)}, calls


def trim(ids):
  """Output ids up to and including the first EOS (all if none)."""
  ids = list(np.asarray(ids))
  return ids[:ids.index(EOS) + 1] if EOS in ids else ids


# Greedy takes A (0.6) then EOS (0.4): 0.24. Beam 2 keeps B (0.4), whose EOS
# has 0.9: 0.36.
GREEDY_IS_NOT_BEST = {(): {A: 0.6, B: 0.4}, (A,): {EOS: 0.4, A: 0.3, B: 0.3},
                      (B,): {EOS: 0.9, A: 0.05, B: 0.05}}


def test_beam_finds_the_best_sequence_that_greedy_misses():
  step, cache, calls = prefix_model(GREEDY_IS_NOT_BEST)
  ids, score = greedy_search(step, cache, max_decode_length=10)
  assert trim(ids[0]) == [A, EOS]
  assert float(score[0]) == pytest.approx(math.log(0.6 * 0.4), abs=1e-5)

  step, cache, calls = prefix_model(GREEDY_IS_NOT_BEST)
  ids, scores = beam_search(step, cache, beam_size=2, max_decode_length=10,
                            alpha=0.0, return_beams=True)
  # Step 1's two best extensions, [B EOS] 0.36 and [A EOS] 0.24, both finish;
  # the live [A A], [A B] (0.18) cannot beat 0.36: the search stops after two
  # steps instead of ten.
  assert [trim(b) for b in ids[0]] == [[B, EOS], [A, EOS]]
  np.testing.assert_allclose(scores[0], [math.log(0.36), math.log(0.24)],
                             atol=1e-5)
  assert int(calls.numpy()) == 2


def test_early_termination_after_a_certain_winner():
  # EOS first with 0.9: nothing live (at most 0.1) can beat it at alpha=0.
  step, cache, calls = prefix_model({(): {EOS: 0.9, A: 0.1}})
  ids, score = beam_search(step, cache, beam_size=3, max_decode_length=50,
                           alpha=0.0)
  assert trim(ids[0]) == [EOS]
  assert float(score[0]) == pytest.approx(math.log(0.9), abs=1e-5)
  assert int(calls.numpy()) == 1


# [EOS] has P = 0.5; [A A EOS] has P = 0.5 * 0.9 * 0.9 = 0.405.
LONGER_WINS_WITH_PENALTY = {(): {EOS: 0.5, A: 0.5},
                            (A,): {A: 0.9, EOS: 0.05, B: 0.05},
                            (A, A): {EOS: 0.9, A: 0.05, B: 0.05}}


def test_length_penalty_changes_the_winner():
  # alpha = 0: scores are log-probabilities, log 0.5 > log 0.405. The live [A]
  # (log 0.5) cannot beat the finished [EOS] (ties keep the finished one).
  step, cache, calls = prefix_model(LONGER_WINS_WITH_PENALTY)
  ids, score = beam_search(step, cache, beam_size=2, max_decode_length=5,
                           alpha=0.0)
  assert trim(ids[0]) == [EOS]
  assert float(score[0]) == pytest.approx(math.log(0.5), abs=1e-5)
  assert int(calls.numpy()) == 1

  # alpha = 1: lp(n) = (5 + n) / 6 counting EOS. [EOS]: log 0.5 / 1 = -0.6931;
  # [A A EOS]: log 0.405 / (8/6) = -0.9039 / 1.3333 = -0.6779, which wins.
  # After step 0 the live [A] may still reach log 0.5 / lp(5) = -0.416, so
  # the search goes on; after step 2 the best live, [A A A] (0.0225), is
  # bounded by log 0.0225 / lp(5) = -2.28 < -0.6779: three steps.
  step, cache, calls = prefix_model(LONGER_WINS_WITH_PENALTY)
  ids, score = beam_search(step, cache, beam_size=2, max_decode_length=5,
                           alpha=1.0)
  assert trim(ids[0]) == [A, A, EOS]
  assert float(score[0]) == pytest.approx(math.log(0.405) / (8 / 6), abs=1e-5)
  assert float(score[0]) == pytest.approx(-0.6779, abs=1e-4)
  assert int(calls.numpy()) == 3


# [EOS] 0.5 finishes first, then [B EOS] 0.2 while [A A] (0.27) lives on
# and finishes as [A A EOS] 0.27: second best.
WORST_FINISHED_IS_BEATEN = {(): {EOS: 0.5, A: 0.3, B: 0.2},
                            (A,): {EOS: 0.1, A: 0.9}, (B,): {EOS: 1.0},
                            (A, A): {EOS: 1.0}}


def test_n_best_search_goes_on_while_a_live_one_beats_the_worst():
  step, cache, calls = prefix_model(WORST_FINISHED_IS_BEATEN)
  ids, scores = beam_search(step, cache, beam_size=2, max_decode_length=6,
                            alpha=0.0, return_beams=True)
  assert [trim(b) for b in ids[0]] == [[EOS], [A, A, EOS]]
  np.testing.assert_allclose(scores[0], [math.log(0.5), math.log(0.27)],
                             atol=1e-5)
  assert int(calls.numpy()) == 3


def test_unfinished_slots_take_the_best_live_hypotheses():
  # [EOS] finishes at step 0; at the limit [A A] (0.3) and [B B] (0.2) are
  # live: the best of them fills the second slot.
  step, cache, _ = prefix_model({(): {EOS: 0.5, A: 0.3, B: 0.2},
                                 (A,): {A: 1.0}, (B,): {B: 1.0}})
  ids, scores = beam_search(step, cache, beam_size=2, max_decode_length=2,
                            alpha=0.0, return_beams=True)
  np.testing.assert_array_equal(ids[0], [[EOS, PAD], [A, A]])
  np.testing.assert_allclose(scores[0], [math.log(0.5), math.log(0.3)],
                             atol=1e-5)


def test_unfinished_hypotheses_are_returned_at_max_length():
  # Only A is ever possible: no hypothesis finishes within 3 steps.
  step, cache, _ = prefix_model({(): {A: 1.0}, (A,): {A: 1.0},
                                 (A, A): {A: 1.0}}, batch=2)
  ids, scores = beam_search(step, cache, beam_size=2, max_decode_length=3,
                            alpha=0.6, return_beams=True)
  assert ids.shape == (2, 2, 3)
  np.testing.assert_array_equal(ids[:, 0], [[A, A, A], [A, A, A]])
  np.testing.assert_allclose(scores[:, 0], [0.0, 0.0], atol=1e-6)
  ids, _ = greedy_search(step, cache, max_decode_length=3)
  np.testing.assert_array_equal(ids, [[A, A, A], [A, A, A]])


def test_each_batch_element_keeps_its_own_length_limit():
  # No EOS is ever possible; element 0 may have 1 token, element 1 three.
  spec = {(): {A: 0.6, B: 0.4}, (A,): {A: 1.0}, (A, A): {A: 1.0},
          (B,): {B: 1.0}, (B, B): {B: 1.0}}
  step, cache, _ = prefix_model(spec, batch=2)
  ids, scores = beam_search(step, cache, beam_size=2, max_decode_length=3,
                            alpha=1.0, max_lengths=tf.constant([1, 3]))
  np.testing.assert_array_equal(ids, [[A, 0, 0], [A, A, A]])
  # Cut hypotheses are scored with the penalty of their limit:
  # log 0.6 / lp(1) = log 0.6 / 1 and log 0.6 / lp(3) = log 0.6 / (8/6).
  np.testing.assert_allclose(scores, [math.log(0.6), math.log(0.6) * 6 / 8],
                             atol=1e-5)
  ids, _ = greedy_search(step, cache, max_decode_length=3,
                         max_lengths=tf.constant([1, 3]))
  np.testing.assert_array_equal(ids, [[A, 0, 0], [A, A, A]])


@pytest.mark.parametrize("pad_share", [0.4, 0.7])
def test_an_excluded_token_is_never_chosen_nor_counted(pad_share):
  # PAD holds pad_share of the first step's probability: excluded, A and B
  # share the rest as 0.6 and 0.4, whatever PAD held.
  rest = 1 - pad_share
  spec = {(): {PAD: pad_share, A: 0.6 * rest, B: 0.4 * rest},
          (A,): {EOS: 1.0}, (B,): {EOS: 1.0}}
  step, cache, _ = prefix_model(spec)
  ids, score = greedy_search(step, cache, max_decode_length=5,
                             excluded_id=PAD)
  assert trim(ids[0]) == [A, EOS]
  assert float(score[0]) == pytest.approx(math.log(0.6), abs=1e-5)
  step, cache, _ = prefix_model(spec)
  ids, scores = beam_search(step, cache, beam_size=2, max_decode_length=5,
                            alpha=0.0, return_beams=True, excluded_id=PAD)
  assert [trim(b) for b in ids[0]] == [[A, EOS], [B, EOS]]
  np.testing.assert_allclose(scores[0], [math.log(0.6), math.log(0.4)],
                             atol=1e-5)


# EOS comes first (0.9) unless a minimum length holds it back; without
# EOS, A then A (0.3 / 0.5) or B (0.2 / 0.5), then EOS (0.8 or 0.6).
EOS_TOO_SOON = {(): {EOS: 0.9, A: 0.1}, (A,): {EOS: 0.5, A: 0.3, B: 0.2},
                (A, A): {EOS: 0.8, B: 0.2}, (A, B): {EOS: 0.6, A: 0.4}}


def test_min_length_holds_eos_back():
  step, cache, _ = prefix_model(EOS_TOO_SOON)
  ids, _ = greedy_search(step, cache, max_decode_length=6)
  assert trim(ids[0]) == [EOS]
  step, cache, _ = prefix_model(EOS_TOO_SOON)
  ids, score = greedy_search(step, cache, max_decode_length=6, min_length=2)
  assert trim(ids[0]) == [A, A, EOS]
  assert float(score[0]) == pytest.approx(math.log(0.6 * 0.8), abs=1e-5)
  step, cache, _ = prefix_model(EOS_TOO_SOON)
  ids, scores = beam_search(step, cache, beam_size=2, max_decode_length=6,
                            alpha=0.0, return_beams=True, min_length=2)
  assert [trim(b) for b in ids[0]] == [[A, A, EOS], [A, B, EOS]]
  np.testing.assert_allclose(scores[0], [math.log(0.48), math.log(0.24)],
                             atol=1e-5)
  # A length limit before the minimum: the output ends there, without EOS.
  step, cache, _ = prefix_model(EOS_TOO_SOON)
  ids, _ = greedy_search(step, cache, max_decode_length=2, min_length=5)
  assert list(ids[0].numpy()) == [A, A]


def test_min_length_holds_eos_back_from_sampling():
  # top_k=1: the most probable token the rules allow.
  sample = Sample(temperature=1.0, top_k=1, top_p=1.0, seed=0,
                  num_samples=1)
  for min_length, expected in [(0, [EOS]), (2, [A, A, EOS])]:
    step, cache, _ = prefix_model(EOS_TOO_SOON)
    ids, _ = sample_search(step, cache, 6, sample, tf.zeros([1], tf.int64),
                           excluded_id=PAD, min_length=min_length)
    assert trim(ids[0]) == expected


def eos_loving_model():
  """A tiny pre-norm model whose every step puts most of its probability on
  EOS: the decoder's final norm outputs 10 times EOS's embedding."""
  tf.keras.utils.set_random_seed(3)
  hp = HParams(num_layers=1, d_model=16, d_ff=32, num_heads=2, d_k=8, d_v=8,
               max_length=64, norm_position="pre")
  model = build_model(hp, vocab_size=30)
  model.decoder_norm.gamma.assign(tf.zeros([16]))
  model.decoder_norm.beta.assign(10.0 * model.embedding.embeddings[EOS])
  return model


@pytest.mark.parametrize("settings", ["beam_size=3", "beam_size=1",
                                      "sampling_temperature=1.0"])
def test_min_length_reaches_every_search_from_decode_hparams(settings):
  model = eos_loving_model()
  for min_length in (0, 4):
    # One search: each block of concurrent ones takes the same rules
    # (StepRules.of in search.decode), and one search traces no block
    # function at every call.
    settled = machine.settle(DecodeHParams.parse(
        f"{settings},min_length={min_length},concurrent_searches=1"))
    outputs = search_module.search_with_hparams(model, INPUTS,
                                                settled)["outputs"].numpy()
    first_eos = [trim(row).index(EOS) if EOS in row else None
                 for row in outputs]
    assert first_eos == [min_length] * len(outputs)


def test_a_token_that_would_repeat_an_ngram_is_impossible():
  seqs = tf.constant([[5, 6, 5, 6, 5], [7, 7, 7, 0, 0]])
  def banned(n, step):
    logits = _without_repeats(tf.zeros([2, 10]), seqs, tf.constant(step), n)
    return [set(np.flatnonzero(row < -1).tolist()) for row in logits.numpy()]
  # After 5 6 5: 5 and 6 were seen; 5 was followed by 6; no 3-gram starts
  # with 6 5 yet. After 7 7 7: 7 in every case.
  assert banned(1, 3) == [{5, 6}, {7}]
  assert banned(2, 3) == [{6}, {7}]
  assert banned(3, 3) == [set(), {7}]
  assert banned(3, 5)[0] == {6}  # 6 5 was followed by 6
  # An n-gram longer than the buffer bans nothing (and does not fail); a
  # huge n costs no more ops than a small one.
  assert banned(9, 5) == banned(10**9, 5) == [set(), set()]


def repeated_ngrams(row, n):
  """n-grams that occur twice in `row` up to its EOS."""
  tokens = trim(row)
  grams = [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
  return len(grams) - len(set(grams))


@pytest.mark.parametrize("settings", [
    "beam_size=3", "beam_size=1",
    "sampling_temperature=0.2,sampling_seed=1"])  # near the greedy choice
def test_no_repeat_ngram_size_reaches_every_search(tiny_model, settings):
  inputs = tf.constant([[5, 6, 7, 1, 0, 0]] * 4)
  counts = {}
  for n in (0, 2):
    # One search, as in the min_length test above; outputs of 12 tokens,
    # in which a bigram's ban reaches back to the first token.
    settled = machine.settle(DecodeHParams.parse(
        f"{settings},no_repeat_ngram_size={n},extra_length=8,"
        "concurrent_searches=1"))
    outputs = search_module.search_with_hparams(tiny_model, inputs,
                                                settled)["outputs"].numpy()
    counts[n] = sum(repeated_ngrams(row, 2) for row in outputs)
  assert counts[0] > 0  # the untrained model repeats itself...
  assert counts[2] == 0  # ...and no bigram comes twice with the setting


def test_negative_alpha_is_rejected():
  step, cache, _ = prefix_model({(): {EOS: 1.0}})
  with pytest.raises(ValueError, match="alpha"):
    beam_search(step, cache, beam_size=2, max_decode_length=3, alpha=-0.5)


INPUTS = tf.constant([[5, 6, 7, 1, 0, 0], [8, 9, 10, 11, 12, 1],
                      [13, 1, 0, 0, 0, 0]], tf.int32)


def uncached_decode_step(model):
  """decode_step that reruns the teacher-forced model on the whole prefix.

  Cache: {"inputs": [batch, src_len], "prefix": [batch, max_len] tokens
  chosen so far}; logits at position `step` depend only on prefix[:step].
  """

  def step_fn(ids, step, cache):
    prefix = cache["prefix"]
    at_previous = tf.equal(tf.range(tf.shape(prefix)[1]), step - 1)
    prefix = tf.where(at_previous, ids[:, tf.newaxis], prefix)
    logits = model({"inputs": cache["inputs"], "targets": prefix})
    return tf.gather(logits, step, axis=1), dict(cache, prefix=prefix)

  return step_fn


SEARCH_LENGTH = 10


def search_of(beam_size):
  """search(step, cache): greedy search (beam_size 1) or beam search over
  SEARCH_LENGTH steps, as (ids [batch, beams, length], scores [batch,
  beams])."""
  def search(step, cache):
    if beam_size == 1:
      ids, scores = greedy_search(step, cache, SEARCH_LENGTH)
      return ids[:, tf.newaxis], scores[:, tf.newaxis]
    return beam_search(step, cache, beam_size, SEARCH_LENGTH, alpha=0.6,
                       return_beams=True)
  return search


@pytest.fixture(scope="module")
def uncached_search(tiny_model):
  """uncached_search(beam_size): (ids, scores) numpy arrays of INPUTS
  searched with `uncached_decode_step(tiny_model)`; made once a beam size,
  as the cases of both cache kinds compare with the same search."""
  @functools.cache
  def get(beam_size):
    fn = tf.function(lambda x: search_of(beam_size)(
        uncached_decode_step(tiny_model),
        {"inputs": x,
         "prefix": tf.zeros([tf.shape(x)[0], SEARCH_LENGTH], tf.int32)}),
                     autograph=False)
    return tuple(t.numpy() for t in fn(INPUTS))
  return get


# Greedy search over fixed caches finds what it finds over growing ones
# (test_xla_compiled_search_matches): the beams, which reorder the caches,
# are searched over both.
@pytest.mark.parametrize("beam_size,growing", [(1, True), (4, False),
                                               (4, True)])
def test_cached_and_uncached_decoding_agree(tiny_model, uncached_search,
                                            beam_size, growing):
  """The search's cached step (2-D matmuls, the per-search output kernel,
  growing or fixed caches) picks the same ids as the teacher-forced call
  rerun on every prefix."""
  length = SEARCH_LENGTH
  cached = tf.function(lambda x: search_of(beam_size)(
      *tiny_model.prepare_decoding(x, None if growing else length)),
                       autograph=False)
  ids_c, scores_c = cached(INPUTS)
  ids_u, scores_u = uncached_search(beam_size)
  np.testing.assert_array_equal(ids_c, ids_u)
  np.testing.assert_allclose(scores_c, scores_u, atol=1e-4)
  assert np.count_nonzero(ids_c) > INPUTS.shape[0]  # not all empty outputs
  if beam_size == 1:  # a beam search of one beam is greedy search
    ids_b, scores_b = tf.function(lambda x: beam_search(
        *tiny_model.prepare_decoding(x, None), 1, length, alpha=0.0),
                                  autograph=False)(INPUTS)
    np.testing.assert_array_equal(ids_b, ids_c[:, 0])
    np.testing.assert_allclose(scores_b, scores_c[:, 0], atol=1e-4)


def test_float32_step_matmul_layouts(tiny_model):
  """A float32 search step multiplies by the decoding layouts made once per
  search: each position-wise map is one batch matmul of a single [1, rows,
  d_in] batch by a [1, d_out, d_in] kernel with transpose_b (fast with AVX2
  and AVX-512 alike), the output projection a 2-D MatMul by the [d_model,
  vocab] kernel without a transpose; other batch matmuls are the per-row
  attention products of rank-4 heads. No step transposes a weight."""
  decode_step, cache = tiny_model.prepare_decoding(INPUTS, None)
  step = tf.function(lambda ids, cache: decode_step(ids, 0, cache),
                     autograph=False)
  graph = step.get_concrete_function(
      tf.TensorSpec([None], tf.int32),
      tf.nest.map_structure(
          lambda t: tf.TensorSpec([None, *t.shape[1:]], t.dtype), cache)).graph
  ops = [op for op in graph.get_operations() if "MatMul" in op.type]
  matmuls = [op for op in ops if op.type == "MatMul"]
  assert len(matmuls) == 1
  d_model, vocab = tiny_model.config.d_model, tiny_model.embedding.vocab_size
  assert matmuls[0].inputs[1].shape.as_list() == [d_model, vocab]
  assert not matmuls[0].get_attr("transpose_b")
  batched = [op for op in ops if op.type != "MatMul"]
  position_wise = [op for op in batched if op.inputs[1].shape.rank == 3]
  # Per decoder layer: q, k, v, output (self), q, output (encdec), 2 FFN.
  assert len(position_wise) == 8 * len(tiny_model.decoder_layers)
  for op in position_wise:
    assert op.get_attr("adj_y")
    assert op.inputs[0].shape[0] == 1 and op.inputs[1].shape[0] == 1
  assert all(op.inputs[1].shape.rank == 4
             for op in batched if op not in position_wise)
  assert not [op for op in graph.get_operations() if op.type == "Transpose"
              and op.inputs[0].op.type in ("ReadVariableOp", "Placeholder")
              and op.inputs[0].shape.rank == 2]


@pytest.mark.parametrize("beam_size", [1, 4])
def test_decoding_layouts_keep_the_outputs(tiny_model, beam_size):
  """The float32 decoder kernels laid out for the one-batch matmul (as
  settled where oneDNN is held to AVX2) change how the products are
  computed, not what the search finds: the same ids as a search that
  multiplies by the kernels as stored (as settled where it may use
  AVX-512), and scores equal to rounding."""
  def search(laid_out_kernels):
    plan = dataclasses.replace(
        plan_of(beam_size=beam_size, alpha=0.6, extra_length=6),
        laid_out_kernels=laid_out_kernels)
    result = search_module.decode(tiny_model, INPUTS, plan)
    return result["outputs"].numpy(), result["scores"].numpy()

  layer = tiny_model.decoder_layers[0]
  laid_out = tiny_model.search_weights(laid_out_kernels=True).kernel(
      layer.feed_forward.w1)
  assert isinstance(laid_out, LaidOutKernel)
  assert laid_out.kernel.shape == (
      1, layer.feed_forward.d_ff, tiny_model.config.d_model)
  assert not tiny_model.search_weights(laid_out_kernels=False).kernels
  ids, scores = search(laid_out_kernels=True)
  # beam_size=1 is routed to greedy search (as tensor2tensor): one output
  # of 6 + 6 ids per input. (A beam search of one beam finds what greedy
  # search finds: test_cached_and_uncached_decoding_agree.)
  assert ids.shape == (3, 12) and scores.shape == (3,)
  plain_ids, plain_scores = search(laid_out_kernels=False)
  np.testing.assert_array_equal(ids, plain_ids)
  np.testing.assert_allclose(scores, plain_scores, atol=1e-5)
  assert np.count_nonzero(ids) > INPUTS.shape[0]  # not all empty outputs


def test_the_decoder_kernels_layout_follows_the_machine(monkeypatch):
  """Laid out where oneDNN may not use AVX-512 (the CPU lacks it, or
  ONEDNN_MAX_CPU_ISA holds oneDNN below it), as stored where it may; an
  export lays them out wherever it is made (test_export)."""
  from t2tlite import hardware
  assert hardware.onednn_may_use_avx512(["avx2", "avx512f"], "")
  assert not hardware.onednn_may_use_avx512(["avx2", "avx512f"], "avx2")
  assert hardware.onednn_may_use_avx512(["avx512f"], "AVX512_CORE")
  assert not hardware.onednn_may_use_avx512(["avx2", "fma"], "")
  hp = DecodeHParams.parse("beam_size=2")
  for cap, laid_out in (("AVX2", True),
                        ("", not hardware.onednn_may_use_avx512(None, ""))):
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    settled = machine.settle(hp)
    assert settled.laid_out_kernels == laid_out
    assert DecodePlan.from_settled(settled).laid_out_kernels == laid_out


@pytest.fixture(scope="module")
def one_layer_model():
  """tiny_model with one layer (seed 1): XLA compiles its search in about
  half the time, and every layer is searched alike."""
  tf.keras.utils.set_random_seed(1)
  hp = HParams(num_layers=1, d_model=32, d_ff=64, num_heads=4, d_k=8, d_v=8,
               max_length=64)
  return build_model(hp, vocab_size=40)


@pytest.mark.parametrize("beam_size,min_length,no_repeats",
                         [(1, 0, 0), (4, 3, 2)])
def test_xla_compiled_search_matches(one_layer_model, beam_size, min_length,
                                     no_repeats):
  def searcher(static_shapes):
    return lambda x: decode_ids(one_layer_model, x, beam_size=beam_size,
                                alpha=0.6, extra_length=8, return_beams=True,
                                static_shapes=static_shapes,
                                min_length=min_length,
                                no_repeat_ngram_size=no_repeats)

  search = searcher(static_shapes=True)
  plain = tf.function(search, autograph=False)(INPUTS)
  compiled_fn = tf.function(search, jit_compile=True, autograph=False)
  compiled = compiled_fn(INPUTS)
  # The whole search is one XLA computation, its loop an HLO while.
  hlo = compiled_fn.experimental_get_compiler_ir(INPUTS)(stage="hlo")
  assert " while(" in hlo
  np.testing.assert_array_equal(compiled["outputs"], plain["outputs"])
  np.testing.assert_allclose(compiled["scores"], plain["scores"], atol=1e-4)
  # The default graph-mode search, whose caches grow, finds the same.
  growing = tf.function(searcher(static_shapes=False), autograph=False)(INPUTS)
  np.testing.assert_array_equal(growing["outputs"], plain["outputs"])
  np.testing.assert_allclose(growing["scores"], plain["scores"], atol=1e-4)


def test_export_style_signature_with_dynamic_shapes(tiny_model):
  # What an exporter traces: batch and length unknown until run time.
  fn = tf.function(lambda x: decode_ids(tiny_model, x, beam_size=2,
                                        extra_length=3),
                   input_signature=[tf.TensorSpec([None, None], tf.int32)],
                   autograph=False)
  result = fn(INPUTS)
  assert result["outputs"].shape == (3, 9)
  assert result["scores"].shape == (3,)
  assert not np.any(result["outputs"].numpy()[:, 0] == PAD)  # PAD is masked


@pytest.mark.parametrize("searches", [1, 2])
def test_each_output_runs_to_its_input_length_plus_extra_length(tiny_model,
                                                               searches):
  """The untrained model never chooses EOS: each output is cut at its own
  limit, its input's length (EOS included) + extra_length, and comes back
  in its input's row (two searches search rows 1 and 2, then row 0)."""
  result = decode_ids(tiny_model, INPUTS, beam_size=1, extra_length=3,
                      concurrent_searches=searches)
  assert result["outputs"].shape == (3, 9)
  assert np.count_nonzero(result["outputs"], axis=1).tolist() == [7, 9, 5]


def test_an_empty_batch_has_no_outputs(tiny_model):
  result = decode_ids(tiny_model, INPUTS[:0], beam_size=2, extra_length=3)
  assert result["outputs"].shape[0] == result["scores"].shape[0] == 0


def test_a_prefix_may_fill_its_output_to_the_limit(tiny_model):
  # Row 2 (13, EOS) may hold 2 + 2 tokens: a prefix of 4 is its output,
  # one of 5 is refused.
  prefix = [[0] * 5, [0] * 5, [3, 4, 5, 6, 0]]
  result = decode_ids(tiny_model, INPUTS, target_prefix=tf.constant(prefix),
                      beam_size=1, extra_length=2)
  assert result["outputs"].numpy()[2].tolist() == [3, 4, 5, 6, 0, 0, 0, 0]
  prefix[2][4] = 7
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="target prefix longer than its output may hold"):
    decode_ids(tiny_model, INPUTS, target_prefix=tf.constant(prefix),
               beam_size=1, extra_length=2)


def test_learned_positions_cap_the_decode_length():
  hp = HParams(num_layers=1, d_model=16, d_ff=32, num_heads=2, d_k=8, d_v=8,
               max_length=8, position_encoding="learned")
  model = build_model(hp, vocab_size=20)
  result = decode_ids(model, INPUTS, beam_size=2, extra_length=50)
  assert result["outputs"].shape == (3, 8)  # not 6 + 50
  # Inputs longer than the table are cut to it rather than failing.
  long_inputs = tf.ones([2, 12], tf.int32)
  result = decode_ids(model, long_inputs, beam_size=2, extra_length=5)
  assert result["outputs"].shape == (2, 8)


def test_decode_hparams_parsing():
  hp = DecodeHParams.parse("beam_size=8, alpha=1,return_beams=true")
  assert (hp.beam_size, hp.alpha, hp.return_beams) == (8, 1.0, True)
  assert isinstance(hp.alpha, float)
  assert DecodeHParams.parse("") == DecodeHParams()
  with pytest.raises(ValueError, match="Unknown decode hparam 'beam'.*"
                     "beam_size"):
    DecodeHParams.parse("beam=3")
  with pytest.raises(ValueError, match="beam_size='x': expected a int"):
    DecodeHParams.parse("beam_size=x")
  with pytest.raises(ValueError, match="return_beams='yes': expected a bool"):
    DecodeHParams.parse("return_beams=yes")
  with pytest.raises(ValueError, match="beam_size must be >= 1"):
    DecodeHParams.parse("beam_size=0")
  assert DecodeHParams.parse("min_length=3").min_length == 3
  with pytest.raises(ValueError, match="no_repeat_ngram_size must be >= 0"):
    DecodeHParams.parse("no_repeat_ngram_size=-2")
  with pytest.raises(ValueError, match="min_length must be >= 0"):
    DecodeHParams.parse("min_length=-1")


FIXED_INPUTS = [[5, 9, 17, 33, 1, 0], [7, 7, 40, 21, 12, 1],
                [3, 1, 0, 0, 0, 0]]


def fixed_model(norm_position, embedding_std, matrix_scale):
  """A 50-token model of weights drawn from a fixed generator (seed 5):
  embeddings of std `embedding_std`, matrices of std matrix_scale /
  sqrt(fan-in), layer-norm gains 1 + N(0, 0.3), other vectors N(0, 0.3)."""
  hp = HParams(num_layers=2, d_model=32, d_ff=64, num_heads=4, dropout=0.0,
               max_length=64, norm_position=norm_position)
  model = build_model(hp, 50)
  rng = np.random.default_rng(5)
  for v in sorted(model.weights, key=lambda v: v.path):
    std = (embedding_std if "embedding" in v.path else
           matrix_scale / np.sqrt(v.shape[0]) if len(v.shape) > 1 else 0.3)
    v.assign((float("gamma" in v.path) +
              rng.normal(0, std, v.shape)).astype("float32"))
  return model


def assert_fixed_outputs(model, expected):
  """`expected`: {beam_size: (ids, scores)} of FIXED_INPUTS (alpha 0.6,
  extra_length 6)."""
  for beam_size, (ids, scores) in expected.items():
    result = decode_ids(model, tf.constant(FIXED_INPUTS),
                        beam_size=beam_size, alpha=0.6, extra_length=6)
    assert result["outputs"].numpy().tolist() == ids, beam_size
    np.testing.assert_allclose(result["scores"].numpy(), scores, atol=2e-3)


def test_outputs_of_a_fixed_model_are_those_of_earlier_releases():
  # Post-norm, so that rows differ; the expected ids and scores were
  # computed by the code before separate target vocabularies and decoding
  # constraints existed, and a shared-vocabulary model without a
  # constraint must still give them. Each row repeats one token, which
  # leaves a wrong reordering of the beams unseen: see the next test.
  assert_fixed_outputs(fixed_model("post", 1.0, 1.0), {
      1: ([[38] * 11 + [0], [16] * 12, [7] * 8 + [0] * 4],
          [-3.249, -7.303, -1.503]),
      3: ([[24] * 11 + [0], [16] * 12, [7] * 8 + [0] * 4],
          [-1.673, -3.910, -0.945])})


def test_outputs_of_a_fixed_model_of_varied_tokens_do_not_move():
  # Pre-norm, small embeddings and large matrices: the tokens change
  # within a row, an element ends at EOS, and beam search finds outputs
  # greedy search does not (the second row: EOS at once, -3.35 against
  # -39.61), so the beams' reordering decides the result. Computed at
  # 37ae67f; the same with oneDNN off and with its ISA capped at AVX2.
  assert_fixed_outputs(fixed_model("pre", 0.05, 3.0), {
      1: ([[19, 12, 12, 12] + [41] * 7 + [0],
           [9, 36, 22, 12, 12, 12, 12, 42, 29, 42, 42, 42],
           [41] * 8 + [0] * 4],
          [-35.589, -39.607, -24.911]),
      3: ([[19] + [12] * 6 + [41] * 4 + [0], [1] + [0] * 11,
           [41, 12] + [41] * 6 + [0] * 4],
          [-19.621, -3.351, -15.661])})


def test_beam_search_never_reorders_the_growing_keys_and_values(tiny_model):
  """With growing caches the beams of a batch element append their keys and
  values side by side ("per_batch": neither tiled nor reordered), and the
  search reorders only the lineage that says which of them each hypothesis
  sees (row-wise: tiled and reordered)."""
  decode_step, cache = tiny_model.prepare_decoding(INPUTS, None)
  batch, beams = INPUTS.shape[0], 4

  def checked_step(ids, step, cache):
    for layer in cache["per_batch"]["layers"]:
      tf.debugging.assert_equal(tf.shape(layer["k"])[0], batch)
      tf.debugging.assert_equal(tf.shape(layer["k"])[2], step * beams)
    tf.debugging.assert_equal(tf.shape(cache["lineage"]),
                              tf.stack([batch * beams, step]))
    return decode_step(ids, step, cache)

  ids, _ = tf.function(lambda: beam_search(checked_step, cache, beams, 10,
                                           alpha=0.6), autograph=False)()
  assert ids.shape == (batch, 10)
