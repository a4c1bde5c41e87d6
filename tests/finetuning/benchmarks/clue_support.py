"""Small files in CLUE's layouts, written as CLUE distributes them (one folder per task)."""

import json
import os

TNEWS_CODES = ["100", "101", "102", "103", "104", "106", "107", "108"]


def write_lines(path, records):
    """One JSON object per line (CLUE's classification and CLUENER files)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def tnews(folder, count, seed, test=False):
    """TNEWS lines: `{"label", "label_desc", "sentence", "keywords"}`; test lines `{"id", ...}`."""
    records = []
    for i in range(count):
        code = TNEWS_CODES[(i + seed) % len(TNEWS_CODES)]
        record = {"sentence": f"新闻标题{i}号{code}", "keywords": ""}
        if test:
            record = {"id": i, **record}
        else:
            record = {"label": code, "label_desc": f"news_{code}", **record}
        records.append(record)
    return records


def nli(count, seed, test=False):
    """OCNLI / CMNLI lines; every fifth training or dev pair is labelled `-`."""
    labels = ["entailment", "neutral", "contradiction"]
    records = []
    for i in range(count):
        record = {"sentence1": f"前提{i}", "sentence2": f"假设{i + seed}"}
        if test:
            record["id"] = i
        else:
            record["label"] = "-" if i % 5 == 4 else labels[(i + seed) % 3]
        records.append(record)
    return records


CLUENER_LINES = [
    {
        "text": "浙商银行企业信贷部叶老桂博士",
        "label": {
            "name": {"叶老桂": [[9, 11]]},
            "company": {"浙商银行": [[0, 3]]},
            "position": {"博士": [[12, 13]]},
        },
    },
    {"text": "生生不息CSOL生化狂潮让你填弹狂扫", "label": {"game": {"CSOL": [[4, 7]]}}},
    {"text": "今天天气很好"},
    {
        "text": "北京和北京的故宫",
        "label": {"address": {"北京": [[0, 1], [3, 4]]}, "scene": {"故宫": [[6, 7]]}},
    },
]


def c3_documents(count, seed):
    documents = []
    for d in range(count):
        options = [f"选项{k}" for k in range(3 + d % 2)]
        questions = [
            {
                "question": f"问题{d}",
                "choice": options,
                "answer": options[(d + seed) % len(options)],
            }
        ]
        documents.append([[f"男：第{d}句话", "女：好的"], questions, f"{d}-{seed}"])
    return documents


def write_json(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False)
    return path


def clue_data(root, count=8, tasks=("tnews", "ocnli", "cluener", "c3")):
    """A CLUE data directory with the given tasks' files, `count` examples each."""
    root = str(root)
    if "tnews" in tasks:
        write_lines(os.path.join(root, "tnews", "train.json"), tnews(None, count, 0))
        write_lines(os.path.join(root, "tnews", "dev.json"), tnews(None, count, 1))
        write_lines(os.path.join(root, "tnews", "test.json"), tnews(None, 3, 0, test=True))
    if "ocnli" in tasks:
        write_lines(os.path.join(root, "ocnli", "train.json"), nli(count, 0))
        write_lines(os.path.join(root, "ocnli", "dev.json"), nli(count, 1))
    if "cluener" in tasks:
        write_lines(os.path.join(root, "cluener", "train.json"), CLUENER_LINES * (count // 4))
        write_lines(os.path.join(root, "cluener", "dev.json"), CLUENER_LINES)
        write_lines(
            os.path.join(root, "cluener", "test.json"),
            [{"id": 10 + i, "text": line["text"]} for i, line in enumerate(CLUENER_LINES)],
        )
    if "c3" in tasks:
        for part, seed in (("d", 0), ("m", 1)):
            write_json(
                os.path.join(root, "c3", f"{part}-train.json"), c3_documents(count // 2, seed)
            )
            write_json(os.path.join(root, "c3", f"{part}-dev.json"), c3_documents(2, seed + 2))
        test = c3_documents(3, 0)
        for document in test:
            for question in document[1]:
                question.pop("answer")
        write_json(os.path.join(root, "c3", "test1.1.json"), test)
    return root
