"""From a run folder, a checkpoint or an ensemble to a Decoder: the one road
that t2t-decoder, t2t-attention, the dev metric, t2t-exporter, t2t-serve and
the benchmarks take.

    settled = machine.settle(hp, set_threads=True)      # once a process
    run = load_run(output_dir, checkpoint, dtype=settled.precision.keras_policy)
    decoder = run.decoder(settled)   # the problem's constraint, if any
    outputs, scores = decoder.decode_lines(lines)

Decode settings come from `problem_decoding.decode_hparams` (parsed once);
they are settled (`machine.settle`) once a process, before the model loads
(a model built in a precision, TensorFlow's threads set before it runs).
"""
import dataclasses

from t2tlite import files
from t2tlite import problem as problem_lib
from t2tlite import problem_decoding
from t2tlite import run_dir
from t2tlite.data.vocab import Vocabulary
from t2tlite.decode import decoding


@dataclasses.dataclass(frozen=True)
class LoadedRun:
  """A trained model with its vocabularies, restored from a run.

  Attributes:
    model: a Transformer, or an `ensemble.Ensemble` of several runs'.
    info: the run's RunInfo (an ensemble's first member's): its problem,
      hparams and vocabulary files.
    checkpoint: the checkpoint restored (an ensemble's, joined by commas).
    vocab: the inputs' Vocabulary.
    target_vocab: the targets' Vocabulary (`vocab` itself when shared).
  """
  model: object
  info: object
  checkpoint: str
  vocab: Vocabulary
  target_vocab: Vocabulary

  @property
  def ensemble(self):
    """Whether the model is an ensemble of several runs' models."""
    return hasattr(self.model, "models")

  def problem(self):
    """The run's registered Problem (its postprocess, its metric)."""
    return problem_lib.get_problem(self.info.problem)

  def constraint(self, hp):
    """The problem's decoding constraint for DecodeHParams hp, or None
    (`problem_decoding.decode_constraint`)."""
    return problem_decoding.decode_constraint(self.info.problem, self.vocab,
                                              self.target_vocab, hp)

  def decoder(self, settled):
    """A `decoding.Decoder` of this model, decoding as `settled` (a
    `machine.SettledDecode`) says, under the problem's constraint (unless
    hp.constrained is false)."""
    return decoding.Decoder(self.model, self.vocab, settled,
                            self.target_vocab, self.constraint(settled.hp))


def load_run(output_dir, checkpoint=None, dtype=None):
  """A run's model restored, with its vocabularies: a `LoadedRun`.

  Args:
    output_dir: the run folder (hparams.json, run.json, vocabularies).
    checkpoint: None (its newest checkpoint), a checkpoint prefix or folder
      (OUTPUT_DIR/ckpt-100, OUTPUT_DIR/averaged), or an ensemble: a list of
      members, or one string of them separated by commas (as
      --checkpoint_path), each a checkpoint of output_dir, another run
      folder or a checkpoint of one (`run_dir.load_models`).
    dtype: the Keras dtype policy the model computes in (None: float32).
  Raises:
    FileNotFoundError: not a run folder, or no checkpoint.
    ValueError: ensemble members of different problems or vocabularies.
  """
  members = (list(checkpoint) if isinstance(checkpoint, (list, tuple)) else
             files.split_ensemble(checkpoint, "checkpoint_path"))
  if members:
    model, info, path = run_dir.load_ensemble(output_dir, members,
                                              dtype=dtype)
  else:
    model, info, path = run_dir.load_trained_model(output_dir, checkpoint,
                                                   dtype=dtype)
  vocab = Vocabulary.from_file(info.vocab_file)
  target_vocab = (vocab if info.shares_vocabulary else
                  Vocabulary.from_file(info.target_vocab_file))
  return LoadedRun(model, info, path, vocab, target_vocab)
