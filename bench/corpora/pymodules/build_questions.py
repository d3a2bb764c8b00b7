"""Build the `pymodules` development corpus's questions from the Python 3.11 library reference.

The shape it measures (issue #28): the question names the module the way a user would, while the
passage that answers it does not — inside a `.. module::` page a function's description never
repeats the module's name, which lives in the page's title and file name — and the question's other
words are ones many modules' pages use.

The rule, fixed and deterministic (no model, no hand edits):

1. pages: every `library/*.rst.txt` that declares one `.. module::` and documents at least
   MIN_ENTRIES functions, methods or classes; a seeded sample of PAGES of them is the corpus;
2. entries: each `.. function::` / `.. method::` / `.. class::` directive's first description
   sentence, with markup reduced to words (`:func:`x`` -> x, *arg* -> arg, ``code`` -> code);
   entries whose sentence names the module are dropped (the shape requires the passage to lack it);
3. words: that sentence's content words (function words, the entry's own name, the module name and
   argument names in *emphasis* removed), in order, at most MAX_WORDS, at least MIN_WORDS — what a
   person types, never the sentence itself;
4. choice: per page, the QUESTIONS_PER_PAGE entries whose words are most common across the sampled
   pages (the highest mean document frequency): the questions a keyword alone cannot place;
5. question: "<words> in <module>"; relevant: the page.

    python bench/corpora/pymodules/build_questions.py   # writes questions.jsonl beside this file
"""

from __future__ import annotations

import json
import random
import re
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCS = HERE.parents[2].parent / "shared" / "corpora" / "python-3.11-docs-rst" / "docs"
PAGES = 50
MIN_ENTRIES = 6
QUESTIONS_PER_PAGE = 4
MIN_WORDS, MAX_WORDS = 3, 4
SEED = 20261202

MODULE = re.compile(r"^\.\.\s+(?:py:)?module::\s*([\w.]+)\s*$", re.MULTILINE)
ENTRY = re.compile(r"^\.\.\s+(?:py:)?(function|method|class)::\s*([\w.]+)[^\n]*\n((?:[ \t]+:[^\n]*\n)*)"
                   r"((?:[ \t]*\n)*(?:[ \t]+[^\n]*\n(?:[ \t]*\n)*)+)", re.MULTILINE)
ROLE = re.compile(r":\w+(?::\w+)?:`~?!?([^`<]*?)(?:\s*<[^>]*>)?`")
EMPHASIS = re.compile(r"(?<![\w*])\*([^*\s][^*]*?)\*(?!\w)")
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
FUNCTION_WORDS = frozenset("""
a an the and or but if then else of to in on at by for with from as into onto is are was were be been
being this that these those it its it's which who whom whose what when where how why not no nor so
than too very can could may might must shall should will would do does did done has have had having
any all each every some such only own same other another more most less least also just both either
neither one two used use using given returns return e.g i.e etc via per new default if""".split())  # noqa: SIM905


def plain(text: str) -> str:
    text = ROLE.sub(r"\1", text)
    return re.sub(r"``|`|\*\*", "", text)


def first_sentence(body: str) -> str:
    paragraph = re.split(r"\n[ \t]*\n", body.strip(), maxsplit=1)[0]
    paragraph = " ".join(line.strip() for line in paragraph.splitlines())
    if paragraph.startswith(".."):
        return ""
    return re.split(r"(?<=[.!?])\s", paragraph, maxsplit=1)[0]


def words_of(sentence: str, entry: str, module: str) -> list[str]:
    arguments = {match.lower() for match in EMPHASIS.findall(ROLE.sub(r"\1", sentence))}
    drop = FUNCTION_WORDS | {entry.lower(), entry.split(".")[-1].lower(), *module.lower().split(".")} | arguments
    out: list[str] = []
    for word in WORD.findall(plain(EMPHASIS.sub(r"\1", sentence))):
        lowered = word.lower()
        if lowered not in drop and lowered not in out and len(lowered) > 1:
            out.append(lowered)
    return out[:MAX_WORDS]


def pages() -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """page -> (module, [(entry name, first sentence)]) for every eligible page."""
    found: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    for path in sorted((DOCS / "library").glob("*.rst.txt")):
        text = path.read_text(encoding="utf-8")
        modules = MODULE.findall(text)
        if len(modules) != 1:
            continue
        entries = [(match.group(2), first_sentence(match.group(4))) for match in ENTRY.finditer(text)]
        entries = [(name, sentence) for name, sentence in entries if sentence]
        if len(entries) >= MIN_ENTRIES:
            found[path.relative_to(DOCS).as_posix()] = (modules[0], entries)
    return found


def main() -> None:
    eligible = pages()
    chosen = sorted(eligible)
    random.Random(SEED).shuffle(chosen)
    chosen = sorted(chosen[:PAGES])
    page_words = {page: {w for name, s in eligible[page][1] for w in words_of(s, name, eligible[page][0])}
                  for page in chosen}
    document_frequency: dict[str, int] = {}
    for words in page_words.values():
        for word in words:
            document_frequency[word] = document_frequency.get(word, 0) + 1
    rows: list[dict[str, object]] = []
    for page in chosen:
        module, entries = eligible[page]
        candidates: list[tuple[float, str, list[str]]] = []
        for name, sentence in entries:
            if module.lower() in plain(sentence).lower():
                continue
            words = words_of(sentence, name, module)
            if len(words) >= MIN_WORDS:
                candidates.append((-statistics.mean(document_frequency[w] for w in words), name, words))
        seen: set[tuple[str, ...]] = set()
        kept = 0
        for _, name, words in sorted(candidates):
            if tuple(words) in seen or kept == QUESTIONS_PER_PAGE:
                continue
            seen.add(tuple(words))
            kept += 1
            rows.append({"id": f"{module}:{name}", "query": f"{' '.join(words)} in {module}",
                         "relevant": [page], "module": module, "entry": name})
    with open(HERE / "questions.jsonl", "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    with open(HERE / "pages.txt", "w", encoding="utf-8") as handle:
        handle.write("".join(page + "\n" for page in chosen))
    print(f"{len(chosen)} pages, {len(rows)} questions")


if __name__ == "__main__":
    main()
