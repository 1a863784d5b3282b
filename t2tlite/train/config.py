"""The trainer's configuration: how to run training, as plain values."""
import dataclasses

from t2tlite import models
from t2tlite import precision
from t2tlite.train import budget

SCHEDULES = ("train", "train_and_evaluate", "evaluate")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """How to run training (the trainer's flags, as plain values).

  Attributes:
    output_dir: checkpoints, summaries and run files.
    train_steps: optimizer updates to reach (a restart continues up to it).
    schedule: "train", "train_and_evaluate" or "evaluate" (the latest
      checkpoint, once).
    eval_steps: evaluation batches (per replica) at most; <= 0 = whole split.
    local_eval_frequency: evaluate every this many steps in
      train_and_evaluate (and at the end); <= 0 = only at the end.
    save_checkpoints_secs: checkpoint at least this often (and at the end).
    keep_checkpoint_max: checkpoints kept (older ones are deleted).
    xla: compile the per-replica computation with XLA.
    mixed_precision: None or "float32", "bfloat16", or "float16" (with
      dynamic loss scaling); `t2tlite.precision.choose` picks one.
    log_every_steps: console and summary frequency.
    eval_split: the split evaluated.
    model: the registered model name (t2tlite.registry.models).
    early_stopping_patience: with a dev metric, stop training after this
      many evaluations without a better score; 0 = never.
    keep_best_checkpoints: with a dev metric, how many of the best
      checkpoints OUTPUT_DIR/best keeps (`best.py`), >= 1.
    train_minutes: > 0: plan train_steps from the measured step rate so
      that the run ends within this many minutes (`budget.py`); train_steps
      is then ignored, unless `plan` holds a plan already made.
    max_planned_steps: with train_minutes, plan at most this many steps
      (`budget.plan_train_steps`' max_steps); 0 = as many as fit.
    plan: None, or the `budget.Plan` a resumed run continues (its
      train_steps is then the run's).
  """
  output_dir: str
  train_steps: int
  schedule: str = "train_and_evaluate"
  eval_steps: int = 100
  local_eval_frequency: int = 1000
  save_checkpoints_secs: float = 600.0
  keep_checkpoint_max: int = 20
  xla: bool = False
  mixed_precision: str | None = None
  log_every_steps: int = 100
  eval_split: str = "dev"
  model: str = models.DEFAULT_MODEL
  early_stopping_patience: int = 0
  keep_best_checkpoints: int = 1
  train_minutes: float = 0.0
  max_planned_steps: int = 0
  plan: budget.Plan | None = None

  @property
  def keras_policy(self):
    """The Keras dtype policy of mixed_precision (None: float32)."""
    return precision.KERAS_POLICY[self.mixed_precision or "float32"]

  @property
  def planning(self):
    """Whether train() must still plan the run's length."""
    return self.train_minutes > 0 and self.plan is None

  def __post_init__(self):
    if self.schedule not in SCHEDULES:
      raise ValueError(f"schedule={self.schedule!r}: expected one of "
                       f"{', '.join(SCHEDULES)}")
    if (self.mixed_precision is not None and
        self.mixed_precision not in precision.KERAS_POLICY):
      raise ValueError(f"mixed_precision={self.mixed_precision!r}: expected "
                       "float32, bfloat16 or float16 (or None)")
    for name in ("train_steps", "keep_checkpoint_max", "log_every_steps",
                 "keep_best_checkpoints"):
      if getattr(self, name) <= 0:
        raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
    if self.early_stopping_patience < 0:
      raise ValueError("early_stopping_patience must be >= 0, got "
                       f"{self.early_stopping_patience}")
