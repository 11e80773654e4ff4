"""One module per stage. SUMMARIES is each command's one-line help, in the order `groc --help`
lists them: the list is drawn from here without importing the command modules (and torch)."""

SUMMARIES = {
    "tokenize": "Moses-tokenize text (stdin to stdout by default), optionally lowercased, in parallel.",
    "prepare": "Build a dataset directory (Parquet splits, vocabulary with counts, manifest) from text.",
    "lexicon": "Build the WordNet feature table (relations, definitions) for a vocabulary.",
    "train": "Train a language model (lookup, tied, bilinear, deep-residual, adaptive, convolutional or groc output).",
    "finetune": "Finetune a trained run on a target-domain dataset (union vocabulary, 3 epochs by default).",
    "dump": "Dump hidden states, targets and model log-probs of a split for 'groc eval --states'.",
    "eval": "Perplexity of a trained model on a split, with open vocabulary and neural caches.",
    "score": "Score text line by line with a trained run (per-line log-prob, tokens, perplexity), streaming from a "
             "file or stdin.",
    "generate": "Sample text from a trained run, streamed one sample a line; GroC draws from any vocabulary "
                "chosen now (a word list or a dataset's), including words it never saw.",
    "compare": "Median loss difference per training-frequency bin between two 'groc eval --per-token' files (the "
               "GroC paper's Figure 3).",
    "runs": "A table of run directories: kind, parameters, dataset, epochs, stopping reason, validation and test "
            "perplexity, time; damaged or unfinished runs say so.",
    "plot": "Training curves of one or several runs as a PNG (loss per step, perplexity per epoch).",
}
