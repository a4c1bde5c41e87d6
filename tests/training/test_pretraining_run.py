"""Planning a pre-training run (electra_tf/training/pretraining_run.py): names, refusals, resumption.

`plan` trains nothing and builds no shard, so these tests are fast; the runs
themselves are in tests/commands/test_pretrain_cli.py (the command is `plan` then `run`).
"""

import hashlib
import json
import os
import shutil

import pytest

from electra_tf.artifacts.run_dir import RunDir, write_run_files
from electra_tf.data.shard_build import write_shards
from electra_tf.errors import RunError
from electra_tf.training.pretraining_loop import check_run_dir
from electra_tf.training.pretraining_run import (
    BUILTIN_SCHEDULE,
    PretrainingRequest,
    plan,
)
from electra_tf.vocab_learning import VocabOptions

WORDS = "the cat sat on a mat and the dog ran to the park".split()
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TINY = {"hidden_size": 32, "num_layers": 1, "embedding_size": 16, "num_heads": 2}


@pytest.fixture
def work(tmp_path):
    """A working directory with a corpus of 8 documents and its vocabulary (5 special tokens and 11 words)."""
    (tmp_path / "text").mkdir()
    corpus = tmp_path / "text" / "wiki.txt"
    corpus.write_text("\n\n".join(" ".join(WORDS[i:] + WORDS[:i]) for i in range(8)) + "\n")
    (tmp_path / "vocab.txt").write_text("\n".join(SPECIAL + sorted(set(WORDS))) + "\n")
    return tmp_path


def request(work, **fields) -> PretrainingRequest:
    values = dict(
        model_size="tiny", corpus=[str(work / "text" / "wiki.txt")], working_dir=str(work)
    )
    values.update(fields)
    values["overrides"] = {**TINY, **values.get("overrides", {})}
    return PretrainingRequest(**values)


def planned(request_, lines=None):
    return plan(request_, print_fn=(lines.append if lines is not None else lambda _: None))


def test_runs_and_data_are_named_after_the_size_and_the_corpus_content(work):
    first = planned(request(work))
    run_name = os.path.basename(first.run_dir)
    data_name = os.path.basename(first.data_dir)
    assert os.path.dirname(first.run_dir) == str(work / "runs")
    assert os.path.dirname(first.data_dir) == str(work / "data")
    # <size>-<first file's stem>-<8 hex digits of a content hash>; data: without the size.
    size, stem, digest = run_name.split("-")
    assert (size, stem, len(digest)) == ("tiny", "wiki", 8) and int(digest, 16) >= 0
    assert data_name == f"wiki-{digest}"
    # Nothing is built: neither directory exists after planning.
    assert not os.path.exists(first.run_dir) and not os.path.exists(first.data_dir)
    assert first.corpus == [str(work / "text" / "wiki.txt")]
    assert (first.eval_fraction, first.vocab_file, first.resuming) == (0.01, None, False)
    assert first.vocab_options.vocab_size == 30522  # BERT's, to be learned
    # The same bytes elsewhere (a copy, another directory) keep the names...
    (work / "copy").mkdir()
    shutil.copy(work / "text" / "wiki.txt", work / "copy" / "wiki.txt")
    copied = planned(request(work, corpus=[str(work / "copy" / "wiki.txt")]))
    assert (copied.run_dir, copied.data_dir) == (first.run_dir, first.data_dir)
    # ...another size changes the run only; edited text changes both.
    base = planned(request(work, model_size="small", overrides={}))
    assert os.path.basename(base.run_dir) == f"small-wiki-{digest}"
    assert base.data_dir == first.data_dir
    with open(work / "text" / "wiki.txt", "a") as f:
        f.write("\na new document\n")
    edited = planned(request(work))
    assert edited.run_dir != first.run_dir and edited.data_dir != first.data_dir
    assert os.path.basename(edited.run_dir).startswith("tiny-wiki-")
    # Flags name them outright.
    given = planned(request(work, output_dir=str(work / "r"), data_dir=str(work / "d")))
    assert (given.run_dir, given.data_dir) == (str(work / "r"), str(work / "d"))


def test_a_directory_stands_for_its_files_and_eval_corpus_replaces_the_fraction(work):
    (work / "text" / "more.txt").write_text("a dog\n")
    (work / "text" / ".hidden").write_text("not text\n")
    (work / "held_out.txt").write_text("a cat\n")
    result = planned(
        request(work, corpus=[str(work / "text")], eval_corpus=[str(work / "held_*.txt")])
    )
    assert result.corpus == [str(work / "text" / "more.txt"), str(work / "text" / "wiki.txt")]
    assert result.eval_corpus == [str(work / "held_out.txt")]
    assert result.eval_fraction == 0.0
    assert os.path.basename(result.run_dir).startswith("tiny-more-")


def test_the_demo_has_its_schedule_and_held_out_share_unless_flags_say_otherwise(work):
    lines = []
    demo = planned(request(work, corpus=()), lines)
    assert demo.builtin and demo.corpus == []
    assert demo.run_dir == str(work / "runs" / "tiny-builtin")
    assert demo.data_dir == str(work / "data" / "builtin")
    for name, value in BUILTIN_SCHEDULE.items():
        assert getattr(demo.config, name) == value, name
    assert demo.eval_fraction == 0.05 and demo.vocab_options.vocab_size == 8000
    assert len(lines) == 1 and lines[0].startswith("No --corpus given: running the built-in DEMO")
    assert "400 steps at batch 16" in lines[0]
    given = planned(
        request(
            work,
            corpus=(),
            eval_fraction=0.01,
            overrides={"num_train_steps": 7, "vocab_size": 600},
        )
    )
    assert given.config.num_train_steps == 7 and given.config.temperature == 2.0
    assert given.eval_fraction == 0.01 and given.vocab_options.vocab_size == 600
    # A corpus gets the preset's schedule.
    assert planned(request(work)).config.num_train_steps == 10_000  # (the tiny preset's)


@pytest.mark.parametrize(
    "fields, message",
    [
        (lambda w: {"overrides": {"mask_rate": 1.5}}, "--mask_rate=1.5: must be in (0, 1)"),
        (lambda w: {"model_size": "huge"}, "--model_size='huge': choose one of"),
        (lambda w: {"corpus": [f"{w}/no*.txt"]}, "--corpus: '{w}/no*.txt' matches no file."),
        (
            lambda w: {"eval_corpus": [f"{w}/none.txt"]},
            "--eval_corpus: '{w}/none.txt' matches no file.",
        ),
        (lambda w: {"eval_fraction": 1.0}, "--eval_fraction=1.0: must be in [0, 1)."),
        (lambda w: {"eval_only": True, "eval_fraction": 0.0}, "--eval_only needs held-out text"),
        (
            lambda w: {"vocab_file": f"{w}/vocab.txt", "overrides": {"vocab_size": 100}},
            "--vocab_size=100 but --vocab_file={w}/vocab.txt has 16 tokens",
        ),
        (
            # A budget is checked as soon as the vocabulary, hence the model, is known.
            lambda w: {"vocab_file": f"{w}/vocab.txt", "overrides": {"max_train_flops": 1.0}},
            "--max_train_flops=1 is less than 1 training step(s)",
        ),
        (lambda w: {"vocab_file": f"{w}/spm.txt"}, "--vocab_file: "),
        (lambda w: {"overrides": {"init_checkpoint": f"{w}/text"}}, "--init_checkpoint: "),
    ],
)
def test_bad_requests_are_refused_in_one_line_before_anything_is_built(work, fields, message):
    (work / "spm.txt").write_text("[PAD]\t0\n")
    before = sorted(os.listdir(work))
    with pytest.raises(RunError) as caught:
        planned(request(work, **fields(work)))
    assert message.format(w=work) in str(caught.value)
    assert "\n" not in str(caught.value)
    # No run directory, no vocabulary, no shards (at most the cache of the corpus's digests).
    assert sorted(set(os.listdir(work)) - {"data"}) == before
    if (work / "data").exists():
        assert os.listdir(work / "data") == ["corpus-digests.json"]


def _shards(work, length=16):
    write_shards(
        [str(work / "text" / "wiki.txt")],
        str(work / "shards"),
        {"vocab_file": str(work / "vocab.txt")},
        max_seq_length=length,
        num_shards=1,
        seed=0,
    )


def test_shard_dir_takes_the_builds_length_casing_and_vocabulary(work):
    _shards(work)
    lines = []
    result = planned(request(work, corpus=(), shard_dir=str(work / "shards")), lines)
    assert not result.builtin and lines == []
    assert result.run_dir == str(work / "runs" / "tiny-shards")
    assert result.config.max_seq_length == 16
    assert result.vocab_file == str(work / "vocab.txt")
    assert result.config.model.vocab_size == len(SPECIAL) + len(set(WORDS))
    assert result.eval_shard_dir is None and result.eval_corpus == []
    (work / "held_out.txt").write_text("a cat\n")
    with_eval = planned(
        request(
            work,
            corpus=(),
            shard_dir=str(work / "shards"),
            eval_corpus=[str(work / "held_out.txt")],
        )
    )
    # Held-out shards of --eval_corpus: named after its content, built by `run`.
    assert os.path.dirname(with_eval.eval_shard_dir) == str(work / "data")
    assert os.path.basename(with_eval.eval_shard_dir).startswith("eval-held_out-")
    assert not os.path.exists(with_eval.eval_shard_dir)
    refusals = [
        ({"overrides": {"max_seq_length": 32}}, "--max_seq_length=32 but --shard_dir="),
        ({"overrides": {"init_checkpoint": "x"}}, "--init_checkpoint with --shard_dir"),
        ({"eval_only": True}, "--eval_only needs held-out text"),
        ({"vocab_file": str(work / "other.txt")}, "is not the vocabulary --shard_dir="),
    ]
    (work / "other.txt").write_text("\n".join(SPECIAL + ["cat"]) + "\n")
    for fields, message in refusals:
        with pytest.raises(RunError, match=message.replace("(", r"\(")):
            planned(request(work, corpus=(), shard_dir=str(work / "shards"), **fields))


def test_a_run_directory_of_this_run_resumes_with_its_own_vocabulary(work):
    first = planned(request(work, vocab_file=str(work / "vocab.txt")))
    assert not first.resuming
    # What the loop writes when it starts: config.json and the vocabulary.
    write_run_files(RunDir(first.run_dir), first.config, first.vocab_file)
    lines = []
    again = planned(request(work), lines)  # no --vocab_file: the run's own
    assert again.resuming and again.vocab_file == RunDir(first.run_dir).vocab_file
    assert lines == [f"Vocabulary: {again.vocab_file} (the run's own)"]
    assert again.vocab_options is None and again.config.model.vocab_size == 16
    # Values a resumed run may change, and --restart, still resume.
    more = planned(request(work, overrides={"num_train_steps": 20}, restart=True))
    assert more.resuming and more.config.num_train_steps == 20


def test_a_run_directory_of_another_run_is_refused_before_anything_is_built(work):
    first = planned(request(work, vocab_file=str(work / "vocab.txt")))
    write_run_files(RunDir(first.run_dir), first.config, first.vocab_file)
    data = os.path.join(str(work), "data")
    before = sorted(os.listdir(data)) if os.path.exists(data) else []
    with pytest.raises(RunError) as caught:
        planned(request(work, overrides={"learning_rate": 1e-5}))
    message = str(caught.value)
    assert "holds a run with a different configuration" in message
    assert "learning_rate" in message and "--change_hyperparameters" in message
    # With the flag the new learning rate resumes the run...
    assert planned(
        request(work, overrides={"learning_rate": 1e-5}, change_hyperparameters=True)
    ).resuming
    # ...but never another architecture, nor another vocabulary.
    with pytest.raises(RunError, match="hidden_size"):
        planned(request(work, overrides={"hidden_size": 64}, change_hyperparameters=True))
    (work / "other.txt").write_text("\n".join(SPECIAL + sorted(set(WORDS)) + ["zebra"]) + "\n")
    with pytest.raises(RunError, match=r"17 tokens\) is not the vocabulary .* 16 tokens"):
        planned(request(work, vocab_file=str(work / "other.txt")))
    shuffled = SPECIAL + sorted(set(WORDS), reverse=True)
    (work / "shuffled.txt").write_text("\n".join(shuffled) + "\n")
    with pytest.raises(RunError, match="is not the vocabulary .* was trained with"):
        planned(request(work, vocab_file=str(work / "shuffled.txt")))
    assert (sorted(os.listdir(data)) if os.path.exists(data) else []) == before
    assert sorted(os.listdir(first.run_dir)) == ["config.json", "identity.json", "vocab.txt"]


def test_a_renamed_corpus_finds_its_run_and_data(work):
    first = planned(request(work))
    os.makedirs(first.run_dir)
    os.makedirs(first.data_dir)
    os.rename(work / "text" / "wiki.txt", work / "text" / "ko.txt")
    renamed = planned(request(work, corpus=[str(work / "text" / "ko.txt")]))
    digest = first.run_dir.rsplit("-", 1)[1]
    # New names (the new stem, the same content hash), linked to the folders already there.
    assert renamed.run_dir == str(work / "runs" / f"tiny-ko-{digest}")
    assert renamed.data_dir == str(work / "data" / f"ko-{digest}")
    assert os.path.islink(renamed.run_dir) and os.path.islink(renamed.data_dir)
    assert os.path.realpath(renamed.run_dir) == os.path.realpath(first.run_dir)
    assert os.path.realpath(renamed.data_dir) == os.path.realpath(first.data_dir)


def _sha256(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_a_run_knows_its_vocabulary_by_content_and_refuses_a_swapped_one(work):
    vocab = work / "vocab.txt"
    first = planned(request(work, vocab_file=str(vocab)))
    run = RunDir(first.run_dir)
    write_run_files(run, first.config, first.vocab_file)
    # The identity: the vocabulary's SHA-256 and size, casing and normalization.
    assert json.load(open(run.identity_file)) == {
        "vocab_sha256": _sha256(vocab),
        "vocab_size": 16,
        "do_lower_case": True,
        "strip_accents": True,
        "normalization": first.config.normalization,
        "learned_with": None,  # given as a file
    }
    # vocab.txt lost; the same tokens in another order (the same size) are refused.
    os.remove(run.vocab_file)
    shuffled = work / "shuffled.txt"
    shuffled.write_text("\n".join(SPECIAL + sorted(set(WORDS), reverse=True)) + "\n")
    with pytest.raises(RunError) as refused:
        planned(request(work, vocab_file=str(shuffled)))
    assert str(refused.value) == (
        f"--vocab_file={shuffled} (sha256 {_sha256(shuffled)[:16]}, 16 tokens) is not the "
        f"vocabulary {run.path} was trained with (sha256 {_sha256(vocab)[:16]}, 16 tokens, "
        f"recorded in {run.identity_file}). Pass that vocabulary, or choose another --output_dir."
    )
    # The loop, called directly, refuses it too.
    with pytest.raises(RunError, match="is not the vocabulary"):
        check_run_dir(first.config, run.path, str(shuffled))
    # Without --vocab_file, only a cached vocabulary of the recorded hash stands in for it.
    with pytest.raises(RunError) as refused:
        planned(request(work))
    assert str(refused.value).startswith(
        f"{run.vocab_file} is missing and no file of its hash (sha256 {_sha256(vocab)[:16]}, "
    )
    assert str(refused.value).endswith(
        "pass the run's vocabulary as --vocab_file, or choose another --output_dir."
    )
    os.makedirs(first.data_dir)
    shutil.copy(shuffled, os.path.join(first.data_dir, "vocab-uncased-16-aaaa.txt"))
    cached = os.path.join(first.data_dir, "vocab-uncased-16-bbbb.txt")
    shutil.copy(vocab, cached)
    lines = []
    again = planned(request(work), lines)
    assert again.resuming and again.vocab_file == cached
    assert lines == [f"Vocabulary: {cached} (the run's, by its hash; restored as {run.vocab_file})"]
    write_run_files(run, again.config, again.vocab_file)
    assert open(run.vocab_file, "rb").read() == open(vocab, "rb").read()
    # The run's own vocab.txt, edited in place, is refused as well.
    shutil.copy(shuffled, run.vocab_file)
    with pytest.raises(RunError, match=rf"^{run.vocab_file} \(sha256 {_sha256(shuffled)[:16]}\)"):
        planned(request(work))
    shutil.copy(vocab, run.vocab_file)
    # Another vocabulary size or casing on the existing run: refused, naming both values.
    with pytest.raises(RunError) as refused:
        planned(request(work, overrides={"vocab_size": 3000}))
    assert str(refused.value) == (
        f"--vocab_size=3000 but {run.path} was trained with a vocabulary of 16 tokens "
        f"({run.vocab_file}); drop the flag to resume, or choose another --output_dir."
    )
    with pytest.raises(RunError) as refused:
        planned(request(work, overrides={"do_lower_case": False}))
    assert str(refused.value).startswith(
        f"--do_lower_case=False but {run.path} was trained with do_lower_case=True "
    )


def test_a_run_of_an_earlier_version_resumes_and_records_its_vocabulary(work):
    first = planned(request(work, vocab_file=str(work / "vocab.txt")))
    run = RunDir(first.run_dir)
    write_run_files(run, first.config, first.vocab_file)
    os.remove(run.identity_file)  # as an earlier version wrote it
    again = planned(request(work))
    assert again.resuming and again.vocab_file == run.vocab_file
    write_run_files(run, again.config, again.vocab_file)
    assert json.load(open(run.identity_file))["vocab_sha256"] == _sha256(work / "vocab.txt")
    # Such a run that lost its vocab.txt has nothing to check another file against.
    os.remove(run.identity_file)
    os.remove(run.vocab_file)
    for fields in ({}, {"vocab_file": str(work / "vocab.txt")}):
        with pytest.raises(RunError) as refused:
            planned(request(work, **fields))
        assert str(refused.value) == (
            f"{run.vocab_file} is missing and {run.path} records no hash of its vocabulary "
            "(a run of an earlier version), so no file can be checked against it: put the "
            f"run's vocabulary back as {run.vocab_file}, or choose another --output_dir."
        )


def test_a_config_json_that_is_not_json_is_named_in_one_line(work):
    first = planned(request(work, vocab_file=str(work / "vocab.txt")))
    run = RunDir(first.run_dir)
    write_run_files(run, first.config, first.vocab_file)
    text = open(run.config_file).read()
    with open(run.config_file, "w") as f:
        f.write(text[: len(text) // 2])  # cut short, as by a crash of an editor
    with pytest.raises(RunError) as refused:
        planned(request(work))
    message = str(refused.value)
    assert message.startswith(f"{run.config_file} is not a run's configuration (") and (
        "line " in message and "\n" not in message
    )
    assert message.endswith(
        f"{run.path}/export/config.json, once the run has exported), or "
        "choose another --output_dir."
    )
    # The same file read as --init_checkpoint (a run directory with checkpoints/).
    os.makedirs(run.checkpoints)
    with pytest.raises(RunError) as refused:
        planned(request(work, overrides={"init_checkpoint": run.path}, output_dir=str(work / "b")))
    message = str(refused.value)
    assert message.startswith(
        f"--init_checkpoint: {run.config_file}: cannot read the pre-training config ("
    )
    assert "(Unterminated string starting at: line " in message and "\n" not in message


@pytest.mark.parametrize(
    "edit, problem",
    [
        (lambda c: c["model"].update(hidden_size="big"), "model.hidden_size='big' is not int"),
        (lambda c: c.update(learning_rate=[1]), "learning_rate=[1] is not float"),
        (lambda c: c.update(do_lower_case=1), "do_lower_case=1 is not bool"),
        (lambda c: c.pop("model"), 'no "model" object holding the architecture'),
    ],
    ids=["string for int", "list for float", "int for bool", "no model"],
)
def test_a_config_json_of_wrong_types_is_named_and_never_compared(work, edit, problem):
    """A value of another type, or the `model` object gone, is named; no false differences."""
    first = planned(request(work, vocab_file=str(work / "vocab.txt")))
    run = RunDir(first.run_dir)
    write_run_files(run, first.config, first.vocab_file)
    config = json.load(open(run.config_file))
    edit(config)
    with open(run.config_file, "w") as f:
        json.dump(config, f)
    with pytest.raises(RunError) as refused:
        planned(request(work))
    assert str(refused.value) == (
        f"{run.config_file} is not a run's configuration ({problem}). It is the record of "
        f"what the checkpoints hold: put back a good copy (the export holds one, "
        f"{run.path}/export/config.json, once the run has exported), or choose another "
        "--output_dir."
    )


def test_a_run_directory_in_use_is_refused_before_any_data_is_built(work):
    from electra_tf.artifacts.run_lock import RunLock, RunLocked
    from electra_tf.training.pretraining_run import run

    first = planned(request(work, vocab_file=str(work / "vocab.txt")))
    with RunLock(first.run_dir):
        with pytest.raises(RunLocked, match=rf"^--output_dir={first.run_dir} is in use by pid "):
            run(first, print_fn=lambda _: None)
        assert os.listdir(first.run_dir) == [".lock"]
    # No shards, no corpus digests beyond the plan's: the refusal came first.
    assert not os.path.exists(first.data_dir)


def test_a_learned_vocabulary_records_its_flags_and_a_resume_that_asks_for_others_is_refused(
    work, monkeypatch
):
    """The run learns its vocabulary (fewer tokens than --vocab_size asks: a small corpus);
    the same command resumes; a --vocab_* flag or --vocab_size that asks for another is refused."""
    from electra_tf.training import pretraining_run

    def start(config, run_dir, shard_dir, vocab_file, special_ids, **options):
        # What the loop writes when it starts, with what `run` passes it.
        write_run_files(RunDir(run_dir), config, vocab_file, options["vocab_learned_with"])

    monkeypatch.setattr(pretraining_run, "run_pretraining", start)
    asked = {"overrides": {"vocab_size": 60}, "eval_fraction": 0.0}
    first = planned(request(work, **asked))
    assert first.vocab_file is None and first.vocab_options.vocab_size == 60
    pretraining_run.run(first, print_fn=lambda _: None)
    run = RunDir(first.run_dir)
    identity = json.load(open(run.identity_file))
    learned = sum(1 for _ in open(run.vocab_file, encoding="utf-8"))
    assert learned < 60 and identity["vocab_size"] == learned
    assert identity["learned_with"] == {
        "vocab_size": 60,
        "vocab_alphabet_size": None,
        "vocab_max_bytes": None,
        "vocab_unused": 0,
        "vocab_presegment": "none",
    }
    # The same command resumes, although the vocabulary holds fewer than 60 tokens.
    again = planned(request(work, **asked))
    assert again.resuming and again.vocab_file == run.vocab_file
    with pytest.raises(RunError) as refused:
        planned(request(work, overrides={"vocab_size": 3000}, eval_fraction=0.0))
    assert str(refused.value) == (
        f"--vocab_size=3000 but {run.path} learned its vocabulary with --vocab_size=60 "
        f"({learned} tokens, {run.identity_file}); drop the flag to resume, or choose "
        "another --output_dir."
    )
    with pytest.raises(RunError) as refused:
        planned(request(work, vocab_options=VocabOptions(num_unused=2), **asked))
    assert str(refused.value) == (
        f"--vocab_unused=2 but {run.path} learned its vocabulary with --vocab_unused=0 "
        f"({run.identity_file}); drop the flag to resume, or choose another --output_dir."
    )


@pytest.mark.parametrize(
    "failing", ["4 KB free", "8 KB free", "vocab.txt", "identity.json", "config.json"]
)
def test_write_run_files_leaves_nothing_on_a_full_disk(tmp_path, monkeypatch, failing):
    """Whichever of the run's first files finds no room, none is left to bind a later run.

    On a real tmpfs (where mounting is allowed) with 4 or 8 KB free, else by
    making the write of each file raise ENOSPC.
    """
    import errno

    from disk_support import fill, no_space, small_disk

    from electra_tf.artifacts import files, run_dir
    from electra_tf.config import preset

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]) + "\n")
    config = preset("tiny", max_seq_length=16)
    disk = tmp_path / "disk"
    run = RunDir(str(disk / "run"))
    with small_disk(disk, "1m") as mounted:
        os.makedirs(run.path)
        filler = None
        if failing.endswith("free"):
            if not mounted:
                pytest.skip("no tmpfs here; the other cases make each write fail")
            filler = fill(disk, int(failing.split()[0]) * 1024)
        else:

            def full(*args, **kwargs):
                raise no_space(os.path.join(run.path, failing))

            if failing == "vocab.txt":
                monkeypatch.setattr(files.shutil, "copyfile", full)
            elif failing == "identity.json":
                monkeypatch.setattr(run_dir, "write_json", full)
            else:
                monkeypatch.setattr(type(config), "save_json", full)
        with pytest.raises(OSError) as stopped:
            write_run_files(run, config, str(vocab))
        assert stopped.value.errno == errno.ENOSPC
        # The file being written is named (shutil names the source of a copy, a
        # failed close no file at all).
        assert os.path.dirname(stopped.value.filename) == run.path, stopped.value.filename
        assert os.listdir(run.path) == []
        monkeypatch.undo()
        if filler:
            os.remove(filler)
        write_run_files(run, config, str(vocab))
        assert sorted(os.listdir(run.path)) == ["config.json", "identity.json", "vocab.txt"]
