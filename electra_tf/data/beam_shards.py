"""Raw text -> packed pre-training shards with Apache Beam, for corpora beyond one machine.

    python -m electra_tf.commands.beam_shards --corpus='gs://bucket/text/*.txt' \\
        --vocab_file=gs://bucket/vocab.txt --output_dir=gs://bucket/shards \\
        [--max_seq_length=128 --num_shards=N --seed=0 --do_lower_case=true
         --strip_accents=... --invalid_utf8=error --text_range=0,1] [Beam options]

Writes the same shards (byte for byte) and `metadata.json` as the local
builder, `electra_tf.data.shard_build.write_shards`: the launcher plans the work
exactly as the local builder does (`shard_build.plan_build`: arguments, output
directory, reusable shards, one line-aligned piece of text per shard), the
runner builds each remaining shard from its piece alone (`shard_writer.build_shard`,
one element per shard), and `metadata.json` is written from the collected
sidecars once all shards exist. Re-running the same command reuses finished
shards.

Arguments the command does not know go to Beam's `PipelineOptions`. Without
any, the pipeline runs on the DirectRunner on this machine
(`--direct_num_workers=2 --direct_running_mode=multi_processing` uses two
processes). `--runner=DataflowRunner --project=... --region=...
--temp_location=gs://...` runs it on Dataflow (install `apache-beam[gcp]`),
where inputs, vocabulary and output must be `gs://` paths and the workers
need this package: `--setup_file=./pyproject.toml` from the source tree
(needs `pip install build "setuptools>=68"` on the launcher; the workers then
install the dependencies at start), or `--sdk_container_image` with a
prebuilt image.

Needs the `beam` extra: `pip install "electra-tf[beam]"`.
"""

import logging
import os
import time
from typing import Callable, Optional, Sequence

_BEAM_MISSING = (
    'Apache Beam is not installed: pip install "electra-tf[beam]" (or pip install apache-beam)'
)

try:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
except ImportError as error:
    raise ImportError(_BEAM_MISSING) from error

# After the check above, so that a missing Beam is reported before TensorFlow loads.
from electra_tf import fileio  # noqa: E402
from electra_tf.data.shard_build import ShardPlan, plan_build, write_metadata  # noqa: E402
from electra_tf.data.shard_layout import ShardError, read_metadata  # noqa: E402
from electra_tf.data.shard_writer import build_shard, graph_tokenize  # noqa: E402
from electra_tf.tokenization import WordPieceTokenizer  # noqa: E402

logger = logging.getLogger(__name__)


class BuildShardFn(beam.DoFn):
    """Builds the shard of each job it receives and emits the shard's sidecar.

    Loading the vocabulary and tracing the tokenizer take about a second, so
    each worker does it once, in `setup`, for all the shards it builds.
    """

    def __init__(self, tokenizer_config: dict):
        self._tokenizer_config = tokenizer_config

    def setup(self):
        self._tokenizer = WordPieceTokenizer(**self._tokenizer_config)
        self._tokenize = graph_tokenize(self._tokenizer)

    def process(self, job: dict):
        sidecar = build_shard(job, self._tokenizer, self._tokenize)
        logger.info(
            "%s: %d examples from %.1f MB of text in %.1fs",
            sidecar["shard"],
            sidecar["num_examples"],
            sidecar["text_bytes"] / 1e6,
            sidecar["seconds"],
        )
        yield sidecar


def _write_metadata(sidecars: list[dict], plan: ShardPlan, started: float) -> None:
    # Wall-clock time: this step may run on another machine than the launcher.
    write_metadata(plan, sidecars, seconds=round(time.time() - started, 3))


def _check_paths_for_runner(options: PipelineOptions, paths: Sequence[str]) -> None:
    runner = str(options.view_as(StandardOptions).runner or "")
    local = [os.fspath(path) for path in paths if not fileio.is_url(os.fspath(path))]
    if "Dataflow" in runner and local:
        raise ShardError(
            f"--runner={runner}: the workers cannot read local paths such "
            f"as {local[0]!r}; put inputs, vocabulary and output on gs://"
        )


def write_shards(
    input_patterns: Sequence[str],
    output_dir: str,
    tokenizer_config: dict,
    *,
    pipeline_options: Optional[PipelineOptions] = None,
    progress: Optional[Callable[[str], None]] = None,
    **build_args,
) -> dict:
    """Builds the shards of `electra_tf.data.shard_build.write_shards` on Apache Beam.

    Returns when the pipeline has finished.

    Args:
        input_patterns, output_dir, tokenizer_config: as for
            `shard_build.write_shards`.
        pipeline_options: runner and its settings (default: DirectRunner).
        progress: called with short human-readable status lines.
        **build_args: `max_seq_length` and optionally `num_shards`, `seed`,
            `single_segment_prob`, `short_seq_prob`, `invalid_utf8`,
            `text_range`, as for `shard_build.write_shards`.

    Returns:
        The metadata written to `output_dir/metadata.json`.

    Raises:
        ShardError: bad arguments, inputs or output directory (found before
            the pipeline starts).
        VocabError: the vocabulary file is missing or malformed.
    """
    report = progress or (lambda message: None)
    options = pipeline_options or PipelineOptions([])
    if isinstance(input_patterns, str):
        input_patterns = [input_patterns]
    _check_paths_for_runner(options, [*input_patterns, output_dir, tokenizer_config["vocab_file"]])
    started = time.time()
    plan, _ = plan_build(
        input_patterns, output_dir, tokenizer_config, progress=report, **build_args
    )
    plan.announce(report, f"on Beam's {options.view_as(StandardOptions).runner or 'DirectRunner'}")

    with beam.Pipeline(options=options) as pipeline:
        _ = (
            pipeline
            | "Shards to build" >> beam.Create(plan.jobs)
            | "Build shards" >> beam.ParDo(BuildShardFn(plan.build["tokenizer_config"]))
            | "Collect sidecars" >> beam.combiners.ToList()
            | "Write metadata" >> beam.Map(_write_metadata, plan, started)
        )

    metadata = read_metadata(plan.output_dir)
    seconds = time.time() - started
    report(
        f"wrote {metadata['num_examples']:,} examples in {plan.num_shards} shard(s) to "
        f"{plan.output_dir} in {seconds:.1f}s"
        + (f" ({plan.todo_bytes / 1e6 / seconds:.1f} MB/s)" if plan.jobs else "")
        + (
            f"; replaced invalid UTF-8 in {metadata['replaced_lines']:,} line(s)"
            if metadata["replaced_lines"]
            else ""
        )
    )
    return metadata
