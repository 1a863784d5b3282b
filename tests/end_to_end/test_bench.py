"""The benchmark scripts run, say where they ran, and their table reads
what they wrote."""
import ast
import glob
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

import host
from train_helpers import user_env

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
BENCH = os.path.join(REPO, "bench")


@pytest.mark.timeout(300)
def test_train_tiny_line_and_table(tmp_path):
  result = subprocess.run(
      [sys.executable, os.path.join(BENCH, "run.py"), "--work", "train_tiny",
       "--steps", "2", "--warmup", "0", "--no_peak_now"],
      capture_output=True, text=True, timeout=280, check=True)
  lines = [l for l in result.stdout.splitlines() if l.startswith("{")]
  assert len(lines) == 1, result.stdout
  line = json.loads(lines[0])
  # The first line says where the figure ran; the result repeats it.
  first = result.stdout.splitlines()[0]
  assert first == f"machine: {line['machine']}"
  assert re.search(r"\d+ cores, -?avx2 -?avx512f -?avx512_bf16 -?amx_bf16, .*"
                   r"TF [\d.]+, matmul 1024\^3: float32 [\d.]+ GFLOP/s, "
                   r"bfloat16 [\d.]+ GFLOP/s$", first), first
  assert line["work"] == "train_tiny" and line["steps"] == 2
  assert line["target_tokens_per_step"] == 128 * 32
  # The figure is the target tokens of a step over the median step time.
  assert line["tokens_per_s"] == pytest.approx(
      4096 / line["step_s_median"], rel=1e-3)
  # Two steps timed (the first traces the step): the median lies between.
  assert line["step_s_min"] <= line["step_s_median"] <= line["step_s_max"]
  # 2+2 layers, d_model 256, d_ff 1024, shared vocab 8,000 (tied softmax).
  assert 5_000_000 < line["params"] < 6_500_000
  results = tmp_path / "results.jsonl"
  results.write_text(lines[0] + "\n")
  table = subprocess.run(
      [sys.executable, os.path.join(BENCH, "table.py"), str(results)],
      capture_output=True, text=True, timeout=60, check=True).stdout
  row = next(r for r in table.splitlines()
             if r.startswith("| train_tiny (tokens_per_s)"))
  assert f"| {line['tokens_per_s']:,.0f} (1) |" in row


@pytest.mark.timeout(300)
def test_decode_base_outputs_are_the_recorded_ones():
  """decode_base's float32 search (transformer_base, seeded weights and
  ids) finds the ids recorded in BUILD_NOTES.md since before the decoding
  layouts (checksum 9657661, natively and with ONEDNN_MAX_CPU_ISA=AVX2):
  a layout or op change that moved a float32 near-tie shows here. On two
  or more cores it runs as two concurrent searches, as t2t-decoder does.
  The checksum was recorded on CPUs: skipped where a GPU is visible."""
  host.skip_unless_cpu_only("decode_base's float32 checksum")
  result = subprocess.run(
      [sys.executable, os.path.join(BENCH, "run.py"), "--work",
       "decode_base", "--steps", "1", "--warmup", "0", "--no_peak_now"],
      capture_output=True, text=True, timeout=280, check=True,
      env=user_env())
  line = json.loads([l for l in result.stdout.splitlines()
                     if l.startswith("{")][-1])
  assert line["mixed_precision"] == "float32"
  searches = host.auto_searches()
  assert line["concurrent_searches"] == searches
  # Intra-op threads set as t2t-decoder sets them (none for one search).
  assert line["intra_op_threads"] == (
      host.cores() // 2 if searches == 2 else None)
  assert ("intra-op thread(s)" in result.stdout.splitlines()[0]) == (
      searches == 2)
  assert line["outputs_checksum"] == 9657661


def test_bench_scripts_use_only_public_entry_points():
  for path in glob.glob(os.path.join(BENCH, "**", "*.py"), recursive=True):
    with open(path, encoding="utf-8") as f:
      source = f.read()
    assert "sys.path" not in source, path
    assert not re.search(r"trainer\._\w", source), path


def _run_py_functions():
  """{name: ast.arguments} of bench/run.py's top-level functions."""
  with open(os.path.join(BENCH, "run.py"), encoding="utf-8") as f:
    tree = ast.parse(f.read())
  return {node.name: node.args for node in tree.body
          if isinstance(node, ast.FunctionDef)}


def _call_fits(call, arguments):
  """Whether `call` (an ast.Call) passes what a function of `arguments`
  takes: no more positional arguments than it has, keywords it names, and
  every parameter without a default given."""
  names = [a.arg for a in arguments.args]
  given = names[:len(call.args)] + [k.arg for k in call.keywords]
  required = names[:len(names) - len(arguments.defaults)]
  return (len(call.args) <= len(names) and
          all(name in names + [a.arg for a in arguments.kwonlyargs]
              for name in given) and
          all(name in given for name in required))


def test_bench_scripts_call_run_py_as_it_is():
  """Scripts that import run.py (profile_decode.py) call only functions it
  has, with arguments they take: nothing else runs those scripts."""
  functions = _run_py_functions()
  checked = 0
  for path in glob.glob(os.path.join(BENCH, "*.py")):
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read())
    aliases = {alias.asname or alias.name for node in ast.walk(tree)
               if isinstance(node, ast.Import) for alias in node.names
               if alias.name == "run"}
    for node in ast.walk(tree):
      if (isinstance(node, ast.Call) and
          isinstance(node.func, ast.Attribute) and
          isinstance(node.func.value, ast.Name) and
          node.func.value.id in aliases):
        name = node.func.attr
        assert name in functions, f"{path}: run.{name} does not exist"
        assert _call_fits(node, functions[name]), (
            f"{path}:{node.lineno}: run.{name} takes "
            f"{[a.arg for a in functions[name].args]}")
        checked += 1
  assert checked >= 3


def test_versus_peers_sitting_variants():
  # Which variants a sitting runs (the peers themselves need their
  # virtualenvs, which the tests do not make).
  spec = importlib.util.spec_from_file_location(
      "versus_peers", os.path.join(BENCH, "versus_peers.py"))
  versus_peers = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(versus_peers)

  def labels(*args, **kwargs):
    ours, peers = versus_peers.variants(*args, **kwargs)
    return [v[0] for v in ours], [v[0] for v in peers]

  assert labels("train_base") == (
      ["t2tlite float32", "t2tlite bfloat16"],
      ["tf-models-official float32", "tf-models-official bfloat16",
       "PyTorch float32", "PyTorch bfloat16"])
  assert labels("train_base", float32_only=True) == (
      ["t2tlite float32"], ["tf-models-official float32", "PyTorch float32"])
  assert labels("decode_base") == (
      ["t2tlite float32", "t2tlite float32, one search", "t2tlite bfloat16",
       "t2tlite int8", "t2tlite int8, bfloat16"],
      ["CTranslate2 float32", "CTranslate2 int8"])
  # Capped at AVX2: ours without bfloat16 (oneDNN has none there; under the
  # cap TensorFlow's bfloat16 matmul crashes).
  assert labels("decode_base", isa="AVX2") == (
      ["t2tlite float32", "t2tlite float32, one search", "t2tlite int8"],
      ["CTranslate2 float32", "CTranslate2 int8"])
  assert labels("decode_base", float32_only=True) == (
      ["t2tlite float32", "t2tlite float32, one search"],
      ["CTranslate2 float32"])
