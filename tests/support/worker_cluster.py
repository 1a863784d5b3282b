"""Two t2t-trainer workers on 127.0.0.1 training a tiny model: the harness of
the fault tests (tests/end_to_end/test_faults.py); and `wait_until`, the
polling with a deadline that every test waiting on a process uses."""
import json
import re
import sys
import time

from t2tlite.train import peer_watch
import train_helpers

PREEMPTED, WORKER_LOST = 75, 69  # t2tlite.train.preemption's exit codes
WORKER_TIMEOUT_SECS = 10
# The longest a survivor may take to find a silent (frozen) peer, and a peer
# whose address refuses connections (killed): the watch's bounds.
LOSS_BOUND_SECS = peer_watch.bound_secs(WORKER_TIMEOUT_SECS)
REFUSED_BOUND_SECS = peer_watch.refused_bound_secs(WORKER_TIMEOUT_SECS)
LONG = 10**6  # steps: the faults stop training long before


def trainer_command(data_dir, output_dir, *extra):
  """t2t-trainer training the tiny model; in float32, whatever this machine
  would pick (the faults do not depend on it, and its step traces faster)."""
  return [train_helpers.console_script("t2t-trainer"),
          "--problem=algorithmic_reverse", "--hparams_set=transformer_tiny",
          f"--hparams={train_helpers.TINY_HPARAMS},batch_size=128,"
          "max_length=16", f"--data_dir={data_dir}",
          f"--output_dir={output_dir}", "--schedule=train",
          "--random_seed=3", "--log_step_count_steps=1",
          "--mixed_precision=float32",
          f"--worker_timeout_secs={WORKER_TIMEOUT_SECS}", *extra]


def start_two_workers(started, tmp_path, script_for):
  """Starts two Python workers of one cluster on 127.0.0.1 (TF_CONFIG for
  MultiWorkerMirroredStrategy), appending them to `started`
  (`train_helpers.processes()`): worker i runs `script_for(i)`, its output
  in tmp_path/worker{i}.txt."""
  ports = train_helpers.free_ports(2)
  cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
  for index in range(2):
    tf_config = json.dumps({"cluster": cluster,
                            "task": {"type": "worker", "index": index}})
    started.append(train_helpers.start(
        [sys.executable, "-c", train_helpers.python_script(script_for(index))],
        tmp_path / f"worker{index}.txt", env={"TF_CONFIG": tf_config}))


def progress_steps(log_path):
  """Steps of the progress lines ("step N/M ...") written so far."""
  return [int(s) for s in re.findall(r"\bstep (\d+)/\d+ ",
                                     log_path.read_text())]


def wait_until(condition, log_paths, procs, what, timeout=180):
  """Polls `condition()` until true; fails with a log's tail if a process
  ends first, or with `what` after `timeout` s."""
  deadline = time.time() + timeout
  while not condition():
    for proc, path in zip(procs, log_paths):
      assert proc.poll() is None, path.read_text()[-5000:]
    assert time.time() < deadline, f"{what} not reached in {timeout} s"
    time.sleep(0.2)


def wait_for_step(log_paths, procs, step, timeout=180):
  """Waits until every log shows a progress line at `step` or later."""
  wait_until(lambda: all(max(progress_steps(p), default=-1) >= step
                         for p in log_paths),
             log_paths, procs, f"step {step}", timeout)


class Cluster:
  """Two t2t-trainer workers on 127.0.0.1 (fresh ports for each start)."""

  def __init__(self, tmp_path, started):
    self.tmp_path, self.started, self.runs = tmp_path, started, 0

  def start(self, data_dir, output_dir, *extra, stagger_secs=0):
    """Starts both workers, worker 1 `stagger_secs` after worker 0 (which
    waits for it); returns ([proc0, proc1], [log0, log1])."""
    self.runs += 1
    cluster = {"worker": [f"127.0.0.1:{port}"
                          for port in train_helpers.free_ports(2)]}
    procs, logs = [], []
    for index in range(2):
      if index:
        time.sleep(stagger_secs)
      tf_config = json.dumps({"cluster": cluster,
                              "task": {"type": "worker", "index": index}})
      log = self.tmp_path / f"run{self.runs}_worker{index}.txt"
      procs.append(train_helpers.start(
          trainer_command(data_dir, output_dir, *extra), log,
          env={"TF_CONFIG": tf_config}))
      logs.append(log)
    self.started.extend(procs)
    return procs, logs
