"""Sentencepiece vocabularies run by tensorflow-text: ids, EOS/padding handling,
agreement with the sentencepiece package, graceful size reduction."""
import io
import logging
import os

import pytest
import sentencepiece as spm
import tensorflow as tf

from corpora import read_lines, shared_corpus
from t2tlite.data import vocab as vocab_lib


@pytest.fixture(scope="module")
def sentences():
  folder = shared_corpus("multi30k/raw")
  return (read_lines(folder / "train.en.gz", 1500) +
          read_lines(folder / "train.de.gz", 1500))


@pytest.fixture(scope="module")
def vocab(sentences, tmp_path_factory):
  path = str(tmp_path_factory.mktemp("vocab") / "v.model")
  size = vocab_lib.train_sentencepiece(lambda: iter(sentences), path, 500)
  assert size == 500
  return vocab_lib.Vocabulary.from_file(path)


def test_special_ids(vocab):
  pieces = vocab.id_to_piece([0, 1, 2]).numpy().tolist()
  assert pieces == [b"<pad>", b"</s>", b"<unk>"]
  assert (vocab_lib.PAD_ID, vocab_lib.EOS_ID, vocab_lib.UNK_ID) == (0, 1, 2)
  assert vocab.size == 500


def test_encode_is_ragged_int32_without_eos(vocab, sentences):
  ids = vocab.encode(tf.constant(sentences[:3]))
  assert isinstance(ids, tf.RaggedTensor)
  assert ids.dtype == tf.int32 and ids.shape.rank == 2 and ids.shape[0] == 3
  values = ids.flat_values.numpy()
  assert not set(values.tolist()) & {0, 1}  # no padding, no EOS, no BOS


def test_decode_stops_at_eos_and_ignores_padding(vocab, sentences):
  texts = sentences[:2]
  rows = vocab.encode(tf.constant(texts)).to_list()
  garbage = rows[1][:3]  # after EOS: must not be decoded
  width = max(map(len, rows)) + 6
  dense = [(r + [1] + garbage + [0] * width)[:width] for r in rows]
  dense[0] = rows[0] + [1] + [0] * (width - len(rows[0]) - 1)
  decoded = vocab.decode(tf.constant(dense)).numpy()
  assert [d.decode("utf-8") for d in decoded] == texts
  ragged = tf.ragged.constant([r + [1] for r in rows])
  assert vocab.decode(ragged).numpy().tolist() == [
      t.encode("utf-8") for t in texts]


def test_python_conveniences_round_trip(vocab, sentences):
  ids = vocab.encode_text(sentences[5])
  assert ids[-1] == vocab_lib.EOS_ID and ids.count(vocab_lib.EOS_ID) == 1
  assert vocab.decode_ids(ids + [0, 0]) == sentences[5]


def test_graph_mode_encode_decode(vocab, sentences):
  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)],
               autograph=False)
  def round_trip(text):
    return vocab.decode(vocab.encode(text).to_tensor())

  out = round_trip(tf.constant(sentences[:4])).numpy()
  assert [o.decode("utf-8") for o in out] == sentences[:4]


def test_tensorflow_text_matches_sentencepiece_package(vocab, sentences):
  processor = spm.SentencePieceProcessor(model_proto=vocab.model_proto)
  expected = processor.encode(sentences[:300])
  assert vocab.encode(tf.constant(sentences[:300])).to_list() == expected


@pytest.mark.parametrize("requested, warning", [(50_000, "too large"),
                                                (10, "below")])
def test_unsupported_vocab_size_is_changed_with_warning(
    sentences, tmp_path, caplog, requested, warning):
  path = str(tmp_path / "v.model")
  with caplog.at_level(logging.WARNING):
    size = vocab_lib.train_sentencepiece(lambda: iter(sentences[:200]), path,
                                         requested)
  assert 20 < size < 5000 and size != requested
  assert vocab_lib.Vocabulary.from_file(path).size == size
  assert any(warning in r.getMessage() for r in caplog.records)
  assert os.listdir(tmp_path) == ["v.model"]  # no temporary file left


def test_an_unknown_model_type_is_refused_before_training(tmp_path):
  with pytest.raises(ValueError, match=r"^model_type='char': expected one "
                     r"of \('bpe', 'unigram', 'word'\)$"):
    vocab_lib.train_sentencepiece(lambda: iter(["a b"] * 10),
                                  str(tmp_path / "v.model"), 8,
                                  model_type="char")
  assert not os.listdir(tmp_path)


def test_failed_training_writes_nothing(tmp_path):
  with pytest.raises(RuntimeError):
    vocab_lib.train_sentencepiece(lambda: iter([]), str(tmp_path / "v.model"),
                                  100)
  assert not os.listdir(tmp_path)


def test_unigram_and_byte_fallback(sentences, tmp_path):
  path = str(tmp_path / "u.model")
  vocab_lib.train_sentencepiece(lambda: iter(sentences), path, 600,
                                model_type="unigram", byte_fallback=True)
  vocab = vocab_lib.Vocabulary.from_file(path)
  text = "Ein Hund ☃ läuft “schnell”."  # characters unseen in training
  ids = vocab.encode_text(text)
  assert vocab_lib.UNK_ID not in ids
  assert vocab.decode_ids(ids) == text


def test_word_model_is_a_closed_vocabulary_of_whole_tokens(tmp_path):
  trees = ["(S (NP XX XX )NP (VP XX (NP XX )NP )VP XX )S",
           "(S (SBAR-ADV-PRD XX )SBAR-ADV-PRD (NP XX )NP XX )S"] * 3
  path = str(tmp_path / "w.model")
  size = vocab_lib.train_sentencepiece(lambda: iter(trees), path, None,
                                       model_type="word")
  vocab = vocab_lib.Vocabulary.from_file(path)
  tokens = set(" ".join(trees).split())
  assert size == vocab.size == 3 + len(tokens)
  assert {p.decode("utf-8") for p in vocab.id_to_piece(
      list(range(3, size))).numpy()} == {"▁" + t for t in tokens}
  for line in trees[:2]:
    ids = vocab.encode_text(line)
    assert len(ids) == len(line.split()) + 1  # one id a token, and EOS
    assert vocab.decode_ids(ids) == line
  unseen = vocab.encode_text("(S (FRAG XX )FRAG )S", add_eos=False)
  assert unseen[1] == unseen[3] == vocab_lib.UNK_ID
  assert vocab_lib.UNK_ID not in unseen[:1] + unseen[2:3] + unseen[4:]


def test_two_vocabularies_stay_apart_in_a_loaded_saved_model(vocab, tmp_path):
  """tensorflow-text resources made under one name become one resource when
  a SavedModel is loaded: each Vocabulary's tokenizer needs its own name."""
  path = str(tmp_path / "w.model")
  vocab_lib.train_sentencepiece(lambda: iter(["(S (NP XX )NP )S"] * 3), path,
                                None, model_type="word")
  words = vocab_lib.Vocabulary.from_file(path)
  module = tf.Module()
  module.vocabs = [vocab, words]
  module.decode = tf.function(
      lambda ids: [vocab.decode(ids), words.decode(ids)],
      input_signature=[tf.TensorSpec([None, None], tf.int32)], autograph=False)
  ids = tf.constant([[3, 4, 5, 1]])
  expected = [t.numpy().tolist() for t in module.decode(ids)]
  assert expected[0] != expected[1]
  tf.saved_model.save(module, str(tmp_path / "saved"))
  loaded = tf.saved_model.load(str(tmp_path / "saved"))
  assert [t.numpy().tolist() for t in loaded.decode(ids)] == expected


def test_tokenizer_survives_cleared_kernel_caches(vocab, sentences):
  """Setting a seed or clearing the Keras session clears TensorFlow's eager
  kernel cache; tensorflow-text's own sentencepiece resource belongs to a
  kernel there and was deleted with it (NotFoundError on the next use)."""
  import keras
  expected = vocab.encode(tf.constant(sentences[:3])).to_list()
  other = vocab_lib.Vocabulary(vocab.model_proto)  # the same model
  tf.random.set_seed(1)
  keras.utils.set_random_seed(2)
  keras.backend.clear_session()
  assert vocab.encode(tf.constant(sentences[:3])).to_list() == expected
  assert other.encode(tf.constant(sentences[:3])).to_list() == expected
  assert vocab.decode_ids(expected[0]) == sentences[0]


def test_user_defined_symbols_are_whole_pieces_from_id_3(tmp_path):
  lines = ["ein hund rennt", "a dog runs fast", "zwei katzen schlafen"] * 20
  path = str(tmp_path / "t.model")
  vocab_lib.train_sentencepiece(lambda: iter(lines), path, 40,
                                user_defined_symbols=("<2de>", "<2fr>"))
  vocab = vocab_lib.Vocabulary.from_file(path)
  assert vocab.pieces()[3:5] == ["<2de>", "<2fr>"]
  # Never seen in training, yet one id each, even inside a word.
  ids = vocab.encode_text("<2fr> a dog<2de>s", add_eos=False)
  assert ids.count(3) == ids.count(4) == 1
  assert vocab_lib.UNK_ID not in ids


def test_model_with_other_special_ids_is_refused(tmp_path):
  model = io.BytesIO()
  spm.SentencePieceTrainer.train(
      sentence_iterator=iter(["a dog runs", "the cats sleep"] * 10),
      model_writer=model, vocab_size=20, pad_id=0, bos_id=1, unk_id=2,
      eos_id=3, minloglevel=2)
  path = tmp_path / "eos3.model"
  path.write_bytes(model.getvalue())
  with pytest.raises(ValueError) as error:
    vocab_lib.Vocabulary.from_file(str(path))
  assert str(error.value) == (
      f"{path}: expected pad/eos/unk ids 0/1/2, found 0/3/2")


def test_encode_text_adds_eos_only_when_asked(vocab, sentences):
  processor = spm.SentencePieceProcessor(model_proto=vocab.model_proto)
  expected = processor.encode(sentences[7])
  assert vocab.encode_text(sentences[7], add_eos=False) == expected
  assert vocab.encode_text(sentences[7]) == expected + [vocab_lib.EOS_ID]


def test_too_large_size_becomes_the_largest_supported(sentences, tmp_path,
                                                      caplog):
  path = str(tmp_path / "v.model")
  size = vocab_lib.train_sentencepiece(lambda: iter(sentences[:200]), path,
                                       50_000)
  # One piece more is again too many for sentencepiece.
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    again = vocab_lib.train_sentencepiece(lambda: iter(sentences[:200]),
                                          path, size + 1)
  assert again == size
  assert any("too large" in r.getMessage() for r in caplog.records)
