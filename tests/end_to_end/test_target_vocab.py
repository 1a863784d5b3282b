"""A problem with its own target vocabulary through every step of a run:
parsing_wsj (BPE pieces for the words, one id per tree symbol) on a few files
of the WSJ sample goes through datagen, t2t-trainer, checkpoint averaging,
export and t2t-decoder; the SavedModel, run in a fresh process, turns raw
words into the decoder's tree symbols; attention plots label each side with
its own vocabulary. The model has the decoder's word pointer (hparam
word_pointer), so every step rebuilds it from the run folder.

t2t-trainer (whose command writes the target vocabulary into the run
folder) and t2t-decoder run as commands; datagen, averaging and export call
their commands' library functions in this process, which has TensorFlow
loaded already (t2t-datagen's, t2t-avg-checkpoints' and t2t-exporter's
command lines are tested in test_commands.py)."""
import json
import os
import shutil
import subprocess
import sys

import pytest
import tensorflow as tf

from corpora import shared_corpus
from t2tlite import run_dir
from t2tlite.data import trees
from t2tlite.data.vocab import UNK_ID, Vocabulary
from t2tlite.decode import attention_plots
from t2tlite.export import exporter
from train_helpers import SUPPORT_DIR, TINY_HPARAMS, console_script, run

TRAIN_FILES = 8  # wsj_0001-0008 train, wsj_0009 dev (the sample's split)
MAX_LENGTH = 256
HPARAMS = (TINY_HPARAMS + f",batch_size=1024,max_length={MAX_LENGTH},"
           "word_pointer=true")
# What fresh_export_client.py sends as its long text.
LONG_TEXT = "A dog runs . " * 5000
DECODE = "beam_size=2,alpha=0.6,extra_length=12"
# One dev sentence, decoded in float32 by both the decoder (whose default
# precision may be bfloat16 here) and the export: both then compute exactly
# the same batch, and the near-equal scores of a model trained for 10 steps
# cannot tie-break differently.
LINES = 1


def _command(name, *args, timeout=300):
  code, output = run([console_script(name), *args], timeout=timeout)
  assert code == 0, f"{name}:\n{output[-3000:]}"
  return output


@pytest.fixture(scope="module")
def parsing_run(tmp_path_factory):
  """(data_dir, output_dir, export version folder): datagen, averaging
  and export as t2t-datagen, t2t-avg-checkpoints and t2t-exporter run
  them, in this process."""
  from t2tlite.data import datagen
  from t2tlite.problem import get_problem
  from t2tlite.train import averaging
  import t2tlite.problems  # noqa: F401  (registers the built-in problems)
  sample = shared_corpus("wsj_sample")
  root = tmp_path_factory.mktemp("parsing")
  raw = root / "raw"
  raw.mkdir()
  for path in sorted(sample.glob("wsj_*.mrg"))[:TRAIN_FILES + 1]:
    shutil.copy(path, raw)
  data_dir, output_dir = root / "data", root / "train"
  summary = datagen.format_summary(get_problem("parsing_wsj").generate_data(
      str(data_dir), raw_data_dir=str(raw), vocab_size=400))
  assert "input vocabulary (trained):" in summary, summary
  assert "target vocabulary (trained):" in summary, summary
  # A checkpoint every step (the last 3 kept) gives averaging 2 to read.
  _command("t2t-trainer", "--problem=parsing_wsj", f"--data_dir={data_dir}",
           f"--output_dir={output_dir}", "--hparams_set=transformer_tiny",
           f"--hparams={HPARAMS}", "--train_steps=10",
           "--save_checkpoints_secs=0", "--keep_checkpoint_max=3",
           "--eval_steps=1", "--local_eval_frequency=0", "--random_seed=1",
           "--dev_metric=false")
  export_dir = root / "export"
  # The newest checkpoint, exported in float32 (t2t-exporter's defaults).
  version = exporter.export_saved_model(
      str(output_dir), export_dir=str(export_dir), decode_hparams=DECODE)
  assert version == str(export_dir / "1")
  averaging.average_checkpoints(str(output_dir), 2)
  averaged = [name for name, _ in tf.train.list_variables(
      str(output_dir / "averaged"))]
  assert any("input_embedding" in name for name in averaged), averaged
  assert any("word_pointer" in name for name in averaged), averaged
  return data_dir, output_dir, version


def _symbols(vocab):
  """The target vocabulary's tokens (pieces without the word marker)."""
  pieces = vocab.id_to_piece(list(range(3, vocab.size))).numpy()
  return {p.decode("utf-8").lstrip("\u2581") for p in pieces}


@pytest.mark.timeout(600)
def test_run_folder_holds_both_vocabularies(parsing_run):
  data_dir, output_dir, _ = parsing_run
  info = run_dir.read_run_info(str(output_dir))
  assert not info.shares_vocabulary
  assert info.target_vocab_file == str(output_dir / "vocab.targets.model")
  with open(info.target_vocab_file, "rb") as copy, open(
      data_dir / "vocab.parsing_wsj.targets.model", "rb") as source:
    assert copy.read() == source.read()
  targets = Vocabulary.from_file(info.target_vocab_file)
  words = Vocabulary.from_file(info.vocab_file)
  assert (info.target_vocab_size, info.vocab_size) == (targets.size,
                                                       words.size)
  symbols = _symbols(targets)
  # One id per tree symbol: an opening or closing bracket, or a POS tag.
  assert {"(S", ")S", "(NP", ")NP", "NNP", "DT", "."} <= symbols
  assert not symbols & {"the", "The", "Vinken"}, symbols
  line = "(S (NP DT NN )NP (VP VBZ )VP . )S"
  assert len(targets.encode_text(line, add_eos=False)) == len(line.split())


def _tree_words(text):
  """The words of a bracketed tree (TreeError if it is not one tree)."""
  (tree,) = list(trees.parse_trees(text))
  return tree.words()


@pytest.mark.timeout(600)
def test_decoder_and_fresh_export_give_trees_over_the_words(parsing_run,
                                                            tmp_path):
  # The model trained 10 steps: its trees are well-formed only because
  # decoding is constrained, in t2t-decoder and in the SavedModel alike.
  data_dir, output_dir, export = parsing_run
  info = run_dir.read_run_info(str(output_dir))
  words = Vocabulary.from_file(info.vocab_file)
  targets = Vocabulary.from_file(info.target_vocab_file)
  with open(data_dir / "parsing_wsj-dev.inputs.txt", encoding="utf-8") as f:
    lines = [next(f).rstrip("\n") for _ in range(LINES)]
  # Words with brackets, and more words than the model's max_length.
  lines += ["The f(x) rule ( roughly ) holds .",
            " ".join(["word"] * (MAX_LENGTH + 20))]
  source = tmp_path / "dev.txt"
  source.write_text("\n".join(lines[:LINES]) + "\n", encoding="utf-8")
  decoded = tmp_path / "decoded.txt"
  request, result_path = tmp_path / "request.json", tmp_path / "result.json"
  encoded = [words.encode_text(line) for line in lines]
  width = max(map(len, encoded))
  request.write_text(json.dumps({
      "lines": lines, "ids": [ids + [0] * (width - len(ids))
                              for ids in encoded]}))
  client = subprocess.Popen(
      [sys.executable, os.path.join(SUPPORT_DIR, "fresh_export_client.py"),
       export, str(request), str(result_path)], stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True)
  try:
    _command("t2t-decoder", f"--output_dir={output_dir}",
             f"--decode_hparams={DECODE}", "--mixed_precision=float32",
             f"--decode_from_file={source}", f"--decode_to_file={decoded}",
             "--postprocess")
    _, stderr = client.communicate(timeout=300)
  finally:
    if client.poll() is None:
      client.kill()
      client.wait()
  assert client.returncode == 0, stderr[-3000:]
  result = json.loads(result_path.read_text())
  assert result["t2tlite_imported"] is False

  outputs = result["text"]["outputs"]
  assert outputs[:LINES] == decoded.read_text(
      encoding="utf-8").splitlines()
  for line, tree in zip(lines, outputs):
    assert _tree_words(tree) == [trees.escape_word(w) for w in line.split()]
  assert " f-LRB-x-RRB-)" in outputs[LINES]
  (long_tree,) = result["long"]["outputs"][:1]
  assert len(_tree_words(long_tree)) == len(LONG_TEXT.split())
  assert result["empty_string"]["outputs"] == [""]

  # The id signature: linearized trees of target ids, one XX per word the
  # encoder saw (the long line is cut to max_length - 1 pieces).
  rows = [[i for i in row if i] for row in result["ids"]["outputs"]]
  assert max(max(row) for row in rows) < targets.size
  for ids, row in zip(encoded, rows):
    pieces = words.id_to_piece(ids[:-1][:MAX_LENGTH - 1]).numpy()
    seen = sum(p.decode("utf-8").startswith("\u2581") for p in pieces)
    linearized = targets.decode_ids(row)
    tree = trees.delinearize(linearized, strict=True)
    assert len(tree.words()) == seen, linearized
  # Input ids beyond the input vocabulary are UNK, not errors.
  assert len(result["bad_ids"]["outputs"]) == 3
  with open(os.path.join(export, exporter.METADATA_FILE)) as f:
    metadata = json.load(f)
  assert (metadata["vocab_size"], metadata["target_vocab_size"]) == (
      words.size, targets.size)
  assert metadata["constrained"] is True


@pytest.mark.timeout(600)
def test_attention_labels_come_from_each_vocabulary(parsing_run):
  _, output_dir, _ = parsing_run
  model, info, _ = run_dir.load_trained_model(str(output_dir))
  words = Vocabulary.from_file(info.vocab_file)
  targets = Vocabulary.from_file(info.target_vocab_file)
  target = "(S (NP NNP NNP )NP VBZ . )S"
  maps = attention_plots.attention_maps(
      model, words, "Pierre Vinken sleeps .", targets.encode_text(target),
      target, target_vocab=targets)
  pieces = maps["pieces"]
  assert pieces["target"] == ["\u2581(S", "\u2581(NP", "\u2581NNP",
                              "\u2581NNP", "\u2581)NP", "\u2581VBZ",
                              "\u2581.", "\u2581)S", "</s>"]
  assert pieces["source"] == [
      p.decode("utf-8") for p in words.id_to_piece(
          words.encode_text("Pierre Vinken sleeps .")).numpy()]
  assert UNK_ID not in targets.encode_text("(S (NP NNP NNP )NP VBZ . )S")
  assert maps["weights"]["encdec"][0].shape[1:] == (9, len(pieces["source"]))
