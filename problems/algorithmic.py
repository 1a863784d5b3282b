"""Generated problems (no files needed), for the quick start and tests.

`algorithmic_reverse`, in the spirit of tensor2tensor's algorithmic problems:
the input is a line of space-separated digits 0-9, 1 to 20 of them, the target
the same digits in reverse order ("3 1 4" -> "4 1 3"). It goes through the same
sentencepiece machinery as text: a BPE model of 24 pieces (the most this
alphabet allows: 3 special ids, "▁", ten digits and ten "▁d" pieces), so each
digit is one token. Fixed seeds and sizes: 20,000 train, 1,000 dev and 1,000
test samples; datagen takes a few seconds.
"""
import random

from t2tlite.problem import Text2TextProblem, register_problem


@register_problem("algorithmic_reverse")
class AlgorithmicReverse(Text2TextProblem):
  """Reverse a sequence of 1-20 digits."""
  vocab_type = "bpe"
  vocab_size = 24
  num_shards = {"train": 4, "dev": 1, "test": 1}
  num_samples = {"train": 20_000, "dev": 1_000, "test": 1_000}
  min_digits, max_digits = 1, 20
  seeds = {"train": 1, "dev": 2, "test": 3}
  metric = "exact_match"

  def generate_samples(self, split, tmp_dir, raw_data_dir=None):
    del tmp_dir, raw_data_dir  # generated
    rng = random.Random(self.seeds[split])
    for _ in range(self.num_samples[split]):
      digits = [str(rng.randrange(10))
                for _ in range(rng.randint(self.min_digits, self.max_digits))]
      yield {"inputs": " ".join(digits), "targets": " ".join(digits[::-1])}
