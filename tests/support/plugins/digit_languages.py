"""Two tiny generated problems to mix (`plugin_copy_digits+plugin_reverse_digits`):
the same digit lines copied, or reversed. Copying declares a target
language ("cp": tag <2cp>); reversing declares none, so its tag is its
name (<2plugin_reverse_digits>)."""
import random

from t2tlite.problem import Text2TextProblem, register_problem


class _DigitLines(Text2TextProblem):
  vocab_size = 40
  num_shards = {"train": 2, "dev": 1, "test": 1}
  sizes = {"train": 3000, "dev": 60, "test": 30}
  metric = "exact_match"

  def generate_samples(self, split, tmp_dir, raw_data_dir=None):
    # The registered name: NAME_rev generates the same lines (swapped).
    rng = random.Random(f"{split}-{self.data_name}")
    for _ in range(self.sizes[split]):
      digits = [str(rng.randrange(10)) for _ in range(rng.randint(1, 6))]
      yield {"inputs": " ".join(digits), "targets": " ".join(
          self.transform(digits))}


@register_problem("plugin_copy_digits")
class PluginCopyDigits(_DigitLines):
  target_lang = "cp"

  def transform(self, digits):
    return digits


@register_problem("plugin_reverse_digits")
class PluginReverseDigits(_DigitLines):
  def transform(self, digits):
    return digits[::-1]
