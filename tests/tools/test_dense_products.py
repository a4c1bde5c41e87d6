"""tools/dense_products.py: the request's products, timed on what they claim to compute."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tools import dense_products

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO_ROOT, "tools", "dense_products.py")


def test_small_request_shapes_are_the_papers_small_model():
    # ELECTRA-Small (paper Table 6): embeddings 128, hidden 256, FFN 1024, 12 layers; a
    # classifier head of one dense layer onto 2 classes. QKV is one fused [256, 768] kernel.
    layer = [(256, 768), (256, 256), (256, 1024), (1024, 256)]
    assert dense_products.request_shapes("small") == [(128, 256), *layer * 12, (256, 2)]


def test_flops_count_multiply_adds_twice():
    # 3 rows through [4, 5] and [5, 2]: 3 * (20 + 10) multiply-adds.
    assert dense_products.product_flops([(4, 5), (5, 2)], 3) == 180


def test_tensorflow_worker_computes_the_products_numpy_does():
    shapes = [(8, 4), (4, 3)]
    inputs, weights = dense_products.operands(shapes, 5)
    assert [x.shape for x in inputs] == [(5, 8), (5, 4)]
    assert [w.shape for w in weights] == [(8, 4), (4, 3)]
    again, _ = dense_products.operands(shapes, 5)
    np.testing.assert_array_equal(inputs[1], again[1])  # the same operands in every process
    # threads=0: TensorFlow may already run in this process, with its threads fixed.
    _, results, _ = dense_products.SETUPS["tensorflow"](inputs, weights, 0)
    for y, x, w in zip(results(), inputs, weights):
        np.testing.assert_allclose(y, x.astype(np.float64) @ w.astype(np.float64), atol=1e-5)
    result = dense_products.time_products("tensorflow", shapes, tokens=5, threads=0, repeats=3)
    assert result["products"] == 2
    assert result["max_abs_error_vs_numpy"] < 1e-5
    assert result["median_ms"] > 0


def test_worker_runs_without_the_project():
    # A peer's interpreter has neither electra_tf nor this repository on its path.
    command = [
        sys.executable,
        "-I",
        "-c",
        "import runpy, sys; sys.modules['electra_tf'] = None; "
        f"sys.argv = [{SCRIPT!r}, '--worker', '--backend=tensorflow', '--shapes=[[6, 2]]', "
        "'--tokens=3', '--threads=1', '--repeats=2']; runpy.run_path(sys.argv[0], run_name='__main__')",
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=os.path.dirname(SCRIPT))
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["backend"] == "tensorflow"
    assert report["products"] == 1
    assert report["max_abs_error_vs_numpy"] < 1e-5


@pytest.mark.parametrize(
    "argv, named",
    [
        (["--tokens=0"], "--tokens=0"),
        (["--threads=-1"], "--threads=-1"),
        (["--worker"], "--worker"),
    ],
)
def test_bad_flags_are_named(argv, named, capsys):
    with pytest.raises(SystemExit) as exit_info:
        dense_products.main(argv)
    assert exit_info.value.code == 2
    assert named in capsys.readouterr().err
