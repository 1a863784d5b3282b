"""Attention heatmaps written from given maps: one PNG per kind, layer and
head, each labelled with the pieces of its queries and keys, and a page
linking them all."""
import numpy as np

from t2tlite.decode import attention_plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _maps(source, heads=2):
  """One layer of uniform attention: 3 source pieces, 2 target pieces."""
  pieces = {"source": ["\u2581A", "<b>", "</s>"],
            "target": ["\u2581Ein", "</s>"],
            "decoder_input": ["<s>", "\u2581Ein"]}
  sizes = {"encoder": (3, 3), "decoder_self": (2, 2), "encdec": (2, 3)}
  weights = {kind: [np.full((heads,) + shape, 1 / shape[1], np.float32)]
             for kind, shape in sizes.items()}
  return {"source": source, "target": "Ein", "pieces": pieces,
          "weights": weights}


def test_write_plots_names_a_png_per_kind_layer_and_head(tmp_path):
  index = attention_plots.write_plots([_maps("A <b>dog</b> & cat")],
                                      str(tmp_path))
  names = sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".png")
  assert names == sorted(
      f"s1_{kind}_layer1_head{head}.png"
      for kind in ("encoder", "decoder_self", "encdec") for head in (1, 2))
  for name in names:
    assert (tmp_path / name).read_bytes()[:8] == PNG_MAGIC
  page = (tmp_path / "index.html").read_text(encoding="utf-8")
  assert index == str(tmp_path / "index.html")
  assert all(f"<a href='{name}'><img src='{name}'" in page for name in names)
  assert "source: A &lt;b&gt;dog&lt;/b&gt; &amp; cat<br>" in page
  assert "<b>dog" not in page


def test_encoder_decoder_rows_are_target_pieces_and_columns_source(
    tmp_path):
  maps = _maps("A dog", heads=1)
  attention_plots.write_plots([maps], str(tmp_path / "plots"))
  # The same heatmap drawn with targets as queries and sources as keys.
  attention_plots.plot_heatmap(
      maps["weights"]["encdec"][0][0], maps["pieces"]["target"],
      maps["pieces"]["source"], "Encoder-decoder attention, layer 1, head 1",
      str(tmp_path / "expected.png"))
  written = tmp_path / "plots" / "s1_encdec_layer1_head1.png"
  assert written.read_bytes() == (tmp_path / "expected.png").read_bytes()
