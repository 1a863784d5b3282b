"""Target-language tags of a model trained on a mixture of problems
(`t2tlite.mixture`): each member's source lines start with its tag, `<2de>`
for a member translating into German (Johnson et al., 2017), one reserved
piece of the shared vocabulary (a sentencepiece user-defined symbol, never
split or merged with text).

A member's language is its problem's `target_lang` (the source_lang of a
`_rev` problem), or, for a problem without one, its name: `<2my_problem>`.

    tag_of("de")                                   # "<2de>"
    tag_lines(["A dog."], {"de": "<2de>"}, "de")   # ["<2de> A dog."]

A line that already starts with a known tag keeps it (a per-line choice in
an input file); a model that knows no languages takes lines as they are.
Text never makes a tag: a known tag's characters anywhere else in a line
(or in a sample's text) are written `< 2de>` (`escape_tags`), plain text
pieces, so that only the tag put first means a language.
"""
import re

_TAG = re.compile(r"^<2([^<>\s]+)>(?=\s|$)")


class LanguageError(ValueError):
  """An unknown or missing target language; str() is one line naming the
  languages the model knows."""


def tag_of(language):
  """The tag of a language name: "<2" + language + ">"."""
  return f"<2{language}>"


def language_of(problem):
  """The target language a mixture member is tagged with: its target_lang
  (source_lang when reversed), else its name."""
  side = "source_lang" if getattr(problem, "reverse", False) else (
      "target_lang")
  return getattr(problem, side, None) or problem.name


def line_language(line, languages):
  """The language whose tag starts `line`, or None."""
  match = _TAG.match(line)
  if match and match.group(1) in languages:
    return match.group(1)
  return None


def check_language(language, languages):
  """Raises LanguageError unless `language` is one of `languages` (a
  {language: tag} dict); None passes when the model knows no languages."""
  if language is None and not languages:
    return
  if not languages:
    raise LanguageError(
        f"target_language={language}: this model was trained on one "
        "problem and knows no target languages; leave it out")
  if language not in languages:
    what = (f"a target language is needed (target_language, or a tag "
            f"such as {next(iter(languages.values()))} starting the line)"
            if language is None else f"unknown target_language {language!r}")
    raise LanguageError(f"{what}: this model knows "
                        f"{', '.join(sorted(languages))}")


def tag_pattern(languages):
  """The regular expression (Python's and RE2's) of the known tags in text,
  the language as group 1; None when there are none."""
  if not languages:
    return None
  names = "|".join(re.escape(n) for n in sorted(languages, key=len,
                                                    reverse=True))
  return f"<2({names})>"


def escape_tags(text, languages):
  """`text` with every known tag written `< 2LANG>`: text, never a tag
  piece (the model's tags are user-defined pieces that sentencepiece would
  otherwise find anywhere in a line)."""
  pattern = tag_pattern(languages)
  return re.sub(pattern, r"< 2\1>", text) if pattern else text


def tag_line(line, languages, language=None):
  """`line` as the model reads it: prefixed with `language`'s tag, unless
  the model knows no languages, the line is empty or already starts with a
  known tag (which then wins over `language`); known tags elsewhere in it
  are escaped (`escape_tags`).

  Raises:
    LanguageError: `language` unknown, or needed (a multilingual model, a
      non-empty line without a tag) and None.
  """
  if not languages or not line.strip():
    if language is not None:
      check_language(language, languages)
    return line
  own = line_language(line, languages)
  if own is not None:
    if language is not None:
      check_language(language, languages)
    tag = languages[own]
    return tag + escape_tags(line[len(tag):], languages)
  check_language(language, languages)
  return f"{languages[language]} {escape_tags(line, languages)}"


def tag_lines(lines, languages, language=None, where=None):
  """`tag_line` of each line, with one language for all (or a list of one
  per line). `where` names the lines' source in an error ("--source_file=
  corpus.en"), which then starts with it and the line's number; an
  unknown language for all is checked first, an error of no line."""
  if isinstance(language, (list, tuple)):
    per_line = language
  else:
    if language is not None:
      check_language(language, languages)
    per_line = [language] * len(lines)
  tagged = []
  for number, (line, lang) in enumerate(zip(lines, per_line), 1):
    try:
      tagged.append(tag_line(line, languages, lang))
    except LanguageError as error:
      if where is None:
        raise
      raise LanguageError(f"{where} line {number}: {error}") from None
  return tagged


def strip_tag(line, languages):
  """`line` without a leading known tag (and the space after it)."""
  match = _TAG.match(line)
  if match and match.group(1) in languages:
    return line[match.end():].lstrip(" ")
  return line
