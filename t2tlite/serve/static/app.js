// The page of t2t-serve: translate lines, show the beam, and draw one
// sentence's attention (every kind, layer and head) as heatmaps.
"use strict";

const $ = id => document.getElementById(id);
let modelInfo = null;

async function api(path, body) {
  const response = await fetch(path, body === undefined ? {} : {
    method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify(body)});
  const data = await response.json().catch(() => ({error: response.statusText}));
  if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
  return data;
}

function showError(message) {
  $("error").textContent = message || "";
  $("error").hidden = !message;
}

async function loadInfo() {
  try {
    const data = await api("/api/info");
    modelInfo = data.model;
    const hp = modelInfo.decode_hparams;
    const shape = modelInfo.layers ? `, ${modelInfo.layers} layers x ${modelInfo.heads} heads` : "";
    const members = modelInfo.ensemble;
    const from = members ? `an ensemble of ${members.length}: ${members.join(", ")}`
                         : modelInfo.export || modelInfo.run_folder;
    $("model-info").textContent =
      `${modelInfo.problem}${shape}; beam_size=${hp.beam_size}, alpha=${hp.alpha}` +
      ` (from ${from})`;
    $("n-best").disabled = !modelInfo.n_best;
    const languages = modelInfo.target_languages || [];
    $("target-language").replaceChildren(...languages.map(language => {
      const option = document.createElement("option");
      option.value = option.textContent = language;
      return option;
    }));
    $("language-choice").hidden = !languages.length;
    $("decode-hparams").placeholder = `beam_size=${hp.beam_size},alpha=${hp.alpha}`;
  } catch (e) {
    $("model-info").textContent = "the model's information is unavailable: " + e.message;
  }
}

function isParsing() {
  return modelInfo && modelInfo.problem.startsWith("parsing");
}

function renderResults(lines, data) {
  const list = $("results");
  list.replaceChildren();
  lines.forEach((line, i) => {
    const item = document.createElement("li");
    item.className = "result";
    item.dataset.index = i;
    item.tabIndex = 0;
    const source = document.createElement("div");
    source.className = "source";
    source.textContent = line;
    const target = document.createElement("div");
    target.className = "translation";
    target.id = `translation-${i}`;
    target.textContent = data.translations[i];
    item.append(source, target);
    const tree = isParsing() ? parseTree(data.translations[i]) : null;
    if (tree) item.appendChild(treeSvg(tree));
    if (data.n_best) {
      const table = document.createElement("table");
      table.className = "beam";
      table.innerHTML = "<tr><th>#</th><th>hypothesis</th><th>score</th></tr>";
      data.n_best[i].forEach((hyp, k) => {
        const row = table.insertRow();
        row.insertCell().textContent = k + 1;
        row.insertCell().textContent = hyp.text;
        row.insertCell().textContent = hyp.score.toFixed(4);
      });
      item.appendChild(table);
    }
    if (line.trim()) {
      item.addEventListener("click", () => showAttention(line, item));
      item.addEventListener("keydown", e => { if (e.key === "Enter") showAttention(line, item); });
    }
    list.appendChild(item);
  });
  $("results-panel").hidden = false;
}

async function translate(event) {
  event.preventDefault();
  const lines = $("source").value.split("\n").filter(l => l.trim());
  if (!lines.length) { showError("Type a sentence first."); return; }
  showError("");
  $("translate").disabled = true;
  document.body.dataset.state = "translating";
  try {
    const request = {
      lines, decode_hparams: $("decode-hparams").value, n_best: $("n-best").checked};
    const prefix = $("target-prefix").value;
    if (prefix.trim()) request.target_prefixes = lines.map(() => prefix);
    if (!$("language-choice").hidden) request.target_language = $("target-language").value;
    const data = await api("/api/translate", request);
    renderResults(lines, data);
    document.body.dataset.state = "translated";
  } catch (e) {
    showError(e.message);
    document.body.dataset.state = "error";
  } finally {
    $("translate").disabled = false;
  }
}

const KINDS = [
  ["encoder", "Encoder self-attention", "source", "source"],
  ["decoder_self", "Decoder self-attention", "target", "decoder_input"],
  ["encdec", "Encoder-decoder attention", "target", "source"],
];

// One heatmap: weights [queries][keys] with the row and column tokens.
function heatmap(weights, rows, cols, label) {
  const cell = Math.max(6, Math.min(16, Math.floor(200 / Math.max(rows.length, cols.length))));
  const canvas = document.createElement("canvas");
  canvas.width = cols.length * cell;
  canvas.height = rows.length * cell;
  canvas.dataset.rows = rows.length;
  canvas.dataset.cols = cols.length;
  canvas.title = label;
  const ctx = canvas.getContext("2d");
  weights.forEach((row, q) => row.forEach((w, k) => {
    // White (0) to dark blue (1).
    const v = Math.round(255 * (1 - w));
    ctx.fillStyle = `rgb(${v},${Math.round(v * 0.9 + 20)},255)`;
    ctx.fillRect(k * cell, q * cell, cell, cell);
  }));
  canvas.addEventListener("click", () => showDetail(weights, rows, cols, label));
  canvas.addEventListener("mousemove", e => {
    const k = Math.floor(e.offsetX / cell), q = Math.floor(e.offsetY / cell);
    if (q < rows.length && k < cols.length)
      $("cell-readout").textContent =
        `${label}: ${rows[q]} -> ${cols[k]} = ${weights[q][k].toFixed(3)}`;
  });
  return canvas;
}

// One map drawn large, with its tokens along the axes (queries down the
// left, keys along the top).
function showDetail(weights, rows, cols, label) {
  const cell = 22, font = "12px ui-monospace, monospace";
  const canvas = document.createElement("canvas");
  const ctx = canvas.getContext("2d");
  ctx.font = font;
  const width = list => Math.max(...list.map(t => ctx.measureText(t).width)) + 8;
  const left = width(rows), top = width(cols);
  canvas.width = left + cols.length * cell;
  canvas.height = top + rows.length * cell;
  canvas.id = "detail-map";
  canvas.dataset.rows = rows.length;
  canvas.dataset.cols = cols.length;
  ctx.font = font;
  ctx.fillStyle = "#1d2330";
  ctx.textBaseline = "middle";
  ctx.textAlign = "right";
  rows.forEach((t, q) => ctx.fillText(t, left - 4, top + q * cell + cell / 2));
  cols.forEach((t, k) => {
    ctx.save();
    ctx.translate(left + k * cell + cell / 2, top - 4);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "left";
    ctx.fillText(t, 0, 0);
    ctx.restore();
  });
  weights.forEach((row, q) => row.forEach((w, k) => {
    const v = Math.round(255 * (1 - w));
    ctx.fillStyle = `rgb(${v},${Math.round(v * 0.9 + 20)},255)`;
    ctx.fillRect(left + k * cell, top + q * cell, cell - 1, cell - 1);
  }));
  const box = $("detail");
  box.replaceChildren();
  const h = document.createElement("h3");
  h.textContent = label;
  box.append(h, canvas);
  box.hidden = false;
  box.scrollIntoView({block: "nearest"});
}

function tokenList(tokens, className) {
  const div = document.createElement("div");
  div.className = className;
  for (const t of tokens) {
    const span = document.createElement("span");
    span.textContent = t;
    div.appendChild(span);
  }
  return div;
}

// An ensemble's answer has one set of maps per member: a selector picks
// the member shown (the first at first).
function renderMembers(data) {
  const select = $("attention-member");
  select.replaceChildren();
  select.hidden = !data.members;
  if (!data.members) return renderAttention(data);
  data.members.forEach((_, n) => select.add(new Option(`member ${n + 1}`, n)));
  select.onchange = () => renderAttention(
    {...data, attention: data.members[select.value].attention});
  renderAttention(data);
}

function renderAttention(data) {
  const root = $("attention-maps");
  root.replaceChildren();
  $("detail").hidden = true;
  for (const [kind, title, rowName, colName] of KINDS) {
    const rows = data.pieces[rowName], cols = data.pieces[colName];
    const section = document.createElement("section");
    section.className = "attention-kind";
    section.dataset.kind = kind;
    const h = document.createElement("h3");
    h.textContent = title;
    section.appendChild(h);
    const legend = document.createElement("p");
    legend.className = "axes";
    legend.append("queries: ", tokenList(rows, "tokens"), " keys: ", tokenList(cols, "tokens"));
    section.appendChild(legend);
    const table = document.createElement("table");
    table.className = "maps";
    const header = table.insertRow();
    header.appendChild(document.createElement("th"));
    data.attention[kind][0].forEach((_, head) => {
      const th = document.createElement("th");
      th.textContent = `head ${head + 1}`;
      header.appendChild(th);
    });
    data.attention[kind].forEach((heads, layer) => {
      const row = table.insertRow();
      const th = document.createElement("th");
      th.textContent = `layer ${layer + 1}`;
      row.appendChild(th);
      heads.forEach((weights, head) => {
        const canvas = heatmap(weights, rows, cols,
                               `${title}, layer ${layer + 1}, head ${head + 1}`);
        canvas.className = "heatmap";
        canvas.dataset.kind = kind;
        canvas.dataset.layer = layer;
        canvas.dataset.head = head;
        row.insertCell().appendChild(canvas);
      });
    });
    section.appendChild(table);
    root.appendChild(section);
  }
}

async function showAttention(line, item) {
  document.querySelectorAll(".result.selected").forEach(e => e.classList.remove("selected"));
  item.classList.add("selected");
  showError("");
  document.body.dataset.state = "attending";
  try {
    const request = {line, decode_hparams: $("decode-hparams").value};
    const prefix = $("target-prefix").value;
    if (prefix.trim()) request.target_prefix = prefix;
    if (!$("language-choice").hidden) request.target_language = $("target-language").value;
    const data = await api("/api/attention", request);
    $("attention-title").textContent = `${data.source} \u2192 ${data.target}`;
    renderMembers(data);
    $("attention-panel").hidden = false;
    document.body.dataset.state = "attention";
  } catch (e) {
    showError(e.message);
    document.body.dataset.state = "error";
  }
}

$("translate-form").addEventListener("submit", translate);
$("source").addEventListener("keydown", e => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) translate(e);
});
loadInfo();
