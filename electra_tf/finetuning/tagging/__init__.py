"""Token classification (NER, chunking, part of speech): words in, one tag per word out.

* `data`: CoNLL / JSONL words and tags, tag formats, word splitting of raw text.
* `features`: sentences -> pieces with each word's first-piece position.
* `model`: the per-token head.
* `metrics`: entity-level precision, recall and F1 as seqeval computes them.
* `task`: the task kind: trials, metrics, predictions, export and check.
* `serving`, `check`: the text / words / token-id signatures of an export and their check.
* `title_mentions`: a silver NER task built from Wikipedia text.
"""
