"""The silver title-mention task: mentions, types, splits, files and baselines."""

import json

from electra_tf.commands import title_mentions as title_mentions_command
from electra_tf.finetuning.tagging import title_mentions
from electra_tf.finetuning.tagging.data import read_conll

CORPUS = """지미 카터
지미 카터는 미국의 대통령이다. 카터는 조지아주에서 태어났다.
"지미 카터"라는 이름이 알려졌다. 그는 지미 카터스라는 가게를 열었다.

서울역 (서울)
서울역은 서울의 기차역이다.

1990년
1990년에 많은 일이 있었다. 그 해는 평범했다.

하버드 대학교
하버드 대학교의 역사는 길다. 학생이 많다.

72
72는 숫자이다.
"""


def test_mentions_are_whole_words_with_particles():
    tag = title_mentions.tag_mentions
    assert tag(["지미", "카터는", "미국의", "대통령이다."], "지미 카터", "MISC") == [
        "B-MISC",
        "I-MISC",
        "O",
        "O",
    ]
    # Opening and closing punctuation and a particle: still a mention; another noun: not.
    assert tag(['"지미', '카터"라는', "이름"], "지미 카터", "PER") == ["B-PER", "I-PER", "O"]
    assert tag(["지미", "카터스라는", "가게"], "지미 카터", "PER") == ["O", "O", "O"]
    assert tag(["카터는", "지미"], "지미 카터", "PER") == ["O", "O"]
    assert tag(["1990년에,", "1990년대"], "1990년", "DATE") == ["B-DATE", "O"]


def test_types_come_from_the_title_form():
    assert [
        title_mentions.entity_type(t)
        for t in (
            "1990년",
            "1990년대",
            "음력 3월 1일",
            "19세기",
            "서울역",
            "울산광역시",
            "월출산",
            "하버드 대학교",
            "대한축구협회",
            "교황 란도",
            "지미 카터",
            "파충류",
        )
    ] == ["DATE", "DATE", "DATE", "DATE", "LOC", "LOC", "LOC", "ORG", "ORG", "PER", "MISC", "MISC"]
    assert title_mentions.mention_name("동구 (울산광역시)") == "동구"
    assert title_mentions.mention_name("72") is None and title_mentions.mention_name("X") is None


def test_build_writes_conll_splits_and_baselines(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS, encoding="utf-8")
    out = tmp_path / "silver"
    assert (
        title_mentions_command.main(
            ["--corpus", str(corpus), "--output_dir", str(out), "--dev_every", "2", "--baselines"]
        )
        == 0
    )
    # Articles 0 and 2 go to dev, 1 and 3 to train; the digits-only title is skipped.
    dev = read_conll(str(out / "dev.txt"), "dev", True)
    train = read_conll(str(out / "train.txt"), "train", True)
    assert dev.sentences[0] == ["지미", "카터는", "미국의", "대통령이다."]
    assert dev.tags[0] == ["B-MISC", "I-MISC", "O", "O"]
    assert dev.tags[1] == ["O", "O", "O"]  # 카터는 alone is not the title
    assert ["1990년에", "많은", "일이", "있었다."] in dev.sentences
    assert train.sentences[0] == ["서울역은", "서울의", "기차역이다."]
    assert train.tags[0][0] == "B-LOC"
    assert ["하버드", "대학교의", "역사는", "길다."] in train.sentences
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["dev"]["mentions"] == {"DATE": 1, "MISC": 2}
    assert stats["train"]["mentions"] == {"LOC": 1, "ORG": 1}
    assert stats["dev_baselines"]["all_O"]["f1"] == 0.0
    # No dev title is in the training dictionary: it finds nothing.
    assert stats["dev_baselines"]["dictionary"]["recall"] == 0.0


def test_dictionary_baseline_takes_the_longest_match():
    train = [
        (["하버드", "대학교의", "역사"], ["B-ORG", "I-ORG", "O"]),
        (["하버드", "출신"], ["B-MISC", "O"]),
    ]
    assert title_mentions.dictionary_tags(train, [["하버드", "대학교의", "하버드"]]) == [
        ["B-ORG", "I-ORG", "B-MISC"]
    ]
