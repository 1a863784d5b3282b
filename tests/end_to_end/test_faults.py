"""t2t-trainer under faults: a worker killed or frozen, SIGTERM (preemption) to
either worker or to a single process, Ctrl-C; each run is then restarted with
the same command and resumes from the checkpoint the fault left. Also SIGTERM
to a worker waiting for the chief's data generation, which the chief then
finds lost.

Every process is the trainer itself (signals go to its own PID) and is killed
and reaped by `train_helpers.processes` whatever happens."""
import json
import os
import pathlib
import re
import signal
import sys
import time

import pytest

import train_helpers
from worker_cluster import (LONG, LOSS_BOUND_SECS, PREEMPTED,
                            REFUSED_BOUND_SECS, WORKER_LOST,
                            WORKER_TIMEOUT_SECS, Cluster, progress_steps,
                            trainer_command, wait_for_step, wait_until)

def resumed_step(output):
  match = re.search(r"Resumed from \S+/ckpt-(\d+) at step (\d+)", output)
  assert match, output[-3000:]
  assert match.group(1) == match.group(2)
  return int(match.group(2))


def finish(procs, logs, timeout=120):
  """Waits for every process; returns their exit codes."""
  for proc in procs:
    proc.wait(timeout=timeout)
  return [proc.returncode for proc in procs]


def assert_preempted_at_reached_step(procs, logs, output_dir):
  """Both workers exit 75 after one checkpoint at the step they reached."""
  codes = finish(procs, logs)
  outputs = [log.read_text() for log in logs]
  assert codes == [PREEMPTED] * 2, [o[-3000:] for o in outputs]
  saved = train_helpers.latest_step(str(output_dir))
  for output, log in zip(outputs, logs):
    assert f"at step {saved}." in output, output[-3000:]
    assert max(progress_steps(log)) == saved, output[-3000:]
    assert "Traceback" not in output, output[-5000:]
  return saved


def lose_worker_1(cluster, data_dir, output_dir, fault):
  """Trains until a checkpoint exists, sends `fault` to worker 1, checks
  worker 0's exit; returns the newest checkpoint's step."""
  procs, logs = cluster.start(data_dir, output_dir, f"--train_steps={LONG}",
                              "--save_checkpoints_secs=1")
  wait_for_step(logs, procs, 3)
  wait_until(lambda: train_helpers.latest_step(str(output_dir)) is not None,
             logs, procs, "a checkpoint")
  os.kill(procs[1].pid, fault)
  sent = time.time()
  procs[0].wait(timeout=LOSS_BOUND_SECS + 30)
  elapsed = time.time() - sent
  output = logs[0].read_text()
  assert procs[0].returncode == WORKER_LOST, output[-5000:]
  latest = train_helpers.latest_step(str(output_dir))
  if fault == signal.SIGKILL:
    # Its address refuses connections: found after a short grace, long
    # before the worker timeout (or by a collective that failed at once).
    assert re.search(r"/job:worker/task:1 is gone: its address "
                     r"127\.0\.0\.1:\d+ refuses connections", output), (
                         output[-3000:])
    assert elapsed < REFUSED_BOUND_SECS + 1, elapsed
  else:
    # Frozen: found by the peer watch after the worker timeout, not sooner,
    # while worker 0 waited on a collective, long before its timeout.
    assert re.search(r"/job:worker/task:1 \(127\.0\.0\.1:\d+\) has not "
                     f"answered for {WORKER_TIMEOUT_SECS} s", output), (
                         output[-3000:])
    # 1 s for the exit and this process's polling, on a loaded machine.
    assert WORKER_TIMEOUT_SECS <= elapsed < LOSS_BOUND_SECS + 1, elapsed
  assert f"ckpt-{latest} (step {latest})" in output, output[-3000:]
  assert "Resume with, on every worker:\n  t2t-trainer " in output
  assert "Traceback" not in output, output[-5000:]
  if fault == signal.SIGSTOP:
    os.kill(procs[1].pid, signal.SIGCONT)
  procs[1].kill()
  procs[1].wait()
  return latest, elapsed


def resume_then_preempt(cluster, data_dir, output_dir, latest, target):
  """Restarts both workers, which resume from `latest`; SIGTERM to worker
  `target`; both save at the step reached. Returns that step."""
  procs, logs = cluster.start(data_dir, output_dir, f"--train_steps={LONG}",
                              "--save_checkpoints_secs=3600")
  wait_for_step(logs, procs, latest + 3)
  os.kill(procs[target].pid, signal.SIGTERM)
  saved = assert_preempted_at_reached_step(procs, logs, output_dir)
  # The newest checkpoint may have been completed by the chief after the
  # fault; the restart takes the newest one.
  assert resumed_step(logs[0].read_text()) >= latest
  assert "SIGTERM received" in logs[target].read_text()
  return saved


def resume_to_the_end(cluster, data_dir, output_dir, saved):
  """Both resume and train to step 300, evaluating at 150 and 300 (the
  other worker waits while the chief decodes dev) and writing checkpoints:
  no false loss on a loaded machine. Worker 1 starts 4 s late (longer than
  the refusal grace): worker 0 waits for it without finding it lost."""
  steps = 300
  procs, logs = cluster.start(
      data_dir, output_dir, f"--train_steps={steps}",
      "--schedule=train_and_evaluate", "--local_eval_frequency=150",
      "--eval_steps=1", "--eval_decode_samples=4", "--save_checkpoints_secs=2",
      "--log_step_count_steps=50", stagger_secs=4)
  codes = finish(procs, logs, timeout=240)
  outputs = [log.read_text() for log in logs]
  assert codes == [0, 0], [o[-3000:] for o in outputs]
  assert [resumed_step(o) for o in outputs] == [saved, saved]
  assert train_helpers.latest_step(str(output_dir)) == steps
  evaluated = [json.loads(line)["step"] for line in
               (output_dir / "metrics.jsonl").read_text().splitlines()]
  assert [step for step in evaluated if step > saved] == [150, 300], (
      evaluated)
  written = [int(name[len("ckpt-"):-len(".index")])
             for name in os.listdir(output_dir)
             if name.startswith("ckpt-") and name.endswith(".index")]
  assert len([step for step in written if step > saved]) >= 3, written
  assert not [n for n in os.listdir(output_dir) if n.startswith("worker_tmp")]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  return tmp_path_factory.mktemp("reverse_data")


@pytest.mark.timeout(400)
@pytest.mark.parametrize(
    "fault,preempted_worker,to_the_end",
    [(signal.SIGKILL, 1, True), (signal.SIGSTOP, 0, False)],
    ids=["sigkill_then_sigterm_worker1_then_end",
         "sigstop_then_sigterm_worker0"])
def test_lost_worker_then_preemption(tmp_path, data_dir, fault,
                                     preempted_worker, to_the_end):
  """Each restart resumes from the checkpoint the fault before left."""
  output_dir = tmp_path / "run"
  with train_helpers.processes() as started:
    cluster = Cluster(tmp_path, started)
    latest, elapsed = lose_worker_1(cluster, data_dir, output_dir, fault)
    print(f"{signal.Signals(fault).name}: worker 0 exited after "
          f"{elapsed:.1f} s")
    saved = resume_then_preempt(cluster, data_dir, output_dir, latest,
                                preempted_worker)
    if to_the_end:  # one such check is enough
      resume_to_the_end(cluster, data_dir, output_dir, saved)


HELD_PLUGINS = (pathlib.Path(__file__).resolve().parents[1] / "support" /
                "plugins_held_datagen")


@pytest.mark.timeout(240)
def test_sigterm_and_lost_worker_while_the_chief_generates_data(tmp_path):
  """Worker 1 waits while the chief generates data, longer than the worker
  timeout, without finding it lost; SIGTERM then ends worker 1 at once
  (nothing to save yet); the chief, once done, finds it lost."""
  scratch, output_dir = tmp_path / "scratch", tmp_path / "run"
  scratch.mkdir()
  with train_helpers.processes() as started:
    procs, logs = Cluster(tmp_path, started).start(
        tmp_path / "data", output_dir, f"--t2t_usr_dir={HELD_PLUGINS}",
        "--problem=held_reverse", f"--tmp_dir={scratch}",
        f"--train_steps={LONG}")
    wait_until(lambda: ((scratch / "held").exists() and
                        "Waiting for the chief to generate" in
                        logs[1].read_text()),
               logs, procs, "the chief held, worker 1 waiting", timeout=120)
    # Busy generating data for longer than the worker timeout, the chief
    # still answers worker 1's probes.
    time.sleep(WORKER_TIMEOUT_SECS + 2)
    assert procs[1].poll() is None, logs[1].read_text()[-5000:]
    os.kill(procs[1].pid, signal.SIGTERM)
    procs[1].wait(timeout=10)  # not ignored until the first step
    assert procs[1].returncode == -signal.SIGTERM, logs[1].read_text()[-3000:]
    (scratch / "release").touch()
    released = time.time()
    procs[0].wait(timeout=LOSS_BOUND_SECS + 60)
    output = logs[0].read_text()
    assert procs[0].returncode == WORKER_LOST, output[-5000:]
    # Its address refuses connections: lost after the short grace, not the
    # worker timeout (it was up when the strategy started).
    assert re.search(r"/job:worker/task:1 is gone: its address "
                     r"127\.0\.0\.1:\d+ refuses connections", output), (
                         output[-3000:])
    print(f"the chief exited {time.time() - released:.1f} s after its "
          "data generation was released")
    assert "No checkpoint was written in" in output, output[-3000:]
    assert "Traceback" not in output, output[-5000:]


@pytest.mark.timeout(300)
def test_single_process_sigterm_and_ctrl_c(tmp_path, data_dir):
  output_dir = tmp_path / "run"
  command = trainer_command(data_dir, output_dir, f"--train_steps={LONG}",
                            "--save_checkpoints_secs=3600")
  saved = 0
  with train_helpers.processes() as started:
    for run, stop in enumerate((signal.SIGTERM, signal.SIGINT)):
      log = tmp_path / f"run{run}.txt"
      proc = train_helpers.start(command, log)
      started.append(proc)
      wait_for_step([log], [proc], saved + 3)
      proc.send_signal(stop)
      proc.wait(timeout=60)
      output = log.read_text()
      assert proc.returncode == PREEMPTED, output[-5000:]
      if run:
        assert resumed_step(output) == saved
      saved = train_helpers.latest_step(str(output_dir))
      assert max(progress_steps(log)) == saved, output[-3000:]
      assert f"Preempted ({stop.name}): saved the checkpoint " in output
      assert "Traceback" not in output, output[-5000:]

  # The run folder the signals left reads back: the decoder restores it and
  # the exporter writes a SavedModel from it (in this process: the commands'
  # own flags and messages are tested in test_decoder.py and test_export.py).
  from t2tlite import run_dir
  from t2tlite.data.vocab import Vocabulary
  from t2tlite.decode.decoding import Decoder
  from t2tlite.decode.machine import settle
  from t2tlite.decode.settings import DecodeHParams
  from t2tlite.export import exporter
  model, info, path = run_dir.load_trained_model(str(output_dir))
  assert path.endswith(f"ckpt-{saved}"), path
  decoded, _ = Decoder(model, Vocabulary.from_file(info.vocab_file),
                       settle(DecodeHParams())).decode_lines(
                           ["3 4 5", "7 8"], progress=False)
  assert len(decoded) == 2, decoded
  version = exporter.export_saved_model(str(output_dir))
  assert version == str(output_dir / "export" / "1"), version
  assert os.path.isfile(os.path.join(version, "saved_model.pb"))


def test_stop_signals_record_the_first_signal_and_restore_handlers():
  from t2tlite.train import preemption
  before = signal.getsignal(signal.SIGTERM)
  with preemption.StopSignals() as stop:
    assert stop.requested is None
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.05)  # Python runs the handler between bytecodes
    assert stop.requested == "SIGTERM"
  assert signal.getsignal(signal.SIGTERM) == before


SECOND_CTRL_C = """
import os, signal, time
from t2tlite.train import preemption
with preemption.StopSignals() as stop:
  os.kill(os.getpid(), signal.SIGINT)
  time.sleep(0.05)
  print("first:", stop.requested, flush=True)
  os.kill(os.getpid(), signal.SIGINT)
  time.sleep(30)
print("still running")
"""


@pytest.mark.timeout(60)
def test_second_ctrl_c_exits_at_once():
  code, output = train_helpers.run(
      [sys.executable, "-c", SECOND_CTRL_C], timeout=50)
  assert code == 130, output[-3000:]
  assert "first: SIGINT" in output and "Second Ctrl-C" in output
  assert "still running" not in output
