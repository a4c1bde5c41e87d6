"""`check_export --eval_file`: an export and its float32 Keras model scored on a labelled file."""

import contextlib
import io
import json
import os

import pytest
from token_id_exports_support import FIXTURES, fixture_trial

# The classifier fixture's dev file: 16 rows, every one of which the model gets right
# (its results.json: dev accuracy 1.0).
DEV_FILE = os.path.join(FIXTURES, "classifier", "data", "dev.tsv")
# Rows (counted from 0 under the header) whose label the tests flip: the model then gets
# these 4 of the 16 wrong, whatever the order in which the check batches them.
FLIPPED = (0, 5, 6, 13)


@pytest.fixture(scope="module")
def litert_int8(tmp_path_factory):
    from electra_tf.serving.exporter import export_checkpoint

    base = str(tmp_path_factory.mktemp("eval_file_exports"))
    return export_checkpoint(
        fixture_trial("classifier"), base, "cls", format_name="litert", quantize="int8"
    )


def _flipped_dev_file(path):
    with open(DEV_FILE, encoding="utf-8") as f:
        header, *rows = f.read().splitlines()
    swap = {"pos": "neg", "neg": "pos"}
    for row in FLIPPED:
        text, label = rows[row].split("\t")
        rows[row] = f"{text}\t{swap[label]}"
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return str(path), len(rows)


def test_fixture_model_is_right_on_every_dev_row():
    with open(os.path.join(FIXTURES, "classifier", "run", "results.json")) as f:
        assert json.load(f)["trials"][0]["dev"]["accuracy"] == 1.0


def test_scores_keras_and_the_export_on_the_file_in_file_order(litert_int8, tmp_path):
    from electra_tf.finetuning.kind.file_scoring import EvalFile
    from electra_tf.finetuning.kind.files import FileTaskOptions
    from electra_tf.serving.formats import check_version

    path, count = _flipped_dev_file(tmp_path / "dev.tsv")
    # Batches of 5 sorted by length: a prediction put back in the wrong row would score
    # another row's label.
    eval_file = EvalFile(path, FileTaskOptions(text_column="sentence"), batch_size=5)
    report = check_version(litert_int8, eval_file=eval_file)
    assert report.ok, report.lines
    evaluation = report.result["evaluation"]
    expected = (count - len(FLIPPED)) / count
    assert evaluation["keras"]["accuracy"] == pytest.approx(expected)
    assert evaluation["examples"] == count == 16
    assert evaluation["primary_metric"] == "accuracy"
    assert set(evaluation["keras"]) == {"accuracy", "f1", "mcc"}
    equal = evaluation["agreement"]["equal"]
    assert evaluation["agreement"]["total"] == count
    # Each disagreement with the Keras model moves the export's accuracy by one row at most.
    assert abs(evaluation["export"]["accuracy"] - expected) <= (count - equal) / count + 1e-12
    difference = 100 * (evaluation["export"]["accuracy"] - evaluation["keras"]["accuracy"])
    assert evaluation["difference_points"]["accuracy"] == pytest.approx(difference)
    json.dumps(evaluation)  # one JSON-able record
    text = "\n".join(report.lines)
    assert f"{path}: 16 labelled examples in 4 requests" in text
    assert "float32 Keras" in text and "litert int8" in text
    assert f"labels agreeing with the float32 Keras model on the file: {equal}/16" in text
    # The check's own requests are reported as without a file.
    assert len(report.result["responses"]) == 1


def test_command_prints_the_table_and_refuses_a_bad_file_in_one_line(litert_int8, tmp_path):
    from electra_tf.commands import check_export

    path, _ = _flipped_dev_file(tmp_path / "dev.tsv")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = check_export.main(
            [litert_int8, f"--eval_file={path}", "--text_column=sentence", "--eval_batch_size=3"]
        )
    assert code == 0, out.getvalue()
    assert "16 labelled examples in 6 requests" in out.getvalue()
    assert out.getvalue().rstrip().endswith("PASSED")

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = check_export.main([litert_int8, f"--eval_file={path}"])  # no `text` column
    assert code == 2
    message = err.getvalue().strip()
    assert "\n" not in message and path in message and "'text'" in message

    unknown = tmp_path / "unknown.tsv"
    unknown.write_text("sentence\tlabel\ngood film\tmaybe\n", encoding="utf-8")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = check_export.main([litert_int8, f"--eval_file={unknown}", "--text_column=sentence"])
    assert code == 2
    assert err.getvalue().strip() == (
        f"error: {unknown}, line 2: unknown label 'maybe'; the labels are neg, pos "
        "(from the training data or --labels)."
    )

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = check_export.main(
            [litert_int8, f"--eval_file={path}", "--text_column=sentence", "--text_pair_column=x"]
        )
    assert code == 2
    assert err.getvalue().strip() == (
        "error: --eval_file: toycls takes single texts: drop --text_pair_column."
    )


def test_kinds_without_a_file_scorer_refuse_the_flag_in_one_line():
    from electra_tf.errors import RunError
    from electra_tf.finetuning.kind.file_scoring import EvalFile
    from electra_tf.finetuning.tagging.task import TaggingTask
    from electra_tf.serving.discriminator import DiscriminatorExport

    for kind in (TaggingTask, DiscriminatorExport):
        with pytest.raises(RunError) as caught:
            kind.scored_file(None, EvalFile("dev.tsv"))
        message = str(caught.value)
        assert message.startswith(f"--eval_file: {kind.KIND} ")
        assert "\n" not in message and "classifiers" in message
