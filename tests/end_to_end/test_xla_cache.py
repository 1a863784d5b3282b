"""The commands keep XLA's compiled searches (decode hparam xla_lines) in
t2tlite's cache folder (t2tlite.xla_cache): a later command loads the kept
program, which runs on its own model's weights, and a damaged entry costs
a warning and the graph's search, not the decode."""
import glob
import os
import re
import subprocess
import sys

import pytest

from t2tlite import hardware, run_dir, xla_cache
from t2tlite.data.vocab import Vocabulary
from t2tlite.decode import machine
from t2tlite.decode.decoding import Decoder
from t2tlite.decode.settings import DecodeHParams

from outputs_differ import assert_outputs_differ
from run_folder import multi30k_lines, needs_multi30k
from shared_run import shared_run_folder
from train_helpers import user_env

GREEDY = "beam_size=1,extra_length=4"


def test_install_names_a_folder_by_version_and_cpu(monkeypatch, tmp_path):
  monkeypatch.delenv(xla_cache.ENV, raising=False)
  monkeypatch.setenv("T2TLITE_CACHE_DIR", str(tmp_path / "cache"))
  folder = xla_cache.install()
  assert not os.path.exists(folder)  # made by TensorFlow when it keeps one
  assert os.path.dirname(folder) == str(tmp_path / "cache" / "xla")
  assert os.path.basename(folder).startswith("tf-2.")
  assert os.path.basename(folder).endswith(xla_cache.cpu_kind())
  assert os.environ[xla_cache.ENV] == f"{xla_cache.FLAG}={folder}"
  assert xla_cache.in_use() == folder


def test_the_cpu_kind_follows_the_model_name_and_flags(monkeypatch):
  """Another CPU model or instruction set: another folder (XLA's compiled
  code and the kept searches hold the machine's kernels)."""
  def kind(model, flags):
    monkeypatch.setattr(xla_cache.hardware, "cpuinfo",
                        lambda: {"model name": model, "flags": flags})
    return xla_cache.cpu_kind()

  kinds = {kind("AMD EPYC", "avx2 avx512f"), kind("AMD EPYC", "avx2"),
           kind("Intel Xeon", "avx2 avx512f")}
  assert len(kinds) == 3 and kind("AMD EPYC", "avx2") in kinds


@pytest.mark.parametrize("flags, named", [
    ("--tf_xla_persistent_cache_directory=", ""),  # the user's "off"
    ("--tf_xla_auto_jit=0 --tf_xla_persistent_cache_directory=/a", "/a")])
def test_install_keeps_the_users_folder(monkeypatch, flags, named):
  monkeypatch.setenv(xla_cache.ENV, flags)
  assert xla_cache.install() == named
  assert os.environ[xla_cache.ENV] == flags


def test_install_leaves_out_a_folder_it_cannot_make(monkeypatch, tmp_path):
  # TensorFlow would fail every XLA compile it could not keep there.
  blocker = tmp_path / "a_file"
  blocker.write_text("")
  monkeypatch.setenv(xla_cache.ENV, "--tf_xla_auto_jit=0")
  monkeypatch.setenv("T2TLITE_CACHE_DIR", str(blocker))
  assert xla_cache.install() == ""
  assert os.environ[xla_cache.ENV] == "--tf_xla_auto_jit=0"


def test_install_leaves_it_out_where_the_version_is_unknown(monkeypatch,
                                                            tmp_path):
  # A folder of no known TensorFlow version could hold another's programs.
  monkeypatch.delenv(xla_cache.ENV, raising=False)
  monkeypatch.setenv("T2TLITE_CACHE_DIR", str(tmp_path))
  monkeypatch.setattr(xla_cache, "TENSORFLOW_DISTRIBUTIONS",
                      ("no-such-distribution",))
  assert xla_cache.install() == ""
  assert xla_cache.ENV not in os.environ


def graph_outputs(folder, lines):
  """The graph's greedy outputs of the run folder's model, in process."""
  model, info, _ = run_dir.load_trained_model(folder)
  decoder = Decoder(model, Vocabulary.from_file(info.vocab_file),
                    machine.settle(DecodeHParams.parse(GREEDY)))
  return decoder.decode_lines(lines, progress=False)[0]


@needs_multi30k
@pytest.mark.timeout(400)
def test_a_later_command_runs_the_kept_search(tmp_path_factory, tmp_path,
                                              monkeypatch):
  folder = shared_run_folder(tmp_path_factory)
  other = shared_run_folder(tmp_path_factory, seed=4)  # other weights
  lines = multi30k_lines("en", 2)
  inputs = tmp_path / "in.en"
  inputs.write_text("\n".join(lines) + "\n", encoding="utf-8")
  env = user_env()
  env.pop(xla_cache.ENV, None)  # the commands' default
  env["T2TLITE_CACHE_DIR"] = str(tmp_path / "cache")

  def decode(run, name):
    target = tmp_path / name
    result = subprocess.run(
        [sys.executable, "-m", "t2tlite.bin.t2t_decoder",
         f"--output_dir={run}", f"--decode_hparams={GREEDY},xla_lines=2",
         f"--decode_from_file={inputs}", f"--decode_to_file={target}"],
        capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return target.read_text(encoding="utf-8").splitlines(), result.stderr

  def entries():
    return sorted(glob.glob(str(tmp_path / "cache" / "xla" / "*" / "*")))

  # Measured before the commands, as on any machine after its first
  # command: a command that measures it traces functions of its own, and
  # a program found again must be traced after the same functions.
  # (describe_device's own, uncached: this process may have described it
  # already, with the suite's cache folder.)
  monkeypatch.setenv("T2TLITE_CACHE_DIR", env["T2TLITE_CACHE_DIR"])
  hardware.describe_device.__wrapped__()
  first, _ = decode(other, "first.de")
  kept = entries()
  assert kept and all(path.endswith(".pb") for path in kept)
  assert first == graph_outputs(other, lines)
  # A model of the same hparams runs the same program, loaded, not
  # compiled again, on its own weights.
  second, _ = decode(folder, "second.de")
  assert entries() == kept
  expected = graph_outputs(folder, lines)
  assert_outputs_differ([" ".join(first), " ".join(expected)])
  assert second == expected
  # A damaged entry costs a warning, and the graph decodes.
  for path in kept:
    with open(path, "r+b") as f:
      f.truncate(100)
  third, stderr = decode(folder, "third.de")
  assert third == expected
  assert re.search(r"the XLA search of a 2x\d+ batch failed", stderr), stderr
  assert f"If {os.path.dirname(kept[0])} (XLA's cache" in stderr
