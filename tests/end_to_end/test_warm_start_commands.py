"""t2t-trainer --warm_start_from as a user runs it: a child run on two
logical devices evaluates, before its first step, as its parent does; its
data is encoded with the parent's vocabulary; run.json, the report and the
export's metadata record the parent;
what does not fit fails in one line and writes nothing; a vocabulary of
other ids, mapped by piece, decodes as the parent does."""
import json
import os
import subprocess

import pytest

from t2tlite import problem as problem_lib
from t2tlite import problem_decoding, run_decoding
from t2tlite.decode import machine
from t2tlite.export import exporter
from t2tlite.report import collect, render
import permuted_vocab
import train_helpers
import worker_cluster

PROBLEM = "algorithmic_reverse"
HPARAMS = f"{train_helpers.TINY_HPARAMS},batch_size=128,max_length=16"
# The whole dev split (--eval_steps=0), so that one and two devices see the
# same examples; 60 lines decoded for the dev metric.
EVAL_FLAGS = ("--eval_steps=0", "--eval_decode_samples=60")
pytestmark = pytest.mark.timeout(600)


def _trainer(data_dir, output_dir, *extra):
  return train_helpers.command(
      "t2t-trainer", f"--problem={PROBLEM}", "--hparams_set=transformer_tiny",
      f"--hparams={HPARAMS}", f"--data_dir={data_dir}",
      f"--output_dir={output_dir}", "--random_seed=3", *EVAL_FLAGS, *extra)


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
  """A parent run trained 400 steps, enough for outputs that differ by
  input: (run folder, its last metrics.jsonl record)."""
  root = tmp_path_factory.mktemp("warm_start")
  run = str(root / "parent")
  _trainer(str(root / "data"), run, "--generate_data", "--train_steps=400",
           "--local_eval_frequency=0")
  last = _last_metrics(run)
  assert last["step"] == 400 and last["exact_match"] > 0
  return run, last


def _last_metrics(run):
  """The last record of a run's metrics.jsonl."""
  with open(os.path.join(run, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f][-1]


def _logged(output, what):
  """The value of WHAT in t2t-trainer's log line 'evaluation: eval dev at
  step 0: loss X  nll Y ...'."""
  for line in output.splitlines():
    if "evaluation: eval dev at step 0: " in line and f" {what} " in line:
      return float(line.split(f" {what} ")[1].split()[0].rstrip(","))
  raise AssertionError(f"no 'eval dev at step 0: ... {what}' line in:\n"
                       f"{output}")


def test_child_evaluates_as_its_parent_before_training(parent, tmp_path):
  """On two logical devices (MirroredStrategy), in a new data_dir that
  datagen fills with the parent's vocabulary."""
  run, last = parent
  child = str(tmp_path / "child")
  output = _trainer(str(tmp_path / "data"), child, "--generate_data",
                    f"--warm_start_from={run}", "--schedule=evaluate",
                    "--worker_gpu=2")
  assert f"copied from {os.path.join(run, 'vocab.model')}" in output
  assert f"Warm start from {run}/ckpt-400 (step 400)" in output
  assert _logged(output, "loss") == pytest.approx(last["loss"], abs=5e-5)
  first = _last_metrics(child)
  assert first["step"] == 0
  assert first["loss"] == pytest.approx(last["loss"], rel=1e-5)
  assert first["exact_match"] == last["exact_match"]
  with open(os.path.join(child, "run.json")) as f:
    lineage = json.load(f)["parent"]
  assert lineage == {"path": run, "checkpoint": f"{run}/ckpt-400",
                     "step": 400, "vocab": os.path.join(run, "vocab.model"),
                     "target_vocab": None, "variables": None,
                     "map_vocab": False}
  # The report and the export (of the warm-started weights, saved as ckpt-0
  # for the dev metric) show it too; the export's search is greedy, as its
  # metadata alone is read.
  page = render.render(collect.collect(child))
  assert f"{run}/ckpt-400 (step 400; variables: all)" in page
  export = exporter.export_saved_model(child, decode_hparams="beam_size=1")
  with open(os.path.join(export, exporter.METADATA_FILE)) as f:
    assert json.load(f)["parent"] == lineage


@pytest.fixture(scope="module")
def permuted_data(parent, tmp_path_factory):
  """A data_dir (read it only) of the problem encoded with another
  vocabulary: the parent's pieces under other ids."""
  run, _ = parent
  folder = tmp_path_factory.mktemp("permuted")
  data, vocab = str(folder / "data"), str(folder / "permuted.model")
  permuted_vocab.permuted_copy(os.path.join(run, "vocab.model"), vocab)
  problem_lib.get_problem(PROBLEM).generate_data(data, vocab_from=vocab)
  return data


def test_what_does_not_fit_fails_in_one_line_and_writes_nothing(
    parent, permuted_data, tmp_path):
  run, _ = parent
  data = permuted_data
  cases = {
      "vocab": ([f"--data_dir={data}"], "the parent's vocabulary "
                f"{os.path.join(run, 'vocab.model')} differs from this run's "
                f"{os.path.join(data, 'vocab.algorithmic_reverse.model')}"),
      # Data of its own, generated with the parent's vocabulary.
      "shape": ([f"--data_dir={tmp_path / 'shape_data'}",
                 "--vocab_from=" + run, "--generate_data",
                 f"--hparams={HPARAMS},d_model=48,d_k=24,d_v=24"],
                "embedding/embeddings is [24, 32] there and [24, 48] in "
                "this model"),
  }
  # Both at once: each fails on its own, before training.
  with train_helpers.processes() as started:
    for name, (extra, _) in cases.items():
      started.append(subprocess.Popen(
          [train_helpers.console_script("t2t-trainer"), f"--problem={PROBLEM}",
           "--hparams_set=transformer_tiny", f"--hparams={HPARAMS}",
           f"--output_dir={tmp_path / name}", f"--warm_start_from={run}",
           "--train_steps=1", *extra],
          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for (name, (_, expected)), proc in zip(cases.items(), started):
      output, _ = proc.communicate(timeout=300)
      errors = [line for line in output.splitlines()
                if line.startswith("t2t-trainer: error:")]
      assert proc.returncode == 1 and len(errors) == 1, output
      assert expected in errors[0], (name, output)
      output_dir = str(tmp_path / name)
      assert not os.path.exists(output_dir), (name, os.listdir(output_dir))


def test_a_mapped_vocabulary_decodes_as_the_parent(parent, permuted_data,
                                                    tmp_path):
  """The child's vocabulary holds the parent's pieces under other ids."""
  run, last = parent
  data, child = permuted_data, str(tmp_path / "child")
  # The dev metric saves the warm-started weights as ckpt-0 to decode them
  # (EVAL_FLAGS' 60 lines, whatever --eval_steps: one batch for the loss,
  # which is not compared here).
  _trainer(data, child, f"--warm_start_from={run}", "--warm_start_map_vocab",
           "--schedule=evaluate", "--eval_steps=1")
  assert _last_metrics(child)["exact_match"] == last["exact_match"]
  # Decoded in-process as t2t-decoder does (its default settings, float32).
  lines = ["1 2 3 4 5", "9 8 7", "4 4 6 1 2 3 8", "3 1"]
  settled = machine.settle(problem_decoding.decode_hparams(PROBLEM))
  decoded = [run_decoding.load_run(output_dir).decoder(settled).decode_lines(
      lines, progress=False)[0] for output_dir in (run, child)]
  assert decoded[0] == decoded[1]
  assert len(set(decoded[0])) > 1, decoded  # not one output for every line


WORKER_SCRIPT = """
import numpy as np
import t2tlite
from t2tlite import run_dir
from t2tlite.data import vocab_source
from t2tlite.train import strategy as strategy_lib, warm_start
strategy = strategy_lib.make_strategy()
import train_helpers
check = t2tlite.build_model(train_helpers.tiny_hparams(),
                            train_helpers.SYNTHETIC_VOCAB)
prepared = warm_start.prepare(warm_start.parent_of({parent!r}), check,
                              vocab_source.VocabSource(inputs="unused"))
trainer = train_helpers.tiny_trainer({output_dir!r}, strategy,
                                     warm_start=prepared)
np.savez({weights!r}, **{{name.replace("/", "|"): v.numpy() for name, v in
                          run_dir.model_variables(trainer.model).items()}})
print("replicas", strategy.num_replicas_in_sync, "step", trainer.step,
      "warm", trainer.warm_started is prepared)
"""


@pytest.mark.timeout(300)
def test_two_workers_warm_start_the_same_weights(tmp_path):
  """MultiWorkerMirroredStrategy over two processes on 127.0.0.1."""
  import numpy as np
  import tensorflow as tf
  import t2tlite
  from t2tlite import run_dir
  tf.keras.utils.set_random_seed(7)  # not the workers' seed 1
  parent_model = t2tlite.build_model(train_helpers.tiny_hparams(),
                                     train_helpers.SYNTHETIC_VOCAB)
  parent_dir = tmp_path / "parent"
  run_dir.make_checkpoint(parent_model).save(str(parent_dir / "ckpt"))
  with train_helpers.processes() as started:
    worker_cluster.start_two_workers(
        started, tmp_path, lambda index: WORKER_SCRIPT.format(
            parent=str(parent_dir), output_dir=str(tmp_path / "run"),
            weights=str(tmp_path / f"weights{index}.npz")))
    for index, proc in enumerate(started):
      proc.wait(timeout=280)
      output = (tmp_path / f"worker{index}.txt").read_text()
      assert proc.returncode == 0, output[-5000:]
      assert "replicas 2 step 0 warm True" in output, output[-3000:]
  theirs = run_dir.model_variables(parent_model)
  for index in range(2):
    weights = np.load(tmp_path / f"weights{index}.npz")
    assert sorted(weights.files) == sorted(n.replace("/", "|") for n in theirs)
    for name, variable in theirs.items():
      np.testing.assert_array_equal(weights[name.replace("/", "|")],
                                    variable.numpy(), err_msg=name)
