"""Attention heatmaps as in the paper's appendix (Figures 3-5): encoder
self-attention, decoder self-attention and encoder-decoder attention, one PNG
per layer and head, and one HTML page showing them all.

    all_maps = decoded_attention_maps(decoder, "Two dogs play in the snow.")
    index_html = write_plots(all_maps, "plots/")  # decoder: decoding.Decoder

Rows are queries, columns keys; each row sums to 1. Decoder rows are labelled
with the target piece each position predicts; decoder self-attention columns
with the decoder inputs (the start symbol <s>, then the target shifted right).
"""
import html
import io
import os

import matplotlib

matplotlib.use("Agg")  # files only; no display needed
from matplotlib.figure import Figure  # noqa: E402
import tensorflow as tf  # noqa: E402

from t2tlite import files  # noqa: E402
from t2tlite.decode import decoding  # noqa: E402

KINDS = (("encoder", "Encoder self-attention", "source", "source"),
         ("decoder_self", "Decoder self-attention", "target",
          "decoder_input"),
         ("encdec", "Encoder-decoder attention", "target", "source"))


def _pieces(vocab, ids):
  return [p.decode("utf-8") for p in vocab.id_to_piece(ids).numpy()]


def attention_maps(model, vocab, source, target_ids, target=None,
                   target_vocab=None):
  """Every attention map of one sentence pair, the decoder teacher-forced
  on `target_ids`.

  Args:
    model: a Transformer with `attention_weights`.
    vocab: its (input) Vocabulary.
    source: the input sentence.
    target_ids: the output's ids, EOS included (a decoded output's:
      `decoded_attention_maps`; a given text's: its encode_text).
    target: the output's text; None: target_ids decoded.
    target_vocab: its target Vocabulary (target pieces); None: vocab.
  Returns:
    dict: "source", "target" (text); "pieces": {"source", "target",
    "decoder_input": list of str}; "weights": {"encoder", "decoder_self",
    "encdec": list over layers of float32 numpy [heads, queries, keys]}.
  """
  target_vocab = target_vocab or vocab
  inputs = decoding.encode_inputs(vocab, tf.constant([source]))
  target_ids = [int(i) for i in target_ids]
  if target is None:
    target = target_vocab.decode_ids(target_ids)
  targets = tf.constant([target_ids], tf.int32)
  weights = model.attention_weights({"inputs": inputs, "targets": targets})
  source_ids = inputs[0].numpy().tolist()
  return {
      "source": source, "target": target,
      "pieces": {"source": _pieces(vocab, source_ids),
                 "target": _pieces(target_vocab, target_ids),
                 "decoder_input": ["<s>"] + _pieces(target_vocab,
                                                    target_ids[:-1])},
      "weights": {kind: [w[0].numpy() for w in weights[kind]]
                  for kind, *_ in KINDS},
  }


def decoded_attention_maps(decoder, source, target_prefix=None):
  """The attention of the output `decoder` gives `source`: decoded by the
  same search as its translations (any strategy), then each model
  teacher-forced on that output's ids.

  Args:
    decoder: a `decoding.Decoder` (its model a Transformer or an
      `ensemble.Ensemble`).
    source: the input sentence.
    target_prefix: None, or the output's target prefix (text).
  Returns:
    a list of `attention_maps` results: one per model of the ensemble (one
    for a single model), each with "target" the output's text (the first
    output when the decoder returns several).
  """
  prefixes = None if target_prefix is None else [target_prefix]
  outputs, _, ids = decoder.decode_batch([source], prefixes, with_ids=True)
  text = outputs[0][0] if decoder.hp.multiple_outputs else outputs[0]
  models = getattr(decoder.model, "models", [decoder.model])
  return [attention_maps(model, decoder.vocab, source, ids[0], text,
                         decoder.target_vocab) for model in models]


def plot_heatmap(weights, rows, columns, title, path):
  """One [queries, keys] heatmap to a PNG (temporary name, then renamed)."""
  size = max(3.0, 0.28 * max(len(rows), len(columns)) + 1.5)
  fig = Figure(figsize=(size, size))
  ax = fig.subplots()
  ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0)
  ax.set_xticks(range(len(columns)), labels=columns, rotation=90, fontsize=8)
  ax.set_yticks(range(len(rows)), labels=rows, fontsize=8)
  ax.set_xlabel("keys")
  ax.set_ylabel("queries")
  ax.set_title(title, fontsize=9)
  fig.tight_layout()
  png = io.BytesIO()
  fig.savefig(png, format="png", dpi=100)
  files.atomic_write_bytes(path, png.getvalue())


def write_plots(all_maps, plot_dir):
  """PNGs of every layer and head of each sentence, and plot_dir/index.html.

  Args:
    all_maps: list of `attention_maps` results (each may carry "member":
      which model of an ensemble its weights are, 1-based, shown).
    plot_dir: output folder (created).
  Returns:
    the path of index.html.
  """
  os.makedirs(plot_dir, exist_ok=True)
  page = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
          "<title>Attention</title><style>img{width:260px} td{vertical-align:"
          "top}</style></head><body><h1>Attention weights</h1>"]
  for n, maps in enumerate(all_maps):
    member = (f", ensemble member {maps['member']}" if maps.get("member")
              else "")
    page.append(f"<h2>Sentence {n + 1}{member}</h2><p>source: "
                f"{html.escape(maps['source'])}<br>target: "
                f"{html.escape(maps['target'])}</p>")
    for kind, title, row_name, column_name in KINDS:
      page.append(f"<h3>{title}</h3><table>")
      for layer, heads in enumerate(maps["weights"][kind]):
        cells = []
        for head, weights in enumerate(heads):
          name = f"s{n + 1}_{kind}_layer{layer + 1}_head{head + 1}.png"
          label = f"{title}, layer {layer + 1}, head {head + 1}"
          plot_heatmap(weights, maps["pieces"][row_name],
                       maps["pieces"][column_name], label,
                       os.path.join(plot_dir, name))
          cells.append(f"<td><a href='{name}'><img src='{name}' alt='{label}'"
                       f"></a><br>head {head + 1}</td>")
        page.append(f"<tr><th>layer {layer + 1}</th>{''.join(cells)}</tr>")
      page.append("</table>")
  page.append("</body></html>")
  index = os.path.join(plot_dir, "index.html")
  files.atomic_write_text(index, "\n".join(page))
  return index
