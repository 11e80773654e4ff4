"""Atomic, self-describing outputs, one concern a module:

    destinations.py  what each stage writes (output kinds) and which paths it may write
    locks.py         one writer per output: the lock beside an output, claim_output
    atomic.py        outputs built aside and renamed into place, signals deferred across the renames
    diskfull.py      a full disk or quota, told apart from other errors and named in one line
    io.py            Parquet and JSON with their provenance, read back with checks
    integrity.py     SHA-256 records of large files, whole or sampled

Every stage writes to a temporary name beside its destination and renames it into place
when complete (as KenLM does with its "incomplete" marker), so an interrupted or failed
stage never leaves a file or directory that a later stage would accept. Parquet files
carry their provenance as JSON in the schema metadata (as Hugging Face `datasets` does).
"""
