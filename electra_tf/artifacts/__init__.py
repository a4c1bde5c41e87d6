"""Everything electra-tf writes to disk, and how a path given by a user resolves.

* `export_dir`: the export directory of a pre-trained model.
"""
