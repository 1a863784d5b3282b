"""Training and decoding speed on synthetic data; one JSON line per result.

    python bench/run.py --work train_base [--mixed_precision=bfloat16] [--xla]
    python bench/run.py --work train_tiny [...]
    python bench/run.py --work train_small [...]
    python bench/run.py --work decode_base [--mixed_precision=bfloat16] [--xla | --int8]
                        [--concurrent_searches N]
    python bench/run.py --work scaling [--mixed_precision=bfloat16] [--xla]

Works (the same work as the published peer figures, so results compare):
  train_base   transformer_base (6+6 layers, d_model 512, d_ff 2048, 8 heads,
               dropout 0.1, label smoothing 0.1, Adam + eq. (3)), shared vocab
               37,000, 64 pairs of 32 source and 32 target tokens a step.
               Figure: target tokens per second.
  train_tiny   2+2 layers, d_model 256, d_ff 1024, 4 heads, vocab 8,000,
               128 pairs x 32 tokens.
  train_small  transformer_small (3+3 layers, d_model 256, d_ff 1024, 4
               heads, dropout 0.3), vocab 8,000, 128 pairs x 32 tokens: the
               model and batch (4,096 tokens) of the Multi30k recipe in
               bench/real_data.sh.
  decode_base  transformer_base, beam 4, alpha 0.6, 32 sources of 32 tokens,
               exactly 32 decoding steps: EOS is never chosen (decode
               hparam min_length=32, as the peer harness gives CTranslate2
               min_decoding_length=32), so no hypothesis finishes early.
               Settled as t2t-decoder settles its decode hparams
               (`machine.settle`): concurrent searches as it picks them
               (decode hparam concurrent_searches, auto; 1 with --xla),
               or --concurrent_searches, with TensorFlow's intra-op
               threads set as it sets them (the JSON line's
               intra_op_threads, and then no peak_now), int8 where it
               computes, and the precision. The search's
               weights are made once, before the timed runs, as
               t2t-decoder makes them (`search.fixed_search_weights`).
               Figure: sentences per second.
  scaling      train_base step time against sequence length (32..512) and
               against batch size (sentences of 32 tokens), one line each.

Everything goes through the project's own code: `t2tlite.build_model`, the
real training step of `t2tlite.train.trainer.Trainer` (`Trainer.train_step`:
loss of
train/losses.py, Adam + schedule of train/schedules.py, global-norm and
all-reduce included) and `t2tlite.decode.search.decode` (the beam
search that t2t-decoder and the exported SavedModel run).

Synthetic ids are uniform in [2, vocab) (no padding, no EOS), weights are
randomly initialised, seeds fixed. Each timed step is synchronous (its result
is read back); the figure is the median over `--steps` steps after `--warmup`
untimed ones (the first includes tracing and XLA compilation).

The first line printed is the machine's fingerprint
(`bench/fingerprint.py`: CPU, flags, GPUs, TF, matmul peaks); every
JSON line repeats it under "machine".
"""
import argparse
import dataclasses
import json
import platform
import resource
import statistics
import sys
import tempfile
import time

import numpy as np

import t2tlite  # first: it turns oneDNN on before TensorFlow loads
import keras
import tensorflow as tf

from t2tlite import graph_options
from t2tlite.decode.machine import settle
from t2tlite.decode.search import decode, fixed_search_weights
from t2tlite.decode.strategy import DecodePlan
from t2tlite.decode.settings import DecodeHParams
from t2tlite.train import strategy as strategy_lib
from t2tlite.train.config import TrainConfig
from t2tlite.train.trainer import Trainer

from fingerprint import fingerprint, matmul_gflops

TRAIN_WORKS = {
    # name: (hparams set, overrides, vocab, batch sentences, length)
    "train_base": ("transformer_base", "", 37000, 64, 32),
    "train_tiny": ("transformer_base",
                   "num_layers=2,d_model=256,d_ff=1024,num_heads=4,d_k=64,"
                   "d_v=64", 8000, 128, 32),
    "train_small": ("transformer_small", "", 8000, 128, 32),
}
DECODE_BASE = ("transformer_base", "", 37000, 32, 32)  # + beam 4, alpha 0.6
SCALING_LENGTHS = (32, 64, 128, 256, 512)
SCALING_BATCHES = (16, 32, 64, 128, 256)


def versions():
  return {"tf": tf.__version__, "keras": keras.__version__,
          "python": platform.python_version(), "numpy": np.__version__}


def peak_rss_mb():
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def load_average():
  return [float(x) for x in open("/proc/loadavg").read().split()[:3]]


def timed(fn, steps, warmup):
  """Runs fn() warmup + steps times; returns (step seconds, first seconds)."""
  first = None
  for i in range(warmup):
    start = time.perf_counter()
    fn()
    if i == 0:
      first = time.perf_counter() - start
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return times, first


def transformer_flops(hp, vocab, batch, src_len, tgt_len):
  """Matmul FLOPs of one teacher-forced forward pass (2 per multiply-add).

  Per encoder layer (S = batch * src_len tokens, d = d_model, a = h * d_k,
  o = h * d_v): projections 2 S d (2a + o) + output 2 S o d, scores and
  weighted sum 2 batch h src_len^2 (d_k + d_v), feed-forward 4 S d d_ff.
  Per decoder layer (T = batch * tgt_len): the same self-attention and
  feed-forward on T, plus encoder-decoder attention: queries and output on T,
  keys and values on S, scores 2 batch h tgt_len src_len (d_k + d_v).
  Pre-softmax projection: 2 T d vocab. (Embedding lookups, softmax, layer
  norm and the optimizer are not matmuls and are left out.)
  A training step is 3 forward passes (backward = 2 x forward).
  """
  d, h, dk, dv, dff = hp.d_model, hp.num_heads, hp.d_k, hp.d_v, hp.d_ff
  a, o = h * dk, h * dv
  s_tok, t_tok = batch * src_len, batch * tgt_len

  def self_attention(tokens, length):
    return (2 * tokens * d * (2 * a + o) + 2 * tokens * o * d +
            2 * batch * h * length * length * (dk + dv))

  encoder = self_attention(s_tok, src_len) + 4 * s_tok * d * dff
  encdec = (2 * t_tok * d * a + 2 * t_tok * o * d + 2 * s_tok * d * (a + o) +
            2 * batch * h * tgt_len * src_len * (dk + dv))
  decoder = self_attention(t_tok, tgt_len) + encdec + 4 * t_tok * d * dff
  return hp.num_layers * (encoder + decoder) + 2 * t_tok * d * vocab


def decode_flops(hp, vocab, batch, src_len, beam, steps):
  """Matmul FLOPs of encoding `batch` sources and `steps` beam-search steps.

  Per step (R = batch * beam rows, cache of `steps` positions, attended in
  full under the causal mask), per decoder layer: self-attention projections
  2 R d (2a + o) + 2 R o d, scores 2 R h steps (d_k + d_v), encoder-decoder
  queries and output 2 R d a + 2 R o d, scores 2 R h src_len (d_k + d_v),
  feed-forward 4 R d d_ff; then the projection 2 R d vocab. Once per
  sentence: the encoder and the encoder-decoder keys and values.
  """
  d, h, dk, dv, dff = hp.d_model, hp.num_heads, hp.d_k, hp.d_v, hp.d_ff
  a, o = h * dk, h * dv
  rows, s_tok = batch * beam, batch * src_len
  layer_step = (2 * rows * d * (2 * a + o) + 2 * rows * o * d +
                2 * rows * h * steps * (dk + dv) + 2 * rows * d * a +
                2 * rows * o * d + 2 * rows * h * src_len * (dk + dv) +
                4 * rows * d * dff)
  per_step = hp.num_layers * layer_step + 2 * rows * d * vocab
  encoder = hp.num_layers * (
      2 * s_tok * d * (2 * a + o) + 2 * s_tok * o * d +
      2 * batch * h * src_len * src_len * (dk + dv) + 4 * s_tok * d * dff +
      2 * s_tok * d * (a + o))
  return steps * per_step + encoder


def read_back(value):
  """Copies a result (tensors, possibly bfloat16, or a nest of them) to the
  host, so that its computation has finished."""
  return tf.nest.map_structure(
      lambda t: t.numpy() if hasattr(t, "numpy") else np.asarray(t), value)


def round_robin(fns, rounds):
  """Times each of fns (name -> no-argument callable returning tensors)
  once per round, in turn, `rounds` rounds: on a shared machine, load
  changes then affect every variant alike.

  Returns:
    {name: [seconds per call]}.
  """
  times = {name: [] for name in fns}
  for _ in range(rounds):
    for name, fn in fns.items():
      start = time.perf_counter()
      read_back(fn())
      times[name].append(time.perf_counter() - start)
  return times


def random_ids(rng, vocab, batch, length):
  return tf.constant(rng.randint(2, vocab, size=(batch, length)), tf.int32)


def report(args, work, extra, times, first, params, flops):
  median = statistics.median(times)
  achieved = flops / median / 1e9
  peak_now = {}
  # 0: TensorFlow's own choice. Set (decode_base's concurrent searches),
  # a matmul measured now would be one of that many threads, not the
  # machine's peak, so none is.
  threads = tf.config.threading.get_intra_op_parallelism_threads()
  if args.peak_now and not threads:
    dtype = args.mixed_precision or "float32"
    # The machine is shared: the work's GFLOP/s is put beside a matmul
    # measured right after it, in the same process and dtype.
    gflops = matmul_gflops(dtype, n=2048, repeats=3)
    peak_now = {"matmul_gflop_per_s_now": round(gflops, 1),
                "fraction_of_peak_now": round(achieved / gflops, 3)}
  result = {
      "work": work, "mixed_precision": args.mixed_precision or "float32",
      "xla": args.xla, **extra,
      "step_s_median": round(median, 4),
      "step_s_min": round(min(times), 4), "step_s_max": round(max(times), 4),
      "gflop_per_step": round(flops / 1e9, 1),
      "gflop_per_s": round(achieved, 1), **peak_now,
      "intra_op_threads": threads or None,
      "steps": len(times), "warmup": args.warmup,
      "first_step_s": round(first, 2) if first is not None else None,
      "peak_rss_mb": round(peak_rss_mb(), 1), "params": params,
      "versions": versions(), "machine": fingerprint(),
      "loadavg": load_average(), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                       time.gmtime()),
  }
  print(json.dumps(result), flush=True)
  return result


def train_result(args, work, hparams_set, overrides, vocab, batch, length):
  """One Trainer on synthetic batches; its real `train_step` timed."""
  keras.utils.set_random_seed(args.seed)
  hp = t2tlite.create_hparams(hparams_set, overrides)
  strategy = strategy_lib.make_strategy(0)
  rng = np.random.RandomState(args.seed)
  features = {"inputs": random_ids(rng, vocab, batch, length),
              "targets": random_ids(rng, vocab, batch, length)}

  def make_dataset(split, training):
    del split, training
    return strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensors(features).repeat())

  with tempfile.TemporaryDirectory() as output_dir:
    config = TrainConfig(output_dir=output_dir, train_steps=10**9,
                         schedule="train", xla=args.xla,
                         mixed_precision=args.mixed_precision)
    trainer = Trainer(hp, config, strategy, vocab, make_dataset)
    iterator = iter(make_dataset("train", True))
    losses = []

    def step():
      out = trainer.train_step(iterator)  # the step Trainer.train() runs
      losses.append(float(out["loss"]) / float(out["target_tokens"]))

    times, first = timed(step, args.steps, args.warmup)
    params = trainer.model.count_params()
  tokens = batch * length
  extra = {"batch": batch, "source_length": length, "target_length": length,
           "vocab_size": vocab, "target_tokens_per_step": tokens,
           "tokens_per_s": round(tokens / statistics.median(times), 1),
           "first_loss": round(losses[0], 4), "last_loss": round(losses[-1], 4)}
  flops = 3 * transformer_flops(hp, vocab, batch, length, length)
  return report(args, work, extra, times, first, params, flops)


def decode_settled(args):
  """decode_base's decode hparams settled as t2t-decoder settles its own
  (`machine.settle`, before TensorFlow runs): concurrent searches
  (--concurrent_searches, else auto; 1 with XLA, whose compiled search runs
  as one op) with TensorFlow's intra-op threads set for them, int8 where
  it computes, and the compute precision. extra_length 0 and min_length
  `length`, so that sources of `length` tokens give exactly `length`
  decoding steps, EOS never chosen (as the peer harness asks CTranslate2
  with min_decoding_length)."""
  length = DECODE_BASE[4]
  searches = args.concurrent_searches or (1 if args.xla else 0)
  hp = DecodeHParams(beam_size=args.beam_size, alpha=args.alpha,
                     extra_length=0, min_length=length, int8=args.int8,
                     concurrent_searches=searches)
  settled = settle(hp, args.mixed_precision or "float32", set_threads=True)
  kernels = getattr(args, "decoder_kernels", "settled")
  if kernels == "settled":
    return settled
  return dataclasses.replace(settled,
                             laid_out_kernels=kernels == "laid_out")


class Searching:
  """A tf.function traced and called with a search's graph options, as a
  Decoder's (`graph_options.one_round`)."""

  def __init__(self, function):
    self.function = function

  def __call__(self, *args):
    with graph_options.one_round():
      return self.function(*args)

  def get_concrete_function(self, *args):
    with graph_options.one_round():
      return self.function.get_concrete_function(*args)


def decode_search_fn(model, settled, xla):
  """The timed function: `search.decode` of the plan `settled` makes, with
  the search's weights made once and its graph options, as t2t-decoder's
  Decoder makes them."""
  weights = fixed_search_weights(model, settled.int8, settled.weights_first,
                                 laid_out_kernels=settled.laid_out_kernels)
  plan = DecodePlan.from_settled(settled)
  return Searching(tf.function(
      lambda inputs: decode(model, inputs, plan, search_weights=weights,
                            static_shapes=xla),
      jit_compile=xla, autograph=False))


def decode_base_search(settled, seed=1, xla=False):
  """decode_base's model (random weights from `seed`), its inputs (int32
  [32, 32]) and its search function, settled by `decode_settled`."""
  hparams_set, overrides, vocab, batch, length = DECODE_BASE
  keras.utils.set_random_seed(seed)
  model = t2tlite.build_model(
      t2tlite.create_hparams(hparams_set, overrides), vocab,
      dtype=settled.precision.keras_policy)
  inputs = random_ids(np.random.RandomState(seed), vocab, batch, length)
  return model, inputs, decode_search_fn(model, settled, xla)


def decode_result(args, settled):
  hparams_set, overrides, vocab, batch, length = DECODE_BASE
  keras.utils.set_random_seed(args.seed)
  hp = t2tlite.create_hparams(hparams_set, overrides)
  model = t2tlite.build_model(hp, vocab,
                              dtype=settled.precision.keras_policy)
  rng = np.random.RandomState(args.seed)
  inputs = random_ids(rng, vocab, batch, length)
  search = decode_search_fn(model, settled, args.xla)
  outputs = []

  def step():
    outputs.append(search(inputs)["outputs"].numpy())

  times, first = timed(step, args.steps, args.warmup)
  extra = {"batch": batch, "source_length": length, "decode_steps": length,
           "beam_size": args.beam_size, "alpha": args.alpha,
           "int8": args.int8, "concurrent_searches": settled.searches,
           "vocab_size": vocab,
           "sentences_per_s": round(batch / statistics.median(times), 2),
           "output_tokens_per_s": round(batch * length /
                                        statistics.median(times), 1),
           "outputs_checksum": int(outputs[-1].astype(np.int64).sum())}
  if args.check_uncompiled:
    # The outputs must equal those of the plain (uncompiled graph) search.
    plain = decode_search_fn(model, settled, False)
    extra["same_as_uncompiled"] = bool(
        np.array_equal(plain(inputs)["outputs"].numpy(), outputs[-1]))
  flops = decode_flops(hp, vocab, batch, length, args.beam_size, length)
  return report(args, "decode_base", extra, times, first,
                model.count_params(), flops)


def scaling_results(args):
  hparams_set, overrides, vocab, batch, length = TRAIN_WORKS["train_base"]
  steps, warmup = args.steps, args.warmup
  for sweep_length in args.lengths:
    # Fewer steps when a step is long.
    big = sweep_length * args.scaling_batch >= 8192
    args.steps, args.warmup = (3, 1) if big else (steps, warmup)
    train_result(args, "scaling_length", hparams_set, overrides, vocab,
                 args.scaling_batch, sweep_length)
  for sweep_batch in args.batches:
    big = sweep_batch * length >= 8192
    args.steps, args.warmup = (3, 1) if big else (steps, warmup)
    train_result(args, "scaling_batch", hparams_set, overrides, vocab,
                 sweep_batch, length)


def main(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__.splitlines()[0],
      formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
  parser.add_argument("--work", required=True,
                      choices=sorted(TRAIN_WORKS) + ["decode_base", "scaling"])
  parser.add_argument("--mixed_precision",
                      choices=["float32", "bfloat16", "float16"],
                      default=None)
  parser.add_argument("--xla", action="store_true",
                      help="XLA-compile the train micro-step / the search")
  parser.add_argument("--steps", type=int, default=7,
                      help="timed steps (the median is reported); >= 5")
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--seed", type=int, default=1)
  parser.add_argument("--beam_size", type=int, default=4)
  parser.add_argument("--alpha", type=float, default=0.6)
  parser.add_argument("--no_peak_now", dest="peak_now",
                      action="store_false",
                      help="skip the 2048^3 matmul measured after the run")
  parser.add_argument("--decoder_kernels", default="settled",
                      choices=["settled", "laid_out", "stored"],
                      help="decode: a float32 search's decoder kernels as "
                      "settled for this machine (stored where oneDNN may "
                      "use AVX-512, else laid out), or either form")
  parser.add_argument("--int8", action="store_true",
                      help="decode: int8 matmuls in the decoder "
                      "(decode hparam int8)")
  parser.add_argument("--concurrent_searches", type=int, default=0,
                      help="decode: searches over parts of the batch run "
                      "side by side (decode hparam concurrent_searches); 0: "
                      "as t2t-decoder picks (auto)")
  parser.add_argument("--check_uncompiled", action="store_true",
                      help="decode: also compare outputs with the uncompiled "
                      "search")
  parser.add_argument("--lengths", type=lambda s: [int(x) for x in
                                                   s.split(",")],
                      default=list(SCALING_LENGTHS),
                      help="scaling: sequence lengths")
  parser.add_argument("--scaling_batch", type=int, default=16,
                      help="scaling: sentences per step in the length sweep")
  parser.add_argument("--batches", type=lambda s: [int(x) for x in
                                                   s.split(",")],
                      default=list(SCALING_BATCHES),
                      help="scaling: batch sizes (length 32)")
  args = parser.parse_args(argv)
  if args.int8 and (args.xla or args.work != "decode_base"):
    parser.error("--int8 is for --work decode_base without --xla (XLA has "
                 "no form of oneDNN's int8 kernel)")
  if args.work == "decode_base":
    settled = decode_settled(args)  # as t2t-decoder, before TensorFlow runs
    if args.int8 and not settled.int8:  # a reason, not a traceback
      print(f"bench/run.py --int8: int8 is not available here: "
            f"{settled.int8_reason}.", flush=True)
      return 1
  print(f"machine: {fingerprint()}", flush=True)
  if args.work in TRAIN_WORKS:
    train_result(args, args.work, *TRAIN_WORKS[args.work])
  elif args.work == "decode_base":
    decode_result(args, settled)
  else:
    scaling_results(args)


if __name__ == "__main__":
  sys.exit(main())
