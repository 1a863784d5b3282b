"""What the second translation problem adds to the EN->DE pipeline test
(tests/end_to_end/test_real_data.py), checked on Multi30k's French files
without training: translate_enfr_wmt reads them offline (--raw_data_dir) and
pairs each English line with its French one, and the tokenization behind
t2t-bleu's lowercased tokenized BLEU reproduces Multi30k's tokenized French
references. Training, averaging, decoding and scoring are the same commands
for every language pair: the EN->DE test runs them on real data."""
import tensorflow as tf

import t2tlite.problems  # noqa: F401  (registers the built-in problems)
from corpora import (MULTI30K_TRAIN_LINES, multi30k_raw_folder, read_lines,
                     shared_corpus)
from t2tlite import problem as problem_lib
from t2tlite.data import records
from t2tlite.evaluate import moses_bleu


def test_enfr_datagen_pairs_the_french_files(tmp_path):
  raw = multi30k_raw_folder(tmp_path / "raw", ("en", "fr"))
  problem = problem_lib.get_problem("translate_enfr_wmt")
  data_dir = tmp_path / "data"
  summary = problem.generate_data(str(data_dir), raw_data_dir=str(raw),
                                  vocab_size=1000)
  assert summary["splits"]["train"]["examples"] == MULTI30K_TRAIN_LINES
  assert summary["splits"]["dev"]["examples"] == 1014
  assert summary["splits"]["test"]["examples"] == 1000
  # The records of the test split decode to the English and French lines,
  # in order.
  vocab = problem.vocabulary(str(data_dir))
  examples = [records.parse_example(r) for r in tf.data.TFRecordDataset(
      problem.shard_files(str(data_dir), "test"))]
  for side, lang in (("inputs", "en"), ("targets", "fr")):
    text = read_lines(raw / f"test_2016_flickr.{lang}.gz")
    decoded = vocab.decode(tf.ragged.constant(
        [e[side].numpy() for e in examples])).numpy()
    assert [d.decode("utf-8") for d in decoded] == [
        " ".join(t.split()) for t in text]
  english, french = problem.text_pairs(str(data_dir), "test")[0]
  assert english == "A man in an orange hat starring at something."
  assert french == "Un homme avec un chapeau orange regardant quelque chose."


def test_moses_tokenize_reproduces_the_tokenized_french_references():
  source = shared_corpus("multi30k")
  raw = read_lines(source / "raw" / "test_2016_flickr.fr.gz")
  tok = read_lines(source / "tok" / "test_2016_flickr.lc.norm.tok.fr")
  assert len(raw) == len(tok) == 1000
  differ = [(ours, theirs) for ours, theirs
            in zip(moses_bleu.moses_tokenize(raw, "fr"), tok)
            if ours != theirs]
  # One line of 1,000: the references' normalization moved a full stop
  # after the closing quote ('neude . "' against 'neude " .').
  assert len(differ) == 1, differ[:3]
  assert differ[0][0].endswith("neude . &quot;")
  assert differ[0][1].endswith("neude &quot; .")
