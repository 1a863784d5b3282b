// Parse trees: a bracketed tree "(S (NP (DT The) (NN dog)) (VP (VBZ runs)))"
// drawn as an SVG tree (parsing problems' outputs).
"use strict";

// "(S (NP ...))" -> {label, children: [node | word string]}, or null when the
// text is not one well-formed bracketed tree.
function parseTree(text) {
  const tokens = text.match(/\(|\)|[^\s()]+/g) || [];
  let pos = 0;
  function node() {
    if (tokens[pos] !== "(") return null;
    pos++;
    const label = tokens[pos] !== "(" && tokens[pos] !== ")" ? tokens[pos++] : "";
    const children = [];
    while (pos < tokens.length && tokens[pos] !== ")") {
      if (tokens[pos] === "(") {
        const child = node();
        if (!child) return null;
        children.push(child);
      } else {
        children.push(tokens[pos++]);
      }
    }
    if (tokens[pos] !== ")") return null;
    pos++;
    return {label, children};
  }
  const tree = node();
  return tree && pos === tokens.length ? tree : null;
}

// An <svg> element drawing `tree`: leaves (words) spread along the bottom,
// each constituent centred over its children.
function treeSvg(tree) {
  const NS = "http://www.w3.org/2000/svg";
  const dx = 64, dy = 34, pad = 16;
  let leaves = 0, depth = 0;
  function layout(n, level) {
    depth = Math.max(depth, level);
    if (typeof n === "string") {
      const x = leaves++ * dx;
      return {text: n, x, level, leaf: true, kids: []};
    }
    const kids = n.children.map(c => layout(c, level + 1));
    const x = kids.length ? (kids[0].x + kids[kids.length - 1].x) / 2 : leaves++ * dx;
    return {text: n.label, x, level, leaf: false, kids};
  }
  const root = layout(tree, 0);
  const svg = document.createElementNS(NS, "svg");
  const width = Math.max(1, leaves) * dx + 2 * pad, height = (depth + 1) * dy + 2 * pad;
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("class", "parse-tree");
  function y(n) { return pad + (n.leaf ? depth : n.level) * dy + 10; }
  function draw(n) {
    for (const k of n.kids) {
      const line = document.createElementNS(NS, "line");
      line.setAttribute("x1", pad + n.x + dx / 2); line.setAttribute("y1", y(n) + 4);
      line.setAttribute("x2", pad + k.x + dx / 2); line.setAttribute("y2", y(k) - 12);
      svg.appendChild(line);
      draw(k);
    }
    const t = document.createElementNS(NS, "text");
    t.setAttribute("x", pad + n.x + dx / 2);
    t.setAttribute("y", y(n));
    t.setAttribute("class", n.leaf ? "word" : "label");
    t.textContent = n.text;
    svg.appendChild(t);
  }
  draw(root);
  return svg;
}
