"""Helpers of the trainer tests: a tiny model, a synthetic reversal dataset,
subprocesses that are always cleaned up, and TensorBoard event reading.

Scripts run in subprocesses import this module (its folder is put on
sys.path), so that every configuration trains the same model on the same data.
"""
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

from t2tlite.train.summaries import read_scalars  # noqa: F401  (tests use it)

SUPPORT_DIR = os.path.dirname(os.path.abspath(__file__))
# A model of a few thousand weights: a step takes milliseconds on a CPU.
# Eq. (3) without transformer_tiny's cool-down, whatever --train_steps is.
TINY_HPARAMS = ("num_layers=1,d_model=32,d_ff=64,num_heads=2,d_k=16,d_v=16,"
                "dropout=0.0,warmup_steps=10,learning_rate_cooldown_steps=0")
SYNTHETIC_VOCAB = 20
SYNTHETIC_LENGTH = 16


def reverse_dataset(context, rows=8):
  """For `distribute_datasets_from_function`: batches of `rows` pairs
  (digits 3..19 then EOS; the target reversed), padded to 16, the same
  sequence for every run; each input pipeline takes its own share."""
  import tensorflow as tf

  def example(i):
    length = tf.random.stateless_uniform([], [i, 1], 2, 15, tf.int32)
    ids = tf.random.stateless_uniform([length], [i, 2], 3, SYNTHETIC_VOCAB,
                                      tf.int32)
    return {"inputs": tf.concat([ids, [1]], 0),
            "targets": tf.concat([tf.reverse(ids, [0]), [1]], 0)}

  dataset = tf.data.Dataset.range(10**6).shard(
      context.num_input_pipelines, context.input_pipeline_id).map(example)
  shape = [SYNTHETIC_LENGTH]
  return dataset.padded_batch(rows, padded_shapes={"inputs": shape,
                                                   "targets": shape})


def tiny_hparams(hparams=""):
  """The HParams of `tiny_trainer`'s model, with `hparams` overrides."""
  import t2tlite
  overrides = ",".join(filter(None, [TINY_HPARAMS, "batch_size=128",
                                     "max_length=16", hparams]))
  return t2tlite.create_hparams("transformer_tiny", overrides)


def tiny_trainer(output_dir, strategy, hparams="", batches=None,
                 warm_start=None, **config):
  """A Trainer of the tiny model on `reverse_dataset` (training and eval;
  its first `batches` batches per input pipeline when given, else endless),
  weights initialised with seed 1 (then `warm_start`'s, if given)."""
  import keras
  from t2tlite.train.config import TrainConfig
  from t2tlite.train.trainer import Trainer
  keras.utils.set_random_seed(1)
  hp = tiny_hparams(hparams)
  config.setdefault("train_steps", 10)
  config.setdefault("log_every_steps", 1)
  config.setdefault("local_eval_frequency", 0)
  config.setdefault("eval_steps", 2)
  return Trainer(
      hp, TrainConfig(output_dir=output_dir, **config), strategy,
      SYNTHETIC_VOCAB,
      lambda split, training: strategy.distribute_datasets_from_function(
          lambda context: reverse_dataset(context).take(batches or -1)),
      warm_start=warm_start)


# A script's first lines: TensorFlow then loads as the t2t-* commands load
# it (t2tlite.lean_start), in about half the CPU of a plain import.
LEAN_START = "from t2tlite import lean_start\nlean_start.install()\n"


def python_script(body):
  """Source of a script that starts lean (LEAN_START), can import this
  module, then runs `body`."""
  return f"{LEAN_START}import sys\nsys.path.insert(0, {SUPPORT_DIR!r})\n{body}"


def console_script(name):
  """Path of an installed console script (next to this Python, or on PATH)."""
  path = os.path.join(os.path.dirname(sys.executable), name)
  return path if os.path.exists(path) else name


def user_env():
  """This environment without the suite's TF_NUM_INTRAOP_THREADS
  (tests/conftest.py), which t2t-decoder and bench/run.py leave alone: so
  that they set TensorFlow's threads as they would for a user."""
  return {k: v for k, v in os.environ.items()
          if k != "TF_NUM_INTRAOP_THREADS"}


@contextlib.contextmanager
def processes():
  """Yields a list to append Popen objects to; kills the live ones on exit."""
  started = []
  try:
    yield started
  finally:
    for proc in started:
      if proc.poll() is None:
        proc.kill()
      proc.wait()


def start(args, log_path, env=None):
  """Starts `args` with stdout and stderr into log_path."""
  full_env = dict(os.environ, **(env or {}))
  with open(log_path, "w") as log:
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                            env=full_env, start_new_session=True)


def run(args, timeout, env=None, cwd=None):
  """Runs args to the end (killed after `timeout` s); (returncode, output)."""
  full_env = dict(os.environ, **(env or {}))
  proc = subprocess.Popen(args, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=full_env,
                          start_new_session=True, cwd=cwd)
  try:
    output, _ = proc.communicate(timeout=timeout)
  finally:
    if proc.poll() is None:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
  return proc.returncode, output


def command(name, *args, timeout=600):
  """Runs an installed t2t-* command to the end; returns its output (stderr
  merged in), failing the test with the output's tail on a non-zero exit."""
  code, output = run([console_script(name), *args], timeout=timeout)
  assert code == 0, f"{name} exited {code}:\n{output[-5000:]}"
  return output


def catches_sigterm(pid="self"):
  """True if the process has a handler for SIGTERM (Linux: bit 15 of SigCgt
  in /proc/PID/status), whether installed from Python or from C++."""
  with open(f"/proc/{pid}/status") as status:
    for line in status:
      if line.startswith("SigCgt:"):
        return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
  raise RuntimeError(f"/proc/{pid}/status has no SigCgt line")


def free_ports(count):
  """`count` TCP ports free on 127.0.0.1 right now."""
  sockets = [socket.socket() for _ in range(count)]
  try:
    for s in sockets:
      s.bind(("127.0.0.1", 0))
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def latest_step(output_dir):
  """Step of the newest checkpoint named in output_dir/checkpoint, or None."""
  try:
    with open(os.path.join(output_dir, "checkpoint")) as f:
      match = re.search(r'^model_checkpoint_path: ".*ckpt-(\d+)"', f.read(),
                        re.M)
  except FileNotFoundError:
    return None
  return int(match.group(1)) if match else None


def last_json_line(output):
  """The last line of `output` that parses as JSON."""
  for line in reversed(output.splitlines()):
    with contextlib.suppress(ValueError):
      return json.loads(line)
  raise AssertionError(f"no JSON line in output:\n{output[-3000:]}")


def poll(condition, secs, step=0.02):
  """Whether condition() became true within `secs` (checked every `step`)."""
  deadline = time.time() + secs
  while time.time() < deadline:
    if condition():
      return True
    time.sleep(step)
  return False
