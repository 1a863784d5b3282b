"""int8 where its kernel cannot run: TensorFlow's oneDNN path off
(TF_ENABLE_ONEDNN_OPTS=0, the path an AVX2-only CPU takes under
TensorFlow's own default). The commands say so in one line and decode
without int8; an int8 export still translates."""
import subprocess
import sys

import pytest

from run_folder import make_run_folder, multi30k_lines, needs_multi30k
from train_helpers import user_env

pytestmark = needs_multi30k

FALLBACK_LINE = "int8=true is not available here, so decoding runs without int8"


def onednn_off_env():
  return {**user_env(), "TF_ENABLE_ONEDNN_OPTS": "0"}


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
  folder = str(tmp_path_factory.mktemp("run"))
  make_run_folder(folder)
  return folder


# Two t2t-decoder processes (about 40 s on 2 cores): the user's command
# itself, on the path an AVX2 CPU takes by default.
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_t2t_decoder_int8_without_onednn_decodes_as_float32(run_folder,
                                                            tmp_path):
  source = tmp_path / "in.en"
  source.write_text("\n".join(multi30k_lines("en", 4)) + "\n",
                    encoding="utf-8")
  written = {}
  for int8 in ("true", "false"):
    target = tmp_path / f"out.{int8}"
    run = subprocess.run(
        [sys.executable, "-m", "t2tlite.bin.t2t_decoder",
         f"--output_dir={run_folder}", "--mixed_precision=float32",
         f"--decode_hparams=beam_size=2,extra_length=5,int8={int8}",
         f"--decode_from_file={source}", f"--decode_to_file={target}"],
        capture_output=True, text=True, env=onednn_off_env(), timeout=200)
    assert run.returncode == 0, run.stderr
    said = [line for line in run.stderr.splitlines() if FALLBACK_LINE in line]
    assert len(said) == (1 if int8 == "true" else 0), run.stderr
    if said:  # the reason, named
      assert "TF_ENABLE_ONEDNN_OPTS=0, set by the user" in said[0]
    assert "Traceback" not in run.stderr
    written[int8] = target.read_text(encoding="utf-8")
  assert written["true"] == written["false"]
  assert written["true"].count("\n") == 4
