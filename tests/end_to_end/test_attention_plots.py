"""Attention heatmaps: PNGs for every kind, layer and head, and an HTML page."""
import os
import subprocess
import sys

import numpy as np
import pytest

from t2tlite.decode import attention_plots, decoding, machine
from t2tlite.decode.settings import DecodeHParams

from run_folder import TINY, needs_multi30k
from shared_run import shared_trained_run

pytestmark = needs_multi30k
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """(run folder, model, Vocabulary) of the session's shared run (read
  only: the plots go elsewhere)."""
  return shared_trained_run(tmp_path_factory)


def test_maps_have_the_shapes_of_the_sentences(trained):
  _, model, vocab = trained
  maps = attention_plots.attention_maps(
      model, vocab, "A dog runs.", vocab.encode_text("Ein Hund rennt."),
      "Ein Hund rennt.")
  pieces, weights = maps["pieces"], maps["weights"]
  src, tgt = len(pieces["source"]), len(pieces["target"])
  assert pieces["source"][-1] == pieces["target"][-1] == "</s>"
  assert pieces["decoder_input"][0] == "<s>"
  heads = TINY.num_heads
  assert [w.shape for w in weights["encoder"]] == [(heads, src, src)] * 2
  assert [w.shape for w in weights["decoder_self"]] == [(heads, tgt, tgt)] * 2
  assert [w.shape for w in weights["encdec"]] == [(heads, tgt, src)] * 2
  np.testing.assert_allclose(weights["encdec"][0].sum(-1), 1.0, atol=1e-5)
  # Decoder self-attention never looks ahead.
  assert np.allclose(np.triu(weights["decoder_self"][1][0], k=1), 0.0)


def test_decoded_target_when_none_is_given(trained):
  _, model, vocab = trained
  decoder = decoding.Decoder(model, vocab, machine.settle(DecodeHParams(
      beam_size=2, extra_length=4)))
  source = "A dog runs."
  [maps] = attention_plots.decoded_attention_maps(decoder, source)
  # The decoder's own output for the sentence, and the pieces the maps
  # label its rows with spell it (sentencepiece: "\u2581" starts a word).
  [translation], _ = decoder.decode_lines([source], progress=False)
  assert maps["source"] == source and maps["target"] == translation
  target = maps["pieces"]["target"]
  words = target[:-1] if target[-1] == "</s>" else target
  assert "".join(words).replace("\u2581", " ").strip() == translation
  # At most input length + extra_length pieces, ending with EOS unless cut
  # at that limit; the decoder's inputs are the same pieces shifted right.
  limit = len(maps["pieces"]["source"]) + 4
  assert target[-1] == "</s>" or len(target) == limit
  assert len(target) <= limit
  assert maps["pieces"]["decoder_input"] == ["<s>"] + target[:-1]
  assert [w.shape[1] for w in maps["weights"]["decoder_self"]] == [
      len(target)] * TINY.num_layers


@pytest.mark.timeout(180)
def test_t2t_attention_writes_pngs_and_html(trained, tmp_path):
  folder, _, _ = trained
  plot_dir = tmp_path / "plots"
  run = subprocess.run(
      [sys.executable, "-m", "t2tlite.bin.t2t_attention",
       f"--output_dir={folder}", f"--plot_dir={plot_dir}",
       "--input=Two dogs play.", "--target=Zwei Hunde spielen.",
       "--decode_hparams=beam_size=2"],
      capture_output=True, text=True)
  assert run.returncode == 0, run.stderr
  pngs = sorted(p for p in os.listdir(plot_dir) if p.endswith(".png"))
  # 3 kinds x 2 layers x 4 heads.
  assert len(pngs) == 3 * TINY.num_layers * TINY.num_heads
  for name in pngs:
    with open(plot_dir / name, "rb") as f:
      assert f.read(8) == PNG_MAGIC
  page = (plot_dir / "index.html").read_text(encoding="utf-8")
  assert all(f"src='{name}'" in page for name in pngs)
  assert "Encoder-decoder attention" in page and "Zwei Hunde" in page
  assert run.stdout.strip() == str(plot_dir / "index.html")
  assert not [p for p in os.listdir(plot_dir) if ".tmp-" in p]
