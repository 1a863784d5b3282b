"""A tiny generated EN->DE "translation" corpus (word-by-word, with cased
first words and a full stop) laid out for --raw_data_dir, so that BLEU
tests train and decode in seconds without the shared corpora."""
import random

WORDS = {"the": "die", "a": "eine", "cat": "katze", "dog": "hund",
         "sees": "sieht", "eats": "isst", "big": "große", "small": "kleine",
         "red": "rote", "house": "haus", "and": "und", "runs": "läuft"}
SIZES = {"train": 3000, "dev": 200, "test": 50}


def sentence_pair(rng):
  words = [rng.choice(sorted(WORDS)) for _ in range(rng.randint(3, 9))]
  source = " ".join(words)
  target = " ".join(WORDS[w] for w in words)
  return source.capitalize() + " .", target.capitalize() + " ."


def write_corpus(folder):
  """Writes train/dev/test .en and .de files into `folder`; returns it."""
  folder.mkdir(parents=True, exist_ok=True)
  for split, size in SIZES.items():
    rng = random.Random(split)
    pairs = [sentence_pair(rng) for _ in range(size)]
    for index, lang in enumerate(("en", "de")):
      (folder / f"{split}.{lang}").write_text(
          "".join(pair[index] + "\n" for pair in pairs), encoding="utf-8")
  return folder
