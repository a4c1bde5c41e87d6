"""Dependency parsing (KLUE-DP): each word's head and relation, by a biaffine parser.

* `data`: KLUE-DP's files (words, heads, relations; comments kept) and the
  predictions written in the same layout.
* `features`: sentences -> pieces with each word's first-piece position.
* `model`: biaffine arc and label scores over the words' first pieces.
* `metrics`: UAS and LAS macro and micro F1 as KLUE-baseline computes them.
* `task`: the task kind: trials, metrics, predictions, export and check.
* `serving`, `check`: the words / token-id signatures of an export and their check.
"""
