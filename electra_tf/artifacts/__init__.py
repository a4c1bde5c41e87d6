"""Everything electra-tf writes to disk, and how a path a user gives is resolved.

Every other module asks these for paths, file names and schemas instead of
joining them itself.

* `run_dir`: a pre-training run directory (config, vocabulary, checkpoints,
  TensorBoard, metrics.jsonl, result.json, export/).
* `export_dir`: a pre-trained model's export directory, and writing it.
* `pretrained`: from a run directory, export directory or `.keras` file to
  its config, vocabulary and models.
* `finetuning_dir`: a fine-tuning output directory, its `trial_<k>/`
  directories and the best trial.
* `results`: the schema of a fine-tuning run's results.json (and the older
  schemas, still read).
* `serving_dir`: TF Serving's `<base>/<name>/<version>/` directories, published
  atomically.
* `files`: atomic writes.
"""
