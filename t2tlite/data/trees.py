"""Penn Treebank trees: reading .mrg files, normalising, and the sequence form
of Vinyals et al. 2015 ("Grammar as a foreign language") and its inverse.

Normalisation (what a round trip gives back): the unlabelled outer bracket of
PTB files is removed when it has a single child (with several it is labelled
TOP, as `delinearize` joins several roots); `-NONE-` empty elements are
removed, then every constituent left without children; function tags and
indices are stripped from phrase labels (`NP-SBJ-1` -> `NP`, `NP=2` -> `NP`;
labels starting with "-" such as `-LRB-` are kept).

Linearization, depth first (Vinyals et al., Figure 2): the source is the words,
the target the tree with words replaced by their POS tags (or by `XX`) and
labelled closing brackets:

    (S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))
    words:  John has a dog .
    target: (S (NP NNP )NP (VP VBZ (NP DT NN )NP )VP . )S
"""
import dataclasses
import re

from t2tlite.data.samples import DataError

_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_ROOT_LABELS = ("", "ROOT", "TOP")
EMPTY_TAG = "-NONE-"
PLACEHOLDER_TAG = "XX"
# Brackets inside a word would end the tree early: the Penn Treebank spells
# them so (its -LCB-/-RCB- for braces need no escaping here).
ESCAPES = {"(": "-LRB-", ")": "-RRB-"}


class TreeError(DataError):
  """A malformed tree (the message names file, tree number and line)."""


@dataclasses.dataclass
class Tree:
  """A constituent: `label` and `children` (sub-Trees, or one word str for a
  preterminal)."""
  label: str
  children: list

  @property
  def is_preterminal(self):
    return len(self.children) == 1 and isinstance(self.children[0], str)

  def words(self):
    if self.is_preterminal:
      return [self.children[0]]
    return [w for child in self.children for w in child.words()]

  def __str__(self):
    if self.is_preterminal:
      return f"({self.label} {self.children[0]})"
    return f"({self.label} {' '.join(str(c) for c in self.children)})"


def parse_trees(text, source="<string>"):
  """Yields the trees of bracketed text (the .mrg format), in order.

  Raises:
    TreeError: unbalanced brackets, text outside brackets, a bracket without
      children, a constituent mixing words and constituents, or an unlabelled
      inner constituent; the message names `source`, the tree number (from 1)
      and the line.
  """
  stack, tree_no, tree_start = [], 0, 0

  def fail(position, what, between_trees=False):
    line = text.count("\n", 0, position) + 1
    where = f"after tree {tree_no}" if between_trees else f"tree {tree_no}"
    raise TreeError(f"{source}: {where} (line {line}): {what}")

  for match in _TOKEN.finditer(text):
    token, position = match.group(), match.start()
    if token == "(":
      if not stack:
        tree_no, tree_start = tree_no + 1, position
      stack.append(Tree(None, []))
    elif token == ")":
      if not stack:
        fail(position, "')' without a matching '('", between_trees=True)
      node = stack.pop()
      node.label = node.label or ""
      _check(node, is_root=not stack, fail=lambda what: fail(position, what))
      if stack:
        stack[-1].children.append(node)
      else:
        yield node
    elif not stack:
      fail(position, f"{token!r} outside any bracket", between_trees=True)
    elif stack[-1].label is None and not stack[-1].children:
      stack[-1].label = token
    else:
      stack[-1].children.append(token)
  if stack:
    fail(tree_start, f"{len(stack)} bracket(s) of this tree are never closed")


def _check(node, is_root, fail):
  words = [c for c in node.children if isinstance(c, str)]
  if not node.children:
    fail(f"empty constituent ({node.label})")
  if len(words) > 1:
    fail(f"constituent ({node.label} ...) holds several words")
  if words and len(node.children) > 1:
    fail(f"constituent ({node.label} ...) mixes words and constituents")
  if not node.label and not is_root:
    fail("constituent without a label")


def read_trees(path):
  """Yields the trees of one .mrg file (TreeError names the file)."""
  with open(path, encoding="utf-8") as f:
    yield from parse_trees(f.read(), source=path)


def escape_word(word):
  """`word` with ( and ) spelled -LRB- and -RRB-, so that it fits a tree."""
  for bracket, escaped in ESCAPES.items():
    word = word.replace(bracket, escaped)
  return word


def strip_function_tags(label):
  if label.startswith("-"):
    return label
  return re.split(r"[-=]", label, maxsplit=1)[0]


def normalize(tree):
  """The tree a round trip gives back (see the module doc), or None if
  nothing but empty elements is left."""
  if tree.label in _ROOT_LABELS and len(tree.children) == 1 and isinstance(
      tree.children[0], Tree):
    tree = tree.children[0]
  elif not tree.label:
    tree = Tree("TOP", tree.children)
  return _without_empties(tree)


def _without_empties(node):
  if node.is_preterminal:
    return None if node.label == EMPTY_TAG else Tree(node.label,
                                                     list(node.children))
  children = [c for c in map(_without_empties, node.children) if c]
  return Tree(strip_function_tags(node.label), children) if children else None


def replace_tags(tree, tag=PLACEHOLDER_TAG):
  """A copy with every POS tag replaced by `tag`."""
  if tree.is_preterminal:
    return Tree(tag, list(tree.children))
  return Tree(tree.label, [replace_tags(c, tag) for c in tree.children])


def linearize(tree, pos_tags=True):
  """A normalized tree -> (words, target string).

  Args:
    tree: a `Tree` (normalize it first).
    pos_tags: keep POS tags in the target; False writes `XX` for each.
  """
  words, out = [], []

  def visit(node):
    if node.is_preterminal:
      words.append(node.children[0])
      out.append(node.label if pos_tags else PLACEHOLDER_TAG)
      return
    out.append("(" + node.label)
    for child in node.children:
      visit(child)
    out.append(")" + node.label)

  visit(tree)
  return words, " ".join(out)


def delinearize(target, words=None, strict=True):
  """A target sequence (and its words) back to a Tree.

  Args:
    target: e.g. "(S (NP NNP )NP (VP VBZ )VP )S".
    words: the source words, one per tag; None puts each tag as its word.
    strict: raise ValueError on any inconsistency (for gold data). Otherwise
      repair model output: unmatched closings are ignored, a closing with
      another label closes the innermost bracket, open brackets are closed at
      the end, tags beyond the words are dropped, words beyond the tags are
      attached as (XX word) to the root, and several roots get a TOP parent.
  """
  roots, stack, used = [], [], 0

  def attach(node):
    (stack[-1].children if stack else roots).append(node)

  def problem(what):
    if strict:
      raise ValueError(f"cannot delinearize {target!r}: {what}")

  for token in target.split():
    if token[0] == "(" and len(token) > 1:
      node = Tree(token[1:], [])
      attach(node)
      stack.append(node)
    elif token[0] == ")" and len(token) > 1:
      if not stack:
        problem(f"{token} closes nothing")
        continue
      if stack[-1].label != token[1:]:
        problem(f"{token} closes ({stack[-1].label}")
      if not stack[-1].children:
        problem(f"({stack[-1].label} is empty")
      stack.pop()
    elif words is not None and used >= len(words):
      problem(f"more tags than the {len(words)} words")
    else:
      attach(Tree(token, [words[used] if words is not None else token]))
      used += 1
  if stack:
    problem(f"({stack[-1].label} is never closed")
  if words is not None and used < len(words):
    problem(f"{len(words) - used} words have no tag")
    target_node = roots[-1] if roots and not roots[-1].is_preterminal else None
    extra = [Tree(PLACEHOLDER_TAG, [w]) for w in words[used:]]
    if target_node:
      target_node.children.extend(extra)
    else:
      roots.extend(extra)
  roots = [r for r in roots if _prune(r)]
  if len(roots) != 1:
    problem(f"{len(roots)} root constituents")
    return Tree("TOP", roots)
  return roots[0]


def _prune(node):
  """Drops childless constituents (repaired output); True if node is kept."""
  if node.is_preterminal:
    return True
  node.children = [c for c in node.children if _prune(c)]
  return bool(node.children)
