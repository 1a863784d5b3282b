"""Runs an exported SavedModel the way a serving client would: this process
imports only tensorflow and tensorflow_text, never t2tlite.

    python fresh_export_client.py SAVED_MODEL_DIR REQUEST.json RESULT.json

REQUEST.json: {"lines": [str], "ids": [[int]]} (and optionally
"prefixes": [str], one per line). RESULT.json holds the text and id
signatures' results on them, the text signature's on each line alone, the
translate_with_prefix signature's on the lines and prefixes, and the
results on hostile inputs (empty batch, empty and very long strings,
invalid UTF-8, bad ids, a prefix too long).
"""
import json
import sys

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the sentencepiece ops)


def _text(result):
  return {"outputs": [o.decode("utf-8") for o in result["outputs"].numpy()],
          "scores": result["scores"].numpy().tolist()}


def _ids(result):
  return {"outputs": result["outputs"].numpy().tolist(),
          "scores": result["scores"].numpy().tolist()}


def main(saved_model_dir, request_path, result_path):
  with open(request_path, encoding="utf-8") as f:
    request = json.load(f)
  model = tf.saved_model.load(saved_model_dir)
  text = model.signatures["serving_default"]
  ids = model.signatures["translate_ids"]
  long_text = "A dog runs . " * 5000
  result = {
      "text": _text(text(inputs=tf.constant(request["lines"]))),
      # Each line in a call of its own (what server-side batching merges).
      "alone": [_text(text(inputs=tf.constant([line])))
                for line in request["lines"]],
      "ids": _ids(ids(inputs=tf.constant(request["ids"], tf.int32))),
      "empty_batch": _text(text(inputs=tf.constant([], tf.string))),
      "empty_string": _text(text(inputs=tf.constant([""]))),
      # Truncated to the same first tokens, so the same output.
      "long": _text(text(inputs=tf.constant(
          [long_text, long_text + " and a different ending"]))),
      "invalid_utf8": _text(text(inputs=tf.constant(
          [b"\xff\xfe\xfd", b"A dog \xc3\x28 runs", b"\x00\x01\x02", b"\xc3"]))),
      "bad_ids": _ids(ids(inputs=tf.constant(
          [[99999, -5, 3, 1], [0, 0, 0, 0], [1, 7, 7, 7]], tf.int32))),
      "long_ids": _ids(ids(inputs=tf.fill([2, 3000], 7))),
      "empty_ids_batch": _ids(ids(inputs=tf.zeros([0, 4], tf.int32))),
      "t2tlite_imported": any(m.split(".")[0] == "t2tlite"
                              for m in sys.modules),
  }
  if "prefixes" in request:
    prefixed = model.signatures["translate_with_prefix"]
    result["prefixed"] = _text(prefixed(
        inputs=tf.constant(request["lines"]),
        target_prefixes=tf.constant(request["prefixes"])))
    try:
      prefixed(inputs=tf.constant(["A dog runs."]),
               target_prefixes=tf.constant([" ".join(["Hund"] * 60)]))
      result["too_long_prefix"] = "no error"
    except tf.errors.InvalidArgumentError as error:
      result["too_long_prefix"] = error.message
  with open(result_path, "w", encoding="utf-8") as f:
    json.dump(result, f)


if __name__ == "__main__":
  main(*sys.argv[1:])
