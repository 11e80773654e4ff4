"""The format markers of groc's directories, each in the "format" field of its marker file
(a dataset's manifest.json, a run's config.json, a states dump's meta.json). Declared here
once, in a module that imports nothing, so that light modules (settings, the run listing) can
recognise a directory without loading what reads it; each format itself belongs to its
reader and writer (text/dataset.py, run_storage.py, evaluation/states.py)."""

DATASET_FORMAT = "groc-dataset"
RUN_FORMAT = "groc-run"
STATES_FORMAT = "groc-states"
