"""t2t-attention of an ensemble (--checkpoint_path=A,B): each member's maps
of the ensemble's own output, labelled by member; --target is refused
before anything loads."""
import os
import re
import subprocess
import sys

from run_folder import TINY, needs_multi30k
from shared_run import shared_run_folder

pytestmark = needs_multi30k


def attention(folders, plot_dir, *extra):
  return subprocess.run(
      [sys.executable, "-m", "t2tlite.bin.t2t_attention",
       f"--output_dir={folders[0]}", f"--checkpoint_path={','.join(folders)}",
       f"--plot_dir={plot_dir}", "--input=Two dogs play.",
       "--decode_hparams=beam_size=2,extra_length=4", *extra],
      capture_output=True, text=True)


def test_each_member_has_its_maps(tmp_path_factory, tmp_path):
  folders = [shared_run_folder(tmp_path_factory, seed=s) for s in (3, 4)]
  run = attention(folders, tmp_path)
  assert run.returncode == 0, run.stderr
  pngs = [p for p in os.listdir(tmp_path) if p.endswith(".png")]
  # 2 members x 3 kinds x layers x heads.
  assert len(pngs) == 2 * 3 * TINY.num_layers * TINY.num_heads
  page = (tmp_path / "index.html").read_text(encoding="utf-8")
  assert "Sentence 1, ensemble member 1" in page
  assert "Sentence 2, ensemble member 2" in page
  refused = attention(folders, tmp_path / "again", "--target=Zwei Hunde.")
  assert refused.returncode != 0
  assert "--target is for one model" in refused.stderr
  # Before the decode settings are settled (their log lines) or a model
  # loads.
  assert not re.search(r"^\d\d:\d\d:\d\d (machine|precision): ",
                       refused.stderr, re.MULTILINE), refused.stderr
