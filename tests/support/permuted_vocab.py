"""A vocabulary with the same pieces as another under other ids: what a
vocabulary map (t2t-trainer --warm_start_map_vocab) must undo exactly."""
import random

from sentencepiece import sentencepiece_model_pb2

SPECIAL_IDS = 3  # PAD, EOS, UNK keep their ids (t2tlite.ids)


def permuted_copy(path, copy, seed=0):
  """Writes to `copy` the sentencepiece model at `path` with its ordinary
  pieces shuffled: the same pieces and scores (so the same segmentation),
  other ids."""
  proto = sentencepiece_model_pb2.ModelProto()
  with open(path, "rb") as f:
    proto.ParseFromString(f.read())
  normal = [sentencepiece_model_pb2.ModelProto.SentencePiece()
            for _ in proto.pieces[SPECIAL_IDS:]]
  for new, old in zip(normal, proto.pieces[SPECIAL_IDS:]):
    new.CopyFrom(old)
  random.Random(seed).shuffle(normal)
  del proto.pieces[SPECIAL_IDS:]
  proto.pieces.extend(normal)
  with open(copy, "wb") as f:
    f.write(proto.SerializeToString())
