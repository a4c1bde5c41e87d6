"""keras-hub presets: export-keras-hub / import-keras-hub against keras-hub's own code and files."""

import json
import math
import os
import re
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
from finetuning_support import VOCAB, toy_sentences, write_vocab

from electra_tf.artifacts.pretrained import locate_pretrained
from electra_tf.commands.convert import run as convert
from electra_tf.config import PretrainingConfig, preset
from electra_tf.interop import checkpoints
from electra_tf.interop import keras_hub_fidelity as khf
from electra_tf.interop import keras_hub_preset as khp
from electra_tf.interop.weight_names import assign_weights, model_entries, read_weights
from electra_tf.modeling.electra import build_generator_and_discriminator
from electra_tf.tokenization import WordPieceTokenizer

keras_hub = pytest.importorskip("keras_hub")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "keras_hub_preset")
_erf = np.vectorize(math.erf)
RTD_HEAD = {
    "discriminator_predictions/dense/kernel",
    "discriminator_predictions/dense/bias",
    "discriminator_predictions/dense_1/kernel",
    "discriminator_predictions/dense_1/bias",
}
# Every file keras-hub's save_to_preset writes for a backbone and its tokenizer.
PRESET_FILES = {
    "config.json",
    "metadata.json",
    "model.weights.h5",
    "tokenizer.json",
    os.path.join("assets", "tokenizer", "vocabulary.txt"),
}


def _files(directory):
    return {
        os.path.relpath(os.path.join(d, f), directory)
        for d, _, names in os.walk(directory)
        for f in names
    }


def make_run(
    directory, seed=0, vocab=VOCAB, do_lower_case=True, strip_accents=None, normalization="casefold"
):
    """A pre-trained model directory of ours (config.json, vocab.txt, discriminator.keras).

    Its weights are drawn at random with std 0.3 (LayerNorm scales near 1),
    so that every weight, attention included, moves the outputs; an
    initialised model's std 0.02 would leave attention almost uniform.

    Returns:
        (directory, canonical weights).
    """
    directory = str(directory)
    os.makedirs(directory)
    write_vocab(os.path.join(directory, "vocab.txt"), vocab)
    config = preset(
        "tiny",
        vocab_size=len(vocab),
        hidden_size=32,
        num_layers=2,
        embedding_size=16,
        num_heads=2,
        intermediate_size=64,
        do_lower_case=do_lower_case,
        strip_accents=strip_accents,
        normalization=normalization,
    )
    config.save_json(os.path.join(directory, "config.json"))
    keras.utils.set_random_seed(seed)
    _, discriminator = build_generator_and_discriminator(config.model)
    checkpoints.build_inputs(None, discriminator)
    rng = np.random.default_rng(seed)
    entries = model_entries(None, discriminator)
    weights = {
        name: ((1.0 if name.endswith("/gamma") else 0.0) + rng.normal(0, 0.3, value.shape)).astype(
            np.float32
        )
        for name, value in read_weights(entries).items()
    }
    assign_weights(entries, weights)
    discriminator.save(os.path.join(directory, "discriminator.keras"))
    return directory, weights


# --- an independent NumPy forward pass over canonical (TF1-layout) weights ---------------


def _gelu_exact(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def np_sequence_output(weights, heads, ids, mask, segments, gelu):
    w = {k: v.astype(np.float64) for k, v in weights.items()}

    def norm(x, name):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-12) * w[f"{name}/gamma"] + w[f"{name}/beta"]

    def dense(x, name):
        return x @ w[f"{name}/kernel"] + w[f"{name}/bias"]

    b, n = ids.shape
    x = (
        w["electra/embeddings/word_embeddings"][ids]
        + w["electra/embeddings/position_embeddings"][:n][None]
        + w["electra/embeddings/token_type_embeddings"][segments]
    )
    x = norm(x, "electra/embeddings/LayerNorm")
    if "electra/embeddings_project/kernel" in w:
        x = dense(x, "electra/embeddings_project")
    hidden = x.shape[-1]
    d = hidden // heads
    blocked = (1.0 - mask[:, None, None, :]) * -1e9
    layers = len({k.split("/")[2] for k in w if k.startswith("electra/encoder/")})
    for i in range(layers):
        layer = f"electra/encoder/layer_{i}"
        q, k, v = (
            dense(x, f"{layer}/attention/self/{p}").reshape(b, n, heads, d).transpose(0, 2, 1, 3)
            for p in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + blocked
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(b, n, hidden)
        x = norm(
            x + dense(context, f"{layer}/attention/output/dense"),
            f"{layer}/attention/output/LayerNorm",
        )
        inner = gelu(dense(x, f"{layer}/intermediate/dense"))
        x = norm(x + dense(inner, f"{layer}/output/dense"), f"{layer}/output/LayerNorm")
    return x


def _inputs(vocab_size, length=12, seed=3):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab_size, size=(3, length)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 7:] = 0
    segments = np.zeros_like(ids)
    segments[:, 6:] = 1
    return ids, mask, segments


def _keras_hub_output(preset_dir, ids, mask, segments, exact_gelu=False):
    backbone = keras_hub.models.ElectraBackbone.from_preset(preset_dir)
    if exact_gelu:
        khf.use_exact_gelu(backbone)
    out = backbone({"token_ids": ids, "segment_ids": segments, "padding_mask": mask})
    return np.asarray(out["sequence_output"])


def _our_output(run_dir, ids, mask, segments):
    model = keras.saving.load_model(locate_pretrained(run_dir).discriminator_file)
    out = model({"input_ids": ids, "input_mask": mask, "segment_ids": segments})
    return np.asarray(out["sequence_output"])


@pytest.fixture(scope="module")
def run_and_preset(tmp_path_factory):
    base = tmp_path_factory.mktemp("khp")
    run_dir, weights = make_run(base / "run")
    preset_dir = str(base / "preset")
    assert convert(["export-keras-hub", run_dir, preset_dir]) == 0
    return run_dir, weights, preset_dir


# --- export -------------------------------------------------------------------------------


def test_export_writes_keras_hubs_layout_and_loads_in_keras_hub(run_and_preset):
    run_dir, _, preset_dir = run_and_preset
    assert _files(preset_dir) == PRESET_FILES
    with open(os.path.join(preset_dir, "config.json")) as f:
        config = json.load(f)
    assert config["registered_name"] == "keras_hub>ElectraBackbone"
    assert {k: config["config"][k] for k in ("hidden_dim", "embedding_dim", "num_layers")} == {
        "hidden_dim": 32,
        "embedding_dim": 16,
        "num_layers": 2,
    }
    with open(os.path.join(preset_dir, "metadata.json")) as f:
        assert json.load(f)["keras_hub_version"] == keras_hub.__version__
    tokenizer = keras_hub.models.ElectraTokenizer.from_preset(preset_dir)
    run = PretrainingConfig.load_json(os.path.join(run_dir, "config.json"))
    assert (tokenizer.lowercase, tokenizer.strip_accents) == (True, True)
    assert (run.do_lower_case, run.resolved_strip_accents) == (True, True)
    with open(os.path.join(run_dir, "vocab.txt")) as f:
        assert tokenizer.get_vocabulary() == f.read().split("\n")[:-1]
    assert np.asarray(tokenizer("The movie was FUN")).tolist() == [8, 5, 10, 13]


def test_keras_hub_output_differs_from_ours_by_the_gelu_approximation_alone(run_and_preset):
    run_dir, weights, preset_dir = run_and_preset
    ids, mask, segments = _inputs(19)
    valid = mask.astype(bool)
    ours = _our_output(run_dir, ids, mask, segments)
    theirs = _keras_hub_output(preset_dir, ids, mask, segments)
    exact = np_sequence_output(weights, 2, ids, mask, segments, _gelu_exact)
    tanh = np_sequence_output(weights, 2, ids, mask, segments, _gelu_tanh)
    # Each implementation is the NumPy pass with its own GELU ...
    np.testing.assert_allclose(ours[valid], exact[valid], atol=2e-5)
    np.testing.assert_allclose(theirs[valid], tanh[valid], atol=2e-5)
    # ... so the difference between them is the GELU's, which is not small here.
    gap = np.abs(ours - theirs)[valid].max()
    assert gap > 1e-3
    assert abs(gap - np.abs(exact - tanh)[valid].max()) < 5e-5
    # With the exact GELU in keras-hub's blocks the outputs agree to float32 rounding.
    with_exact = _keras_hub_output(preset_dir, ids, mask, segments, exact_gelu=True)
    np.testing.assert_allclose(with_exact[valid], ours[valid], atol=1e-5)


def test_round_trip_run_preset_run_keeps_every_backbone_weight(run_and_preset, tmp_path):
    run_dir, _, preset_dir = run_and_preset
    back = str(tmp_path / "back")
    assert convert(["import-keras-hub", preset_dir, back]) == 0
    before = checkpoints.load_checkpoint(run_dir)
    after = checkpoints.load_checkpoint(back)
    assert after.model == before.model and not after.has_generator
    for name in set(before.weights) - RTD_HEAD:
        np.testing.assert_array_equal(after.weights[name], before.weights[name], err_msg=name)
    # The head is not in a keras-hub backbone: initialised afresh, so it differs.
    assert not np.array_equal(
        after.weights["discriminator_predictions/dense/kernel"],
        before.weights["discriminator_predictions/dense/kernel"],
    )
    config = PretrainingConfig.load_json(os.path.join(back, "config.json"))
    assert (config.do_lower_case, config.resolved_strip_accents) == (True, True)
    assert config.normalization == "casefold"
    with open(os.path.join(back, "vocab.txt")) as a, open(os.path.join(run_dir, "vocab.txt")) as b:
        assert a.read() == b.read()


def test_weights_move_both_ways_without_a_projection_when_the_sizes_are_equal():
    config = preset(
        "tiny", vocab_size=19, hidden_size=16, num_layers=1, embedding_size=16, num_heads=2
    )
    _, discriminator = build_generator_and_discriminator(config.model)
    checkpoints.build_inputs(None, discriminator)
    rng = np.random.default_rng(5)
    weights = {
        name: rng.normal(0, 0.3, value.shape).astype(np.float32)
        for name, value in read_weights(model_entries(None, discriminator)).items()
    }
    backbone = keras_hub.models.ElectraBackbone(**khp.backbone_config(config.model))
    khp.assign_backbone(backbone, weights, config.model)
    assert "embeddings_projection" not in {layer.name for layer in backbone.layers}
    # keras-hub's query kernel is [H, heads, H / heads]: head h reads output columns h * d ...
    query = backbone.get_layer("transformer_layer_0")._self_attention_layer.query_dense.kernel
    np.testing.assert_array_equal(
        query.numpy()[:, 1, :],
        weights["electra/encoder/layer_0/attention/self/query/kernel"][:, 8:],
    )
    back, unread = khp.read_backbone(backbone)
    assert unread == ["pooled_dense/bias", "pooled_dense/kernel"]
    assert set(back) == set(weights) - RTD_HEAD
    for name, value in back.items():
        np.testing.assert_array_equal(value, weights[name], err_msg=name)


def test_export_reports_the_measured_difference(run_and_preset, tmp_path, capsys):
    run_dir, _, _ = run_and_preset
    assert convert(["export-keras-hub", run_dir, str(tmp_path / "p")]) == 0
    out = capsys.readouterr().out
    measured = re.search(r"max \|difference\| (\S+) .*; (\S+) with the exact GELU", out)
    assert measured, out
    # The tanh GELU alone separates the two; with the exact one left, only float32 rounding
    # (bit for bit on some CPUs, a few ulps where oneDNN orders the sums otherwise).
    assert float(measured[1]) > 1e-4 and float(measured[2]) <= 1e-5
    assert "the same ids as electra-tf on a mixed sample" in out


# --- tokenizer casings --------------------------------------------------------------------

# Every word of MIXED_SAMPLE in each spelling a casing can give: cased and lower-cased,
# with and without accents, ASCII and full-width punctuation; Hangul precomposed only.
MIXED_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + (
    "cafe deja vu the naive zoe ordered creme brulee at hotel muller "
    "café déjà naïve zoë crème brûlée hôtel müller "
    "Cafe Deja Zoe Hotel Muller Café Déjà Zoë Hôtel Müller "
    ". : ! , ： ， 。 "
    "한국어 문장을 토큰으로 나눕니다 서울에서 만나요 "
    "中 文 分 词 测 试 北 京 欢 迎 你 我 们 明 天 见"
).split()

CASINGS = [
    (normalization, lower, strip)
    for normalization in ("casefold", "bert")
    for lower, strip in ((True, True), (True, False), (False, False), (False, True))
]


@pytest.mark.parametrize("normalization,lower,strip", CASINGS)
def test_keras_hub_tokenizer_gives_our_ids_exactly_for_the_casings_that_survive(
    tmp_path, normalization, lower, strip
):
    vocab = write_vocab(str(tmp_path / "vocab.txt"), MIXED_VOCAB)
    ours = WordPieceTokenizer(vocab, lower, strip, normalization)
    fidelity = khf.tokenizer_fidelity(lower, strip, normalization, MIXED_VOCAB)
    theirs = keras_hub.models.ElectraTokenizer(
        vocabulary=MIXED_VOCAB, lowercase=fidelity.lowercase, strip_accents=fidelity.strip_accents
    )
    same = [
        np.asarray(theirs(text)).tolist() == ids
        for text, ids in zip(khf.MIXED_SAMPLE, ours.tokenize_to_lists(khf.MIXED_SAMPLE))
    ]
    # Every sample text is tokenized into known words by us (no [UNK] hides a difference).
    assert all(1 not in ids for ids in ours.tokenize_to_lists(khf.MIXED_SAMPLE))
    if fidelity.level == "same":
        assert all(same)
    else:
        assert not all(same)
    expected_level = {
        (True, True): "same" if normalization == "casefold" else "differs",
        (True, False): "same" if normalization == "casefold" else "differs",
        (False, False): "same",
        (False, True): "broken",  # Hangul decomposed into jamo: Korean becomes [UNK]
    }[(lower, strip)]
    assert fidelity.level == expected_level
    if normalization == "bert" and lower:
        # The ids differ only on the full-width punctuation of the Chinese text.
        assert same == [True, True, False]


def test_a_bert_normalized_run_is_written_with_a_warning_naming_what_differs(tmp_path, capsys):
    source, _ = make_run(tmp_path / "source", vocab=MIXED_VOCAB, normalization="bert")
    preset_dir = str(tmp_path / "preset")
    capsys.readouterr()
    assert convert(["export-keras-hub", source, preset_dir]) == 0
    out = capsys.readouterr().out
    assert "other ids than electra-tf on 1 of the 3 texts of a mixed sample" in out
    warnings = [line for line in out.splitlines() if line.startswith("  warning: ")]
    assert len(warnings) == 1 and "full-width punctuation" in warnings[0]
    tokenizer = keras_hub.models.ElectraTokenizer.from_preset(preset_dir)
    assert (tokenizer.lowercase, tokenizer.strip_accents) == (True, True)


def test_an_unsurvivable_casing_is_refused_and_notokenizer_writes_the_backbone(tmp_path, capsys):
    source, _ = make_run(
        tmp_path / "source", vocab=MIXED_VOCAB, do_lower_case=False, strip_accents=True
    )
    vocab = os.path.join(source, "vocab.txt")
    preset_dir = str(tmp_path / "preset")
    capsys.readouterr()
    assert convert(["export-keras-hub", source, preset_dir]) == 2
    error = capsys.readouterr().err.strip()
    assert (
        len(error.splitlines()) == 1 and "decomposes Hangul" in error and "--notokenizer" in error
    )
    assert not os.path.exists(preset_dir)
    assert convert(["export-keras-hub", source, preset_dir, "--notokenizer"]) == 0
    assert _files(preset_dir) == {"config.json", "metadata.json", "model.weights.h5"}
    keras_hub.models.ElectraBackbone.from_preset(preset_dir)
    # A backbone alone needs its vocabulary and casing from the command line.
    capsys.readouterr()
    assert convert(["import-keras-hub", preset_dir, str(tmp_path / "a")]) == 2
    assert "pass --vocab_file" in capsys.readouterr().err
    back = str(tmp_path / "b")
    assert (
        convert(
            ["import-keras-hub", preset_dir, back, f"--vocab_file={vocab}", "--do_lower_case=false"]
        )
        == 0
    )
    assert PretrainingConfig.load_json(os.path.join(back, "config.json")).do_lower_case is False


# --- a preset keras-hub wrote itself --------------------------------------------------------


@pytest.fixture(scope="module")
def imported_fixture(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("from-keras-hub") / "run")
    assert convert(["import-keras-hub", FIXTURE, run_dir]) == 0
    return run_dir


def test_a_preset_keras_hub_wrote_imports_with_its_outputs_and_tokens(imported_fixture):
    run_dir = imported_fixture
    config = PretrainingConfig.load_json(os.path.join(run_dir, "config.json"))
    # tokenizer.json: lowercase=True, strip_accents=False (keras-hub's default).
    assert (config.do_lower_case, config.resolved_strip_accents) == (True, False)
    assert config.model.hidden_size == 16 and config.model.embedding_size == 8
    assert config.model.max_position_embeddings == 32
    ids, mask, segments = _inputs(config.model.vocab_size)
    valid = mask.astype(bool)
    ours = _our_output(run_dir, ids, mask, segments)
    with_exact = _keras_hub_output(FIXTURE, ids, mask, segments, exact_gelu=True)
    np.testing.assert_allclose(ours[valid], with_exact[valid], atol=1e-5)
    theirs = _keras_hub_output(FIXTURE, ids, mask, segments)
    assert 0 < np.abs(ours - theirs)[valid].max() < 2e-2
    tokenizer = WordPieceTokenizer(
        os.path.join(run_dir, "vocab.txt"),
        config.do_lower_case,
        config.strip_accents,
        config.normalization,
    )
    reference = keras_hub.models.ElectraTokenizer.from_preset(FIXTURE)
    texts = list(khf.MIXED_SAMPLE) + ["THE Café at the HOTEL, 서울에서 만나요!"]
    for text, ids in zip(texts, tokenizer.tokenize_to_lists(texts)):
        assert np.asarray(reference(text)).tolist() == ids, text


def test_an_imported_preset_exports_like_any_run(imported_fixture, tmp_path):
    hf_dir = str(tmp_path / "hf")
    assert convert(["export-hf", imported_fixture, hf_dir]) == 0
    assert os.path.isfile(os.path.join(hf_dir, "model.safetensors"))
    again = str(tmp_path / "again")
    assert convert(["export-keras-hub", imported_fixture, again]) == 0
    before = keras_hub.models.ElectraBackbone.from_preset(FIXTURE)
    after = keras_hub.models.ElectraBackbone.from_preset(again)
    for a, b in zip(before.weights, after.weights):
        assert a.path == b.path
        if not a.path.startswith("pooled_dense/"):
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


@pytest.mark.slow
def test_an_imported_preset_fine_tunes(imported_fixture, tmp_path):
    rows = toy_sentences(16)
    train = tmp_path / "train.tsv"
    train.write_text("text\tlabel\n" + "".join(f"{t}\t{label}\n" for t, label in rows))
    out = tmp_path / "ft"
    command = [
        sys.executable,
        os.path.join(ROOT, "finetune.py"),
        f"--init_checkpoint={imported_fixture}",
        f"--train_file={train}",
        f"--dev_file={train}",
        f"--output_dir={out}",
        "--num_train_epochs=1",
        "--max_seq_length=16",
        "--save_models=false",
    ]
    env = {**os.environ, "PYTHONPATH": ROOT}
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    with open(out / "results.json") as f:
        assert "accuracy" in json.load(f)["median"]


# --- refusals -------------------------------------------------------------------------------


def _broken_copy(tmp_path, name, edit):
    directory = str(tmp_path / name)
    shutil.copytree(FIXTURE, directory)
    edit(directory)
    return directory


def _edit_json(path, change):
    with open(path) as f:
        value = json.load(f)
    change(value)
    with open(path, "w") as f:
        json.dump(value, f)


@pytest.mark.parametrize(
    "name,edit,message",
    [
        (
            "bert",
            lambda d: _edit_json(
                os.path.join(d, "config.json"),
                lambda c: c.update(registered_name="keras_hub>BertBackbone"),
            ),
            "a preset of keras_hub>BertBackbone, not keras_hub>ElectraBackbone",
        ),
        (
            "hf",
            lambda d: _edit_json(
                os.path.join(d, "config.json"),
                lambda c: (c.pop("registered_name"), c.update(model_type="bert")),
            ),
            "a preset of Hugging Face bert",
        ),
        ("no-weights", lambda d: os.remove(os.path.join(d, "model.weights.h5")), "missing"),
        ("no-config", lambda d: os.remove(os.path.join(d, "config.json")), "missing"),
        (
            "sharded",
            lambda d: os.replace(
                os.path.join(d, "model.weights.h5"), os.path.join(d, "model.weights.json")
            ),
            "sharded weights, model.weights.json, are not read",
        ),
        (
            "no-vocab",
            lambda d: os.remove(os.path.join(d, "assets", "tokenizer", "vocabulary.txt")),
            "vocabulary.txt: missing",
        ),
        (
            "huge",
            lambda d: _edit_json(
                os.path.join(d, "config.json"),
                lambda c: c["config"].update(vocab_size=10**9),
            ),
            "the files do not belong together",
        ),
        (
            "heads",
            lambda d: _edit_json(
                os.path.join(d, "config.json"), lambda c: c["config"].update(num_heads=3)
            ),
            "not a multiple of num_heads 3",
        ),
        (
            "tokenizer",
            lambda d: _edit_json(
                os.path.join(d, "tokenizer.json"),
                lambda c: c.update(registered_name="keras_hub>BertTokenizer"),
            ),
            "not keras_hub>ElectraTokenizer",
        ),
    ],
)
def test_bad_presets_are_refused_with_one_line(tmp_path, capsys, name, edit, message):
    preset_dir = _broken_copy(tmp_path, name, edit)
    capsys.readouterr()
    assert convert(["import-keras-hub", preset_dir, str(tmp_path / "run")]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1, error
    assert message in error and error.startswith("error: ")
    assert not os.path.exists(tmp_path / "run" / "config.json")


def test_export_refuses_a_directory_that_is_not_empty_and_what_is_not_a_run(
    run_and_preset, tmp_path, capsys
):
    run_dir, _, preset_dir = run_and_preset
    before = _files(preset_dir)
    capsys.readouterr()
    assert convert(["export-keras-hub", run_dir, preset_dir]) == 2
    assert "is not empty" in capsys.readouterr().err
    assert _files(preset_dir) == before
    assert convert(["export-keras-hub", FIXTURE, str(tmp_path / "x")]) == 2
    assert "not a checkpoint electra-tf can read" in capsys.readouterr().err
    assert convert(["import-keras-hub", run_dir, str(tmp_path / "y"), "--notokenizer"]) == 2
    assert "--tokenizer is not a flag of import-keras-hub" in capsys.readouterr().err


def test_without_keras_hub_the_command_says_so_in_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "keras_hub", None)  # `import keras_hub` now fails
    capsys.readouterr()
    assert convert(["import-keras-hub", FIXTURE, str(tmp_path / "r")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: keras-hub is not installed; it reads and writes keras-hub presets: "
        f"pip install keras-hub=={khp.KERAS_HUB_VERSION} (or pip install 'electra-tf[keras-hub]')."
    ]
    assert not os.path.exists(tmp_path / "r")


@pytest.mark.slow
def test_the_library_and_the_command_import_without_keras_hub(tmp_path):
    script = (
        "import sys; sys.modules['keras_hub'] = None\n"
        "import electra_tf, electra_tf.interop.keras_hub_preset, electra_tf.commands.convert\n"
        "from electra_tf.interop import checkpoints\n"
        "print('imported')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["imported"]
