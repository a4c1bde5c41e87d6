"""A silver NER task from Wikipedia text: mentions of each article's title in its body.

    python -m electra_tf.commands.title_mentions --corpus kowiki_sample.txt \\
        --output_dir silver/ [--baselines]

The corpus is in the pre-training layout (an article's title on its first
line, then its paragraphs, a blank line between articles). Every sentence of
an article's first paragraphs becomes a tagged sentence: the words (split as
`tagging_data.split_words` splits raw text) that spell the article's title
are an entity, the rest `O`; the task is to find where a text mentions the
entity it is about, which the sentence alone has to reveal. A mention is the
title's words in order, a disambiguation in parentheses dropped (`동구
(울산광역시)` -> `동구`); the last word may carry a Korean particle or
copula from a fixed list (`카터는`, `1990년에`, `서울역이다`) and closing
punctuation around it (`카터"라는`), the first opening punctuation; tags
cover whole words, as Naver NER tags eojeol.

The entity type comes from the title's form (no outside knowledge):
`DATE` (`1990년`, `1990년대`, `3월 1일`, `19세기`), `LOC` (stations, districts,
cities, mountains, rivers, islands: `...역`, `...시`, `...군`, `...산`, ...),
`ORG` (`...대학교`, `...학교`, `...협회`, `...위원회`, ...), `PER` (`교황 ...`),
else `MISC`.

Articles are split by position: every `--dev_every`-th article goes to dev,
the others to train, so no title is in both. Written: `train.txt` and
`dev.txt` (CoNLL, `word tag`, BIO with prefixes) and `stats.json`.
`--baselines` also scores, on dev, tagging nothing (all `O`: F1 0) and a
dictionary of every entity string of the training file (each dev word
sequence equal to one, longest first, gets its most frequent type).
"""

from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from typing import Iterator, Optional

from electra_tf.finetuning.tagging.data import OUTSIDE, PREFIX, split_words

# Particles and copula endings a mention's last word may carry.
PARTICLES = (
    "은",
    "는",
    "이",
    "가",
    "을",
    "를",
    "의",
    "에",
    "에서",
    "에게",
    "와",
    "과",
    "도",
    "로",
    "으로",
    "로서",
    "으로서",
    "만",
    "까지",
    "부터",
    "보다",
    "처럼",
    "께서",
    "에는",
    "에서는",
    "와의",
    "과의",
    "로의",
    "으로의",
    "이다",
    "이며",
    "이고",
    "이자",
    "이나",
    "나",
    "인",
    "이라는",
    "라는",
    "란",
    "이란",
    "이었다",
    "였다",
    "이라고",
    "라고",
)
_OPENING = "\"'“‘(「『《〈[<"
_CLOSING = "\"'”’)」』》〉]>.,;:!?"
_CLOSE = "[" + re.escape(_CLOSING) + "]*"
# After the title: closing punctuation, a particle, closing punctuation (`카터"라는`, `카터는,`).
_LAST_WORD = re.compile(
    _CLOSE
    + "(?:"
    + "|".join(sorted(map(re.escape, PARTICLES), key=len, reverse=True))
    + ")?"
    + _CLOSE
)
_DISAMBIGUATION = re.compile(r"\s*\([^)]*\)\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_TYPE_RULES = (
    ("DATE", re.compile(r"^(기원전 )?\d+(년|년대|세기)$|^(음력 )?\d+월( \d+일)?$")),
    ("PER", re.compile(r"^교황 \S+")),
    (
        "ORG",
        re.compile(
            r"(대학교|학교|대학|협회|위원회|연맹|재단|연구소|박물관|은행|방송|공사|"
            r"회사|그룹|기구|정당|당)$"
        ),
    ),
    ("LOC", re.compile(r"[가-힣](역|특별시|광역시|시|군|구|현|읍|면|산|강|섬|반도|해협|만)$")),
)


def entity_type(name: str) -> str:
    """The type of a title (its disambiguation dropped), from its form alone."""
    for type_, pattern in _TYPE_RULES:
        if pattern.search(name):
            return type_
    return "MISC"


def read_articles(path: str) -> Iterator[tuple[str, list[str]]]:
    """(title, paragraphs) of each article of a pre-training corpus file."""
    title, paragraphs = None, []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                if title is not None:
                    yield title, paragraphs
                title, paragraphs = None, []
            elif title is None:
                title = line
            else:
                paragraphs.append(line)
    if title is not None:
        yield title, paragraphs


def mention_name(title: str) -> Optional[str]:
    """What a body calls the article: the title without its disambiguation (None: unusable)."""
    name = _DISAMBIGUATION.sub("", title).strip()
    if len(name) < 2 or name.isdigit():
        return None
    return name


def tag_mentions(words: list[str], name: str, type_: str) -> list[str]:
    """BIO tags (prefix form) marking every mention of `name` among `words`."""
    title_words = name.split()
    k = len(title_words)
    tags = [OUTSIDE] * len(words)
    i = 0
    while i + k <= len(words):
        candidate = words[i : i + k]
        first = candidate[0].lstrip(_OPENING)
        parts = [first] + candidate[1:]
        last = parts[-1]
        if (
            parts[:-1] == title_words[:-1]
            and last.startswith(title_words[-1])
            and _LAST_WORD.fullmatch(last[len(title_words[-1]) :])
        ):
            tags[i : i + k] = [f"B-{type_}"] + [f"I-{type_}"] * (k - 1)
            i += k
        else:
            i += 1
    return tags


def article_sentences(paragraphs: list[str], max_sentences: int, max_words: int) -> list[list[str]]:
    """The first sentences of an article as words (3 to `max_words` words each)."""
    sentences = []
    for paragraph in paragraphs:
        for sentence in _SENTENCE_END.split(paragraph):
            words = split_words(sentence)
            if 3 <= len(words) <= max_words:
                sentences.append(words)
                if len(sentences) == max_sentences:
                    return sentences
    return sentences


def build(
    corpus: str,
    dev_every: int = 10,
    max_sentences: int = 6,
    max_words: int = 48,
    max_articles: Optional[int] = None,
) -> dict:
    """{"train": [(words, tags)], "dev": [...]} from the corpus (see the module docstring)."""
    splits = {"train": [], "dev": []}
    for number, (title, paragraphs) in enumerate(read_articles(corpus)):
        if max_articles is not None and number >= max_articles:
            break
        name = mention_name(title)
        if name is None:
            continue
        type_ = entity_type(name)
        split = "dev" if number % dev_every == 0 else "train"
        for words in article_sentences(paragraphs, max_sentences, max_words):
            splits[split].append((words, tag_mentions(words, name, type_)))
    return splits


def write_conll(path: str, sentences: list) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for words, tags in sentences:
            f.write("".join(f"{w} {t}\n" for w, t in zip(words, tags)) + "\n")
    os.replace(tmp, path)


def dictionary_tags(train: list, dev_sentences: list[list[str]]) -> list[list[str]]:
    """Tags from the training entity strings: longest match first, the most frequent type."""
    from electra_tf.finetuning.tagging.metrics import entities

    types = defaultdict(Counter)
    for words, tags in train:
        for type_, start, end in entities(tags, PREFIX):
            types[tuple(words[start : end + 1])][type_] += 1
    lengths = sorted({len(k) for k in types}, reverse=True)
    result = []
    for words in dev_sentences:
        tags, i = [OUTSIDE] * len(words), 0
        while i < len(words):
            for n in lengths:
                key = tuple(words[i : i + n])
                if len(key) == n and key in types:
                    type_ = types[key].most_common(1)[0][0]
                    tags[i : i + n] = [f"B-{type_}"] + [f"I-{type_}"] * (n - 1)
                    i += n
                    break
            else:
                i += 1
        result.append(tags)
    return result


def baselines(splits: dict) -> dict:
    """Dev scores of tagging nothing and of the training dictionary."""
    from electra_tf.finetuning.tagging.metrics import score

    gold = [tags for _, tags in splits["dev"]]
    words = [w for w, _ in splits["dev"]]
    return {
        "all_O": score(gold, [[OUTSIDE] * len(t) for t in gold], PREFIX),
        "dictionary": score(gold, dictionary_tags(splits["train"], words), PREFIX),
    }
