"""A damaged newest checkpoint (its data file truncated, as a full disk or a
killed copy leaves it): t2t-trainer resumes from the newest intact one and
says which it skipped; t2t-decoder names the damaged file in one line, and
so do the averaging behind t2t-avg-checkpoints, the export behind
t2t-exporter (which loads the run as t2t-decoder does) and an ensemble's
members."""
import shutil

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


def damaged_message(output_dir, data_file):
  """The start of the one line that names the damaged checkpoint."""
  return (f"checkpoint {output_dir}/ckpt-{STEPS} is damaged: {data_file} "
          f"({data_file.stat().st_size} bytes) cannot be read (IndexError: "
          "Read less bytes than requested)")


@pytest.mark.timeout(400)
def test_decoder_names_the_damaged_file_in_one_line(damaged_run):
  tmp, output_dir, data_file = damaged_run
  source = tmp / "in.txt"
  source.write_text("1 2 3\n")
  code, output = run([console_script("t2t-decoder"),
                      f"--output_dir={output_dir}",
                      f"--decode_from_file={source}"], timeout=300)
  assert code == 1, output[-3000:]
  assert "Traceback" not in output, output[-3000:]
  (line,) = [l for l in output.splitlines()
             if l.startswith("t2t-decoder: error: ")]
  assert line.startswith(
      f"t2t-decoder: error: {damaged_message(output_dir, data_file)}"), line


@pytest.mark.timeout(400)
def test_averaging_and_export_name_the_damaged_file(damaged_run, tmp_path):
  """The errors t2t-avg-checkpoints, t2t-exporter and an ensemble's
  loading (t2t-decoder's --checkpoint_path=A,B) print as one line, as
  t2t-decoder does above (a ValueError: console.run's one line)."""
  from t2tlite import run_dir
  from t2tlite.export.exporter import export_saved_model
  from t2tlite.train.averaging import average_checkpoints
  _, output_dir, data_file = damaged_run
  for name, call in (
      ("averaging", lambda: average_checkpoints(
          str(output_dir), 2, averaged_dir=str(tmp_path / "averaged"))),
      ("export", lambda: export_saved_model(
          str(output_dir), export_dir=str(tmp_path / "export"))),
      # An ensemble whose second member is the run's newest checkpoint.
      ("ensemble", lambda: run_dir.load_models(
          str(output_dir), [f"{output_dir}/ckpt-{STEPS - 1}",
                            str(output_dir)]))):
    with pytest.raises(run_dir.DamagedCheckpointError) as error:
      call()
    assert str(error.value).startswith(
        damaged_message(output_dir, data_file)), name
    assert "\n" not in str(error.value), name
  assert not list(tmp_path.iterdir())


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
