"""Data: sentencepiece vocabularies, TFRecord shards, raw readers, the tf.data
input pipeline."""
