"""t2t-trainer under faults: a worker killed, SIGTERM (preemption) to a worker,
SIGKILL and Ctrl-C to a single process; each run is then restarted with the
same command and resumes from the checkpoint the fault left, at its step and
learning rate, and a restart with other hparams is refused. Also a worker
frozen while it waits for the chief's data generation, which the chief then
finds lost, and SIGTERM to it.

Every process is the trainer itself (signals go to its own PID) and is killed
and reaped by `train_helpers.processes` whatever happens."""
import json
import math
import os
import pathlib
import re
import signal
import sys
import time

import pytest

from reverse_data import shared_reverse_data
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


def kill_worker_1(cluster, data_dir, output_dir):
  """Trains until a checkpoint exists, kills worker 1 (SIGKILL), checks
  worker 0's exit; returns the newest checkpoint's step and the seconds
  worker 0 took to exit."""
  procs, logs = cluster.start(data_dir, output_dir, f"--train_steps={LONG}",
                              "--save_checkpoints_secs=1")
  wait_for_step(logs, procs, 3)
  wait_until(lambda: train_helpers.latest_step(str(output_dir)) is not None,
             logs, procs, "a checkpoint")
  os.kill(procs[1].pid, signal.SIGKILL)
  sent = time.time()
  procs[0].wait(timeout=LOSS_BOUND_SECS + 30)
  elapsed = time.time() - sent
  output = logs[0].read_text()
  assert procs[0].returncode == WORKER_LOST, output[-5000:]
  latest = train_helpers.latest_step(str(output_dir))
  # Its address refuses connections: found after a short grace, long before
  # the worker timeout (or by a collective that failed at once).
  assert re.search(r"/job:worker/task:1 is gone: its address "
                   r"127\.0\.0\.1:\d+ refuses connections", output), (
                       output[-3000:])
  assert elapsed < REFUSED_BOUND_SECS + 1, elapsed
  assert f"ckpt-{latest} (step {latest})" in output, output[-3000:]
  assert "Resume with, on every worker:\n  t2t-trainer " in output
  assert "Traceback" not in output, output[-5000:]
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
  """Both resume and train 20 steps, evaluating at `every` (10 steps in)
  and at the end (the other worker waits while the chief decodes dev) and
  writing a checkpoint each second: no false loss on a loaded machine.
  Worker 1 starts 4 s late (longer than the refusal grace): worker 0 waits
  for it without finding it lost. Progress lines come every 5 steps and at
  the last, none at or before the step resumed from."""
  every = saved + 10
  steps = every + 10
  procs, logs = cluster.start(
      data_dir, output_dir, f"--train_steps={steps}",
      "--schedule=train_and_evaluate", f"--local_eval_frequency={every}",
      "--eval_steps=1", "--eval_decode_samples=4",
      "--eval_decode_hparams=beam_size=1", "--save_checkpoints_secs=1",
      "--log_step_count_steps=5", stagger_secs=4)
  codes = finish(procs, logs, timeout=240)
  outputs = [log.read_text() for log in logs]
  assert codes == [0, 0], [o[-3000:] for o in outputs]
  assert [resumed_step(o) for o in outputs] == [saved, saved]
  assert train_helpers.latest_step(str(output_dir)) == steps
  for log in logs:
    progress = progress_steps(log)
    assert progress and min(progress) > saved, progress
    assert progress[-1] == steps, progress
    assert all(step % 5 == 0 for step in progress[:-1]), progress
  evaluated = [json.loads(line)["step"] for line in
               (output_dir / "metrics.jsonl").read_text().splitlines()]
  assert [step for step in evaluated if step > saved] == [every, steps], (
      evaluated)
  written = [int(name[len("ckpt-"):-len(".index")])
             for name in os.listdir(output_dir)
             if name.startswith("ckpt-") and name.endswith(".index")]
  # The first step's (tracing the step takes over the second between
  # checkpoints), the dev metric's at `every` and the final one, at least.
  assert len([step for step in written if step > saved]) >= 3, written
  assert not [n for n in os.listdir(output_dir) if n.startswith("worker_tmp")]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  return shared_reverse_data(tmp_path_factory)


@pytest.mark.timeout(500)
def test_killed_worker_then_preemption_then_the_end(tmp_path, data_dir):
  """One run of two workers through faults, each restart resuming from the
  checkpoint the fault before left: worker 1 killed (its address refuses
  connections), then preempted (SIGTERM: both save at the step reached);
  then the run trains to its end. (A SIGTERM to the chief instead takes the
  same code: every worker learns of any worker's signal from one
  collective, strategy.any_workers, and saves. A frozen worker is found in
  the test below.)"""
  output_dir = tmp_path / "run"
  with train_helpers.processes() as started:
    cluster = Cluster(tmp_path, started)
    latest, elapsed = kill_worker_1(cluster, data_dir, output_dir)
    print(f"SIGKILL: worker 0 exited after {elapsed:.1f} s")
    saved = resume_then_preempt(cluster, data_dir, output_dir, latest, 1)
    resume_to_the_end(cluster, data_dir, output_dir, saved)


HELD_PLUGINS = (pathlib.Path(__file__).resolve().parents[1] / "support" /
                "plugins_held_datagen")


@pytest.mark.timeout(240)
def test_frozen_worker_and_sigterm_while_the_chief_generates_data(tmp_path):
  """Worker 1 waits while the chief generates data, longer than the worker
  timeout, without finding it lost. Then frozen (SIGSTOP), it is found
  lost by the chief's peer watch once the chief waits for it (on a
  collective): after the worker timeout, not sooner, long before the
  collective's. SIGTERM then ends worker 1 at once (nothing to save yet)."""
  scratch, output_dir = tmp_path / "scratch", tmp_path / "run"
  scratch.mkdir()
  with train_helpers.processes() as started:
    procs, logs = Cluster(tmp_path, started).start(
        tmp_path / "data", output_dir, f"--t2t_usr_dir={HELD_PLUGINS}",
        "--problem=held_reverse", f"--tmp_dir={scratch}", "--generate_data",
        f"--train_steps={LONG}")
    wait_until(lambda: ((scratch / "held").exists() and
                        "Waiting for the chief to generate" in
                        logs[1].read_text()),
               logs, procs, "the chief held, worker 1 waiting", timeout=120)
    # Busy generating data for longer than the worker timeout, the chief
    # still answers worker 1's probes.
    time.sleep(WORKER_TIMEOUT_SECS + 2)
    assert procs[1].poll() is None, logs[1].read_text()[-5000:]
    os.kill(procs[1].pid, signal.SIGSTOP)
    stopped = time.time()
    (scratch / "release").touch()
    # The chief says what it generated, then waits for worker 1, watched.
    wait_until(lambda: "held_reverse -> " in logs[0].read_text(),
               logs[:1], procs[:1], "the chief's data generation")
    waiting = time.time()
    procs[0].wait(timeout=LOSS_BOUND_SECS + 30)
    ended = time.time()
    output = logs[0].read_text()
    assert procs[0].returncode == WORKER_LOST, output[-5000:]
    assert re.search(r"/job:worker/task:1 \(127\.0\.0\.1:\d+\) has not "
                     f"answered for {WORKER_TIMEOUT_SECS} s", output), (
                         output[-3000:])
    print(f"the chief exited {ended - waiting:.1f} s after it began to wait")
    # Not before the worker timeout since the freeze; within the watch's
    # bound once the chief waits (1 s for the exit and this process's
    # polling, on a loaded machine).
    assert ended - stopped >= WORKER_TIMEOUT_SECS, ended - stopped
    assert ended - waiting < LOSS_BOUND_SECS + 1, ended - waiting
    assert "No checkpoint was written in" in output, output[-3000:]
    assert "Traceback" not in output, output[-5000:]
    # Pending until it runs again: then SIGTERM's default action ends it
    # (outside the training loop nothing handles it).
    os.kill(procs[1].pid, signal.SIGTERM)
    os.kill(procs[1].pid, signal.SIGCONT)
    procs[1].wait(timeout=10)
    assert procs[1].returncode == -signal.SIGTERM, logs[1].read_text()[-3000:]


def noam(step, hp):
  """Eq. (3) with the hparams' scale: the rate of update number `step`."""
  return hp["learning_rate_scale"] * hp["d_model"]**-0.5 * min(
      step**-0.5, step * hp["warmup_steps"]**-1.5)


def resumed_step_and_rate(output):
  """The step a restart resumed from, and the learning rate it announced
  for the next one."""
  match = re.search(r"Resumed from \S+/ckpt-\d+ at step \d+ \(next "
                    r"learning rate ([0-9.e+-]+)\)", output)
  assert match, output[-3000:]
  return resumed_step(output), float(match.group(1))


def trained_after_resume(log):
  """Steps a restart has logged past the step it resumed from (-1 before
  it says where it resumed)."""
  text = log.read_text()
  if "Resumed from " not in text:
    return -1
  return max(progress_steps(log), default=0) - resumed_step(text)


@pytest.mark.timeout(300)
def test_single_process_sigkill_then_ctrl_c(tmp_path, data_dir):
  """One t2t-trainer process killed (SIGKILL) mid-training, then restarted
  and interrupted (Ctrl-C, which saves at the step reached as SIGTERM does,
  tested on a worker above): the restart resumes from the newest checkpoint
  with the step and the learning rate of eq. (3) for it (the schedule does
  not restart from 0). A restart with other hparams fails at once, naming
  the difference; the run folder left reads back."""
  output_dir = tmp_path / "run"
  command = trainer_command(data_dir, output_dir, f"--train_steps={LONG}",
                            "--save_checkpoints_secs=1")
  with train_helpers.processes() as started:
    log = tmp_path / "killed.txt"
    proc = train_helpers.start(command, log)
    started.append(proc)
    wait_until(lambda: (train_helpers.latest_step(str(output_dir)) or 0)
               >= 10, [log], [proc], "a checkpoint at step 10")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, log.read_text()[-3000:]
    saved = train_helpers.latest_step(str(output_dir))
    hp = json.loads((output_dir / "hparams.json").read_text())
    log = tmp_path / "interrupted.txt"
    proc = train_helpers.start(command, log)
    started.append(proc)
    wait_until(lambda: trained_after_resume(log) >= 3, [log], [proc],
               "3 steps after the resume")
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
  output = log.read_text()
  assert proc.returncode == PREEMPTED, output[-5000:]
  resumed, rate = resumed_step_and_rate(output)
  # The checkpoint on disk at the kill, or a later one that was being
  # written at that moment and completed (never a corrupt one).
  assert resumed >= saved, output[-3000:]
  assert rate == pytest.approx(noam(resumed + 1, hp), rel=1e-3)
  assert min(progress_steps(log)) > resumed, output[-3000:]
  saved = train_helpers.latest_step(str(output_dir))
  assert max(progress_steps(log)) == saved, output[-3000:]
  assert "Preempted (SIGINT): saved the checkpoint " in output
  assert "Traceback" not in output, output[-5000:]

  # The learning rate logged at every step of both runs follows eq. (3) for
  # the global step.
  scalars = train_helpers.read_scalars(str(output_dir))
  assert set(scalars) >= {"loss", "nll", "learning_rate", "grad_norm",
                          "tokens_per_sec", "steps_per_sec"}
  # Through the last step saved (the killed run may have logged steps past
  # its last checkpoint, which the restart trained again).
  assert saved in scalars["learning_rate"], sorted(scalars["learning_rate"])
  for step, rate in scalars["learning_rate"].items():
    assert rate == pytest.approx(noam(step, hp), rel=1e-3), step
  assert all(math.isfinite(v) for v in scalars["loss"].values())

  # Restarting with other hparams fails at once, naming the difference.
  code, output = train_helpers.run(
      command + [f"--hparams={train_helpers.TINY_HPARAMS},batch_size=512,"
                 "max_length=16"], timeout=120)
  assert code == 1, output[-3000:]
  assert "batch_size: saved 128, requested 512" in output, output[-3000:]
  assert "Traceback" not in output, output[-3000:]

  # The run folder the signals left reads back: the decoder restores its
  # newest checkpoint (in this process: the commands' own flags and messages
  # are tested in test_decoder.py; the exporter restores a run folder the
  # same way, run_dir.load_trained_model, tested in test_export.py).
  from t2tlite import run_dir
  from t2tlite.data.vocab import Vocabulary
  from t2tlite.decode.decoding import Decoder
  from t2tlite.decode.machine import settle
  from t2tlite.decode.settings import DecodeHParams
  model, info, path = run_dir.load_trained_model(str(output_dir))
  assert path.endswith(f"ckpt-{saved}"), path
  decoded, _ = Decoder(model, Vocabulary.from_file(info.vocab_file),
                       settle(DecodeHParams())).decode_lines(
                           ["3 4 5", "7 8"], progress=False)
  assert len(decoded) == 2, decoded


def test_stop_signals_record_the_first_signal_and_restore_handlers():
  from t2tlite.train import preemption
  before = signal.getsignal(signal.SIGTERM)
  with preemption.StopSignals() as stop:
    assert stop.requested is None
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.05)  # Python runs the handler between bytecodes
    assert stop.requested == "SIGTERM"
  assert signal.getsignal(signal.SIGTERM) == before


def _second_ctrl_c(out):
  """In a forked child: Ctrl-C twice to this process inside StopSignals,
  reporting on `out`; never returns."""
  from t2tlite.train import preemption
  try:
    sys.stderr = out  # where StopSignals says what it does
    with preemption.StopSignals() as stop:
      os.kill(os.getpid(), signal.SIGINT)
      time.sleep(0.05)
      out.write(f"first: {stop.requested}\n")
      out.flush()
      os.kill(os.getpid(), signal.SIGINT)
      time.sleep(30)
    out.write("still running\n")
    out.flush()
  finally:
    os._exit(1)


@pytest.mark.timeout(60)
def test_second_ctrl_c_exits_at_once():
  """The second Ctrl-C exits at once (130) without saving: real signals to
  a child forked from this process, which has TensorFlow loaded already (a
  new interpreter would load it again, for nothing)."""
  from t2tlite.train import preemption  # noqa: F401  (before the fork)
  read, write = os.pipe()
  pid = os.fork()
  if pid == 0:
    os.close(read)
    _second_ctrl_c(os.fdopen(write, "w"))
  os.close(write)
  with os.fdopen(read) as pipe:
    output = pipe.read()
  _, status = os.waitpid(pid, 0)
  assert os.waitstatus_to_exitcode(status) == 130, output
  assert "first: SIGINT" in output and "Second Ctrl-C" in output, output
  assert "still running" not in output
