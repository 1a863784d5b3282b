"""What `generate_samples` yields besides `{"inputs": str, "targets": str}`, and
the error raised for bad input data."""
import dataclasses


class DataError(ValueError):
  """Bad or missing input data; the message names the file, line or flag and
  what was expected."""


@dataclasses.dataclass(frozen=True)
class Skipped:
  """A sample left out of the records, counted in the datagen summary.

  Attributes:
    reason: short, stable text used as the summary key ("empty line").
    where: location for the summary ("train.de:17"), may be empty.
  """
  reason: str
  where: str = ""
