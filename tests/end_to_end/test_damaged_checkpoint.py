"""A damaged newest checkpoint (its data file truncated, as a full disk or a
killed copy leaves it): t2t-trainer resumes from the newest intact one and
says which it skipped; t2t-decoder, t2t-exporter and t2t-avg-checkpoints
name the damaged file in one line."""
import shutil
import subprocess

import pytest

from train_helpers import TINY_HPARAMS, command, console_script, run

STEPS = 6


@pytest.fixture(scope="module")
def damaged_run(tmp_path_factory):
  """A run with a checkpoint at every step, the newest truncated:
  (tmp folder, output_dir, the truncated data file)."""
  tmp = tmp_path_factory.mktemp("damaged")
  output_dir = tmp / "train"
  command("t2t-trainer", "--problem=algorithmic_reverse",
          "--hparams_set=transformer_tiny",
          f"--hparams={TINY_HPARAMS},batch_size=256",
          f"--data_dir={tmp / 'data'}", f"--output_dir={output_dir}",
          "--generate_data", f"--train_steps={STEPS}", "--schedule=train",
          "--save_checkpoints_secs=0", "--mixed_precision=float32",
          timeout=300)
  (data_file,) = output_dir.glob(f"ckpt-{STEPS}.data-*")
  size = data_file.stat().st_size
  with open(data_file, "r+b") as f:
    f.truncate(size // 2)
  return tmp, output_dir, data_file


@pytest.mark.timeout(400)
def test_commands_name_the_damaged_file_in_one_line(damaged_run):
  tmp, output_dir, data_file = damaged_run
  source = tmp / "in.txt"
  source.write_text("1 2 3\n")
  runs = {
      "t2t-decoder": [f"--output_dir={output_dir}",
                      f"--decode_from_file={source}"],
      "t2t-exporter": [f"--output_dir={output_dir}"],
      "t2t-avg-checkpoints": [f"--output_dir={output_dir}", "--n=2"],
  }
  started = {name: subprocess.Popen(
      [console_script(name), *args], stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True) for name, args in runs.items()}
  try:
    for name, proc in started.items():
      _, stderr = proc.communicate(timeout=300)
      assert proc.returncode == 1, stderr[-3000:]
      assert "Traceback" not in stderr, stderr[-3000:]
      (line,) = [l for l in stderr.splitlines()
                 if l.startswith(f"{name}: error: ")]
      assert line.startswith(
          f"{name}: error: checkpoint {output_dir}/ckpt-{STEPS} is damaged: "
          f"{data_file} ({data_file.stat().st_size} bytes) cannot be read "
          "(IndexError: Read less bytes than requested)"), line
  finally:
    for proc in started.values():
      if proc.poll() is None:
        proc.kill()


@pytest.mark.timeout(400)
def test_trainer_resumes_from_the_newest_intact_checkpoint(damaged_run,
                                                           tmp_path):
  # On a copy: the resumed run writes checkpoints, and the module's other
  # test needs the damaged one newest.
  _, damaged_dir, damaged_file = damaged_run
  output_dir = tmp_path / "train"
  shutil.copytree(damaged_dir, output_dir)
  data_file = output_dir / damaged_file.name
  code, output = run(
      [console_script("t2t-trainer"), f"--output_dir={output_dir}",
       f"--train_steps={STEPS + 2}", "--schedule=train"], timeout=300)
  assert code == 0, output[-3000:]
  assert (f"Skipping a damaged checkpoint: checkpoint {output_dir}/"
          f"ckpt-{STEPS} is damaged: {data_file}") in output
  assert f"Resumed from {output_dir}/ckpt-{STEPS - 1} at step {STEPS - 1}" \
      in output
  assert "Traceback" not in output
  assert (output_dir / f"ckpt-{STEPS + 2}.index").exists()
