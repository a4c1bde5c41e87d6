"""Tiny files in C3's layout, written by hand, for the multiple-choice tests."""

import json

# Two documents in C3's exact layout: context lines, questions with 2-4
# options and the answer's text, the document id.
DOCUMENTS = [
    [
        ["A: the movie was very good.", "B: the plot was dull."],
        [
            {
                "question": "what was good?",
                "choice": ["the movie", "the plot", "the actor"],
                "answer": "the movie",
            },
            {
                "question": "what was dull?",
                "choice": ["the plot", "the film"],
                "answer": "the plot",
            },
        ],
        "12-34",
    ],
    [
        ["the story is fun."],
        [
            {
                "question": "is the story fun?",
                "choice": ["yes", "no", "a bit", "very dull"],
                "answer": "yes",
            }
        ],
        "m5-6",
    ],
]


def write_c3(path, documents=DOCUMENTS):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(documents, f, ensure_ascii=False)
    return str(path)
