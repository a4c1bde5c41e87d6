"""The package installs with pip, imports lightly and registers its Keras classes on demand."""

import os
import subprocess
import sys

import keras
import pytest

from electra_tf.config import preset
from electra_tf.modeling.electra import build_generator_and_discriminator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code, cwd, pythonpath):
    env = {**os.environ, "PYTHONPATH": pythonpath}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_a_saved_discriminator_loads_with_the_package_s_classes_registered(tmp_path):
    config = preset(
        "tiny", vocab_size=20, hidden_size=32, num_layers=1, embedding_size=16, num_heads=2
    )
    _, discriminator = build_generator_and_discriminator(config.model)
    discriminator.save(tmp_path / "discriminator.keras")
    for code in (
        "import electra_tf\nmodel = electra_tf.load_model('discriminator.keras')\n",
        "import electra_tf, keras\nelectra_tf.register_keras_classes()\n"
        "model = keras.saving.load_model('discriminator.keras')\n",
    ):
        done = run_python(
            code + "print(type(model).__name__, model.encoder.hidden_size)",
            cwd=tmp_path,
            pythonpath=ROOT,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split()[-2:] == ["ElectraDiscriminator", "32"]
    # Without the registration, Keras cannot find the class (what it is for).
    done = run_python(
        "import electra_tf, keras\nkeras.saving.load_model('discriminator.keras')",
        cwd=tmp_path,
        pythonpath=ROOT,
    )
    assert done.returncode != 0 and "ElectraDiscriminator" in done.stderr


@pytest.mark.parametrize(
    "code",
    [
        "import sys, time\nstart = time.perf_counter()\nimport electra_tf\n"
        "print(time.perf_counter() - start)",
        "import runpy, sys, time\nstart = time.perf_counter()\nsys.argv = ['electra-tf']\n"
        "from electra_tf.__main__ import main\nmain([])\nprint(time.perf_counter() - start)",
        "import runpy, sys, time\nstart = time.perf_counter()\n"
        "from electra_tf.__main__ import main\nmain(['--help'])\nprint(time.perf_counter() - start)",
    ],
    ids=["import", "listing", "help"],
)
def test_the_package_and_its_listing_load_no_tensorflow(code, tmp_path):
    done = run_python(
        code + "\nprint(sorted(m for m in ('tensorflow', 'keras', 'numpy') if m in sys.modules))",
        cwd=tmp_path,
        pythonpath=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no TensorFlow log lines
    *_, seconds, loaded = done.stdout.strip().splitlines()
    assert loaded == "[]" and float(seconds) < 1.0


def test_importing_the_package_changes_no_process_state(tmp_path):
    # Environment, __main__ and the process itself are as they were: the
    # import only defines (and so registers) classes.
    code = (
        "import os, sys\n"
        "env, doc, argv, pid = dict(os.environ), sys.modules['__main__'].__doc__, "
        "list(sys.argv), os.getpid()\n"
        "import electra_tf\n"
        "changed = sorted(k for k in set(env) | set(os.environ) if env.get(k) != os.environ.get(k))\n"
        "print(changed, sys.modules['__main__'].__doc__ == doc, sys.argv == argv, "
        "os.getpid() == pid)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TF_CPP")}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "PYTHONPATH": ROOT},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "[] True True True"


def test_every_keras_class_of_the_package_is_registered_under_its_own_name():
    import importlib
    import inspect
    import pkgutil

    from keras.optimizers.schedules import LearningRateSchedule

    import electra_tf

    classes = set()
    for module in pkgutil.walk_packages(electra_tf.__path__, "electra_tf."):
        if module.name.startswith(("electra_tf.commands", "electra_tf.data.beam")):
            continue  # command modules define absl flags; Beam is an optional extra
        for _, obj in inspect.getmembers(importlib.import_module(module.name), inspect.isclass):
            if (
                obj.__module__ == module.name
                and not obj.__name__.startswith("_")
                and issubclass(obj, (keras.layers.Layer, LearningRateSchedule))
            ):
                classes.add(obj)
    # Not saved on its own: the pre-training-only GDES layer (an export holds a plain table).
    classes -= {electra_tf.modeling.layers.DisentangledEmbeddings}
    names = {cls.__name__ for cls in classes}
    assert {"ElectraPretrainer", "ElectraDiscriminator"} <= names
    unregistered = sorted(
        cls.__name__
        for cls in classes
        if keras.saving.get_registered_object(f"electra_tf>{cls.__name__}") is not cls
    )
    assert unregistered == []


def test_pip_installs_every_module_and_the_commands(tmp_path):
    site = tmp_path / "site"
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            f"--target={site}",
            ROOT,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if install.returncode and "setuptools" in install.stderr:
        pytest.skip(f"this environment cannot build the package offline: {install.stderr[-300:]}")
    assert install.returncode == 0, install.stderr
    # From outside the source tree, only the installed copy is importable.
    # Each command defines its flags at import: one command per process.
    for command in ("pretrain", "finetune"):
        done = run_python(
            f"import electra_tf, electra_tf.commands.{command}, "
            "electra_tf.modeling.kernels.cpu_fast, electra_tf.artifacts.results, "
            "electra_tf.serving.standalone\n"
            "print(electra_tf.__file__)",
            cwd=tmp_path,
            pythonpath=str(site),
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().startswith(str(site))
    # The research tools stay in the repository: neither they nor their peers are installed.
    # (tf2onnx's wheel puts a `tools` folder of its own scripts into site-packages: only a
    # `tools` found in this installation counts.)
    done = run_python(
        "import importlib.util as u\n"
        "def here(m):\n"
        "    spec = u.find_spec(m)\n"
        "    places = [spec.origin or '', *(spec.submodule_search_locations or [])] if spec else []\n"
        f"    return any(p.startswith({str(site)!r}) for p in places)\n"
        "print([m for m in ('tools', 'electra_tf.study', 'electra_tf.benchmark', "
        "'electra_tf.parity', 'electra_tf.huge_pages', 'electra_tf.serving.latency') "
        "if here(m)])",
        cwd=tmp_path,
        pythonpath=str(site),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]"]
    assert not list(site.rglob("peers")) and not (site / "tools").exists()
    entry_points = next(site.glob("electra_tf-*.dist-info")) / "entry_points.txt"
    scripts = entry_points.read_text()
    assert "electra-tf = electra_tf.__main__:main" in scripts
    assert "electra-pretrain = electra_tf.commands.pretrain:run" in scripts
    assert "electra-finetune = electra_tf.commands.finetune:run" in scripts
