"""`python -m electra_tf.export`: a TF Serving version directory from any run.

    python -m electra_tf.export --checkpoint <run or trial dir> --export_base <dir> \\
        --model_name <name>

The checkpoint may be a fine-tuning output directory (its best trial is
exported), one trial directory, or a pre-training run (its export/ or latest
checkpoint); see `electra_tf.serving.exporter`.
"""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    """Parses the flags, exports, prints the version directory; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m electra_tf.export",
        description="Export a fine-tuning run (its best trial), one trial directory or a "
                    "pre-training run as <export_base>/<model_name>/<version>/ for TF Serving.")
    parser.add_argument("--checkpoint", required=True,
                        help="Fine-tuning output directory, trial_<k>/ directory, or pre-training "
                             "run directory (its export/ or latest checkpoint).")
    parser.add_argument("--export_base", required=True,
                        help="TF Serving's --model_base_path is <export_base>/<model_name>.")
    parser.add_argument("--model_name", required=True, help="TF Serving's --model_name.")
    parser.add_argument("--version", type=int, default=None,
                        help="Version number (default: one more than the highest present; an "
                             "existing version is never overwritten).")
    parser.add_argument("--max_seq_length", type=int, default=None,
                        help="Pre-training runs: raw-text truncation (default: the run's length).")
    args = parser.parse_args(argv)
    from electra_tf.artifacts.serving_dir import ExportLayoutError
    from electra_tf.serving.exporter import ExportError, export_checkpoint

    if not args.model_name or "/" in args.model_name or args.model_name.startswith("."):
        parser.error(f"--model_name={args.model_name!r}: must be a plain directory name.")
    try:
        version_dir = export_checkpoint(args.checkpoint, args.export_base, args.model_name,
                                        args.version, args.max_seq_length)
    except (ExportError, ExportLayoutError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(version_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
