"""Language modeling (01_language_modeling): a learner-style wrong answer for every planted mistake of
its bank, gpt2_course/exercises/ch01_language_modeling.py, and other forms learners write that must
get the same hint."""
from planted import planted_tests

PLANTED = {
    ("q1", "bits"): "uniform_loss = math.log2(50257)",
    ("q1", "log10"): "uniform_loss = math.log10(50257)",
    ("q1", "perplexity"): "uniform_loss = 50257",
    ("q2", "inverse_mean"): "perplexity_by_hand = 1 / np.mean([.5, .25, .125, .5])",
    ("q2", "loss"): "perplexity_by_hand = -np.mean(np.log([.5, .25, .125, .5]))",
    ("q2", "mean_inverse"): "perplexity_by_hand = np.mean([2, 4, 8, 2])",
    ("q2", "sum"): "perplexity_by_hand = math.exp(-sum(np.log([.5, .25, .125, .5])))",
    ("q3", "fancy_index"): """
def bigram_counts(ids, vocab_size):
    c = np.zeros((vocab_size, vocab_size), dtype=int)
    c[ids[:-1], ids[1:]] += 1
    return c""",
    ("q3", "transposed"): """
def bigram_counts(ids, vocab_size):
    c = np.zeros((vocab_size, vocab_size), dtype=int)
    for a, b in zip(ids, ids[1:]):
        c[b][a] += 1
    return c""",
    ("q3", "wrap"): """
def bigram_counts(ids, vocab_size):
    c = np.zeros((vocab_size, vocab_size), dtype=int)
    for i in range(len(ids)):
        c[ids[i], ids[(i + 1) % len(ids)]] += 1
    return c""",
    ("q4", "column"): """
def next_token_probs(counts, token, lam, unigram):
    col = counts[:, token]
    if col.sum() == 0:
        return unigram
    return lam * col / col.sum() + (1 - lam) * unigram""",
    ("q4", "no_fallback"): """
def next_token_probs(counts, token, lam, unigram):
    with np.errstate(all="ignore"):
        return lam * counts[token] / counts[token].sum() + (1 - lam) * unigram""",
    ("q4", "swapped"): """
def next_token_probs(counts, token, lam, unigram):
    row = counts[token]
    if row.sum() == 0:
        return unigram
    return (1 - lam) * row / row.sum() + lam * unigram""",
    ("q5", "option_b"): "blind_spot = 'b'",
    ("q5", "option_c"): "blind_spot = 'C'",
    ("q5", "option_d"): "blind_spot = '(d)'",
}

test_covered, test_hints, test_distinct = planted_tests("01_language_modeling", PLANTED)
