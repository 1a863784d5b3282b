"""TF Serving's server-side batching parameters for an export, written
beside its metadata as assets.extra/batching_parameters.txt (VERSION: the
export's version folder, EXPORT_DIR/1):

    tensorflow_model_server --enable_batching \\
        --batching_parameters_file=VERSION/assets.extra/batching_parameters.txt

The file is a BatchingParameters text proto (TF Serving's
session_bundle_config.proto): each field wraps its number as { value: N }.
Batching is sound for a t2tlite export because a line's translation does
not depend on the other lines of its batch (tests/end_to_end/test_export.py
checks a batch of N lines against N calls of one line).
"""
import os

FILE = os.path.join("assets.extra", "batching_parameters.txt")
# How long the first request of a batch waits for others: a few ms, small
# beside a beam search's tens of ms, long enough for concurrent clients.
BATCH_TIMEOUT_MICROS = 5000
# Batches that may wait before TF Serving refuses requests at once
# (UNAVAILABLE): a few batches' work, so a waiting request is answered
# within seconds rather than timing out.
MAX_ENQUEUED_BATCHES = 4


def batching_parameters(hp):
  """The file's text for an export of DecodeHParams hp (settled: its
  concurrent_searches a number).

  max_batch_size is the decode batch_size t2t-decoder uses (32 by default),
  the size the search was measured at; one batch thread, since a batch
  already uses every core (its concurrent_searches searches each take a
  share of them). No allowed_batch_sizes: the graph takes any batch size,
  and padding a batch to a listed size would decode the padding rows too.
  """
  fields = [("max_batch_size", hp.batch_size),
            ("batch_timeout_micros", BATCH_TIMEOUT_MICROS),
            ("max_enqueued_batches", MAX_ENQUEUED_BATCHES),
            ("num_batch_threads", 1)]
  return "".join(f"{name} {{ value: {value} }}\n" for name, value in fields)
