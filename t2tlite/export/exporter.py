"""Writes a trained run as a SavedModel in the layout TF Serving watches.

    EXPORT_DIR/            default OUTPUT_DIR/export
      1/                   one version per export, increasing integers
        saved_model.pb, variables/, assets.extra/t2tlite_export.json,
        assets.extra/batching_parameters.txt (TF Serving's
        --batching_parameters_file, see batching_config.py)
      2/ ...

TF Serving (--model_base_path=EXPORT_DIR) serves the highest version and picks
up new ones as they appear; it only considers folders named by an integer, so
an export is written to a "temp-..." folder beside them and renamed when
complete (a failed export leaves no version folder behind).

An export computes in float32 by default: it is served on machines other
than the one that trained it, and float32 is correct and fast on all of
them. precision="bfloat16" is a variant for servers that compute bfloat16
natively (GPUs of compute capability >= 8.0, CPUs with avx512_bf16 or
amx_bf16); elsewhere it is emulated and slower. Weights are stored in
float32 either way.
"""
import dataclasses
import json
import os
import uuid

import tensorflow as tf

from t2tlite import files, run_decoding, run_dir
from t2tlite import precision as precision_lib
from t2tlite import problem_decoding
from t2tlite.decode import machine
from t2tlite.decode.settings import DecodeHParams
from t2tlite.export import batching_config
from t2tlite.export.layout import (EXPORT_SUBDIR, METADATA_FILE,
                                   numbered_versions)
from t2tlite.export.serving_module import ServingModule

# Ops that run Python or need XLA: stock TF Serving has neither.
_PYTHON_OPS = ("PyFunc", "PyFuncStateless", "EagerPyFunc")
_TF_TEXT_OP_PREFIXES = ("Sentencepiece",)


def versions(export_dir):
  """Sorted integer versions already in export_dir (missing folder: [])."""
  if not tf.io.gfile.isdir(export_dir):
    return []
  return [version for version, _ in numbered_versions(
      name.rstrip("/") for name in tf.io.gfile.listdir(export_dir))]


def _saved_model_nodes(saved_model_dir):
  """Every NodeDef of a SavedModel's graphs and function library."""
  from tensorflow.core.protobuf import saved_model_pb2
  proto = saved_model_pb2.SavedModel()
  with tf.io.gfile.GFile(os.path.join(saved_model_dir, "saved_model.pb"),
                         "rb") as f:
    proto.ParseFromString(f.read())
  for meta_graph in proto.meta_graphs:
    graph = meta_graph.graph_def
    yield from graph.node
    for function in graph.library.function:
      yield from function.node_def


def saved_model_ops(saved_model_dir):
  """Every op type in a SavedModel's graphs and function library (a set)."""
  return {node.op for node in _saved_model_nodes(saved_model_dir)}


def matmul_dtypes(saved_model_dir):
  """The dtypes (names, e.g. {"float32"}) a SavedModel's matmuls compute in:
  what decides its speed on a server."""
  dtypes = set()
  for node in _saved_model_nodes(saved_model_dir):
    if node.op in ("MatMul", "BatchMatMulV2", "BatchMatMulV3"):
      # BatchMatMulV3 names its input type Ta, the others T.
      attr = node.attr["T"] if "T" in node.attr else node.attr["Ta"]
      dtypes.add(tf.dtypes.as_dtype(attr.type).name)
  return dtypes


def check_serving_ops(saved_model_dir):
  """Raises ValueError unless every op is a TensorFlow core op (tf.raw_ops)
  or a tensorflow-text sentencepiece op, with no Python or XLA-only op."""
  ops = saved_model_ops(saved_model_dir)
  core = set(dir(tf.raw_ops))
  bad = sorted(op for op in ops
               if op in _PYTHON_OPS or op.startswith("Xla") or (
                   op not in core and not op.startswith(_TF_TEXT_OP_PREFIXES)))
  if bad:
    raise ValueError(
        f"{saved_model_dir}: ops TF Serving may lack (Python, XLA-only or "
        f"neither TensorFlow core nor tensorflow-text): {', '.join(bad)}")
  return ops


def _decode_hparams(decode_hparams, problem_name):
  """DecodeHParams as given, or the problem's defaults with the overrides
  string (or None) on top."""
  if isinstance(decode_hparams, DecodeHParams):
    return decode_hparams
  return problem_decoding.decode_hparams(problem_name, decode_hparams or "")


def _publish(tmp, export_dir):
  """Renames the complete export `tmp` to the next free version folder."""
  while True:
    version = (versions(export_dir) or [0])[-1] + 1
    path = os.path.join(export_dir, str(version))
    try:
      # A rename onto an existing (non-empty) version fails: another export
      # took that number meanwhile; try the next one.
      tf.io.gfile.rename(tmp, path, overwrite=False)
      return path
    except (tf.errors.AlreadyExistsError, tf.errors.FailedPreconditionError,
            OSError):
      if not tf.io.gfile.exists(path):
        raise


def settled_for_export(hp):
  """`hp` settled as an export runs them wherever it is served: int8 picked
  at each call (`machine.settle`'s int8_per_call), and a float32 search's
  decoder kernels laid out as oneDNN's AVX2 GEMM runs them fast, wherever
  the export is made (`SettledDecode.laid_out_kernels`)."""
  return dataclasses.replace(machine.settle(hp, int8_per_call=True),
                             laid_out_kernels=True)


def export_saved_model(output_dir, export_dir=None, checkpoint_path=None,
                       decode_hparams=None, precision="float32"):
  """Exports a trained run for TF Serving.

  Args:
    output_dir: the training folder (hparams.json, run.json, vocab.model
      and vocab.targets.model if any, checkpoints), see t2tlite.run_dir.
    export_dir: where version folders go; default OUTPUT_DIR/export.
    checkpoint_path: a checkpoint prefix or folder (e.g. OUTPUT_DIR/averaged);
      default the newest checkpoint in output_dir.
    decode_hparams: DecodeHParams, or a "beam_size=4,alpha=0.6" string (or
      None) applied over the problem's decode_defaults; fixed in the
      exported graph.
    precision: "float32" (default: correct and fast on every server) or
      "bfloat16" (for servers that compute it natively); recorded in the
      export's metadata.
  Returns:
    The new version folder, EXPORT_DIR/<version>.
  Raises:
    FileNotFoundError: no trained run or checkpoint (names the folder).
    ValueError: bad decode hparams or precision, or an op TF Serving may
      lack.
  """
  if precision not in precision_lib.EXPORT_PRECISIONS:
    raise ValueError(f"export precision {precision!r}: expected "
                     f"{' or '.join(precision_lib.EXPORT_PRECISIONS)}")
  if files.split_ensemble(checkpoint_path, "checkpoint_path"):
    raise ValueError(f"--checkpoint_path={checkpoint_path}: an export holds "
                     "one model, not an ensemble (t2t-decoder and t2t-serve "
                     "decode ensembles)")
  # Parsed and settled before the model loads, so that mistakes fail fast:
  # auto searches a number; int8 kept where it cannot compute here (each
  # request picks, `search.int8_or_float`).
  hp = _decode_hparams(decode_hparams,
                       run_dir.read_run_info(output_dir).problem)
  if hp.xla_lines:
    raise ValueError(f"decode hparam xla_lines={hp.xla_lines} is a "
                     "Decoder's (t2t-decoder, t2t-serve on a run folder): an "
                     "export's search is not XLA-compiled; leave it out")
  settled = settled_for_export(hp)
  run = run_decoding.load_run(output_dir, checkpoint_path,
                              dtype=precision_lib.KERAS_POLICY[precision])
  info, vocab, checkpoint = run.info, run.vocab, run.checkpoint
  # The road to a Decoder, ending in a ServingModule: the same model,
  # vocabularies and constraint.
  constraint = run.constraint(hp)
  # Constrained outputs are well-formed, so the problem's postprocess can
  # run in the graph (parsing: bracketed trees with the input's words).
  postprocess = (run.problem().postprocess_graph
                 if constraint is not None else None)
  module = ServingModule(
      run.model, vocab, settled,
      target_vocab=None if info.shares_vocabulary else run.target_vocab,
      constraint=constraint, postprocess=postprocess,
      target_languages=info.target_languages)
  export_dir = export_dir or os.path.join(output_dir, EXPORT_SUBDIR)
  tf.io.gfile.makedirs(export_dir)
  tmp = os.path.join(export_dir, f"temp-{uuid.uuid4().hex}")
  try:
    tf.saved_model.save(module, tmp, signatures=module.signatures())
    check_serving_ops(tmp)
    metadata = {"checkpoint": checkpoint, "problem": info.problem,
                # As settled in the graph: the searches it runs, not auto.
                "decode_hparams": vars(module.hp), "precision": precision,
                "max_input_length": module.max_input_length,
                "vocab_size": vocab.size,
                "target_vocab_size": module.target_vocab.size,
                "constrained": constraint is not None,
                # A warm-started run's lineage (run.json's "parent"), or None.
                "parent": run_dir.read_parent(output_dir),
                # A mixture's {language: tag} (translate_to_language).
                "target_languages": info.target_languages}
    tf.io.gfile.makedirs(os.path.dirname(os.path.join(tmp, METADATA_FILE)))
    files.atomic_write_text(os.path.join(tmp, METADATA_FILE),
                            json.dumps(metadata, indent=2, sort_keys=True))
    files.atomic_write_text(os.path.join(tmp, batching_config.FILE),
                            batching_config.batching_parameters(module.hp))
    return _publish(tmp, export_dir)
  finally:
    if tf.io.gfile.exists(tmp):
      tf.io.gfile.rmtree(tmp)
