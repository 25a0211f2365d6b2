"""One decoder, many tasks (11_one_decoder_many_tasks): a learner-style wrong answer for every
planted mistake of its bank, gpt2_course/exercises/ch11_one_decoder_many_tasks.py, and other forms
learners write that must get the same hint."""
from planted import planted_tests

ENC = "from gpt2_course import tiktoken_gpt2\nenc = tiktoken_gpt2()\n"

PLANTED = {
    ("q1", "inverted"): """
def masked_targets(ids, n_prompt):
    y = list(ids[1:])
    for i in range(n_prompt - 1, len(y)):
        y[i] = -100
    return ids[:-1], y""",
    ("q1", "masks_answer_start"): """
def masked_targets(ids, n_prompt):
    x = ids[:-1]
    y = [-100] * n_prompt + ids[n_prompt + 1:]
    return x, y""",
    ("q1", "no_shift"): """
def masked_targets(ids, n_prompt):
    x = ids[:-1]
    y = [-100 if i < n_prompt else t for i, t in enumerate(x)]
    return x, y""",
    ("q1", "zero_fill"): """
def masked_targets(ids, n_prompt):
    y = ids[1:]
    return ids[:-1], [0 for _ in range(n_prompt - 1)] + y[n_prompt - 1:]""",
    ("q2", "counts_all"): ENC + """
def format_example(prompt, answer):
    ids = enc.encode_ordinary(prompt) + enc.encode_ordinary(answer) + [50256]
    return ids, len(ids)""",
    ("q2", "eot_first"): ENC + """
def format_example(prompt, answer):
    p = [50256] + enc.encode_ordinary(prompt)
    return p + enc.encode_ordinary(answer), len(p)""",
    ("q2", "no_eot"): ENC + """
def format_example(prompt, answer):
    p = enc.encode_ordinary(prompt)
    return p + enc.encode_ordinary(answer), len(p)""",
    ("q3", "first"): """
def classify(hidden, lengths, weight, bias):
    return F.linear(hidden[:, 0, :], weight, bias)""",
    ("q3", "mean_pool"): """
def classify(hidden, lengths, weight, bias):
    return torch.nn.functional.linear(hidden.mean(dim=1), weight, bias)""",
    ("q3", "one_past"): """
def classify(hidden, lengths, weight, bias):
    idx = lengths
    return hidden[torch.arange(len(hidden)), idx] @ weight.T + bias""",
    ("q3", "padded_last"): """
def classify(hidden, lengths, weight, bias):
    return hidden[:, -1] @ weight.T + bias""",
    ("q4", "counts_first"): """
def mid_capitals(text):
    n, prev = 0, ""
    for w in text.split():
        mid = not prev.endswith((".", "!", "?", ":"))
        if w[0].isupper() and w.strip(".,;:!?'-") not in ("I", "O") and mid:
            n += 1
        prev = w
    return n""",
    ("q4", "keeps_i_and_o"): """
def mid_capitals(text):
    words = text.split()
    return sum(1 for a, b in zip(words, words[1:]) if b[0].isupper() and a[-1] not in ".!?:")""",
    ("q4", "counts_sentence_starts"): """
def mid_capitals(text):
    return len([w for w in text.split()[1:] if w[0].isupper() and w.strip(",.;:!?") not in ("I", "O")])""",
    ("q4", "counts_letters"): """
def mid_capitals(text):
    return len([c for c in text if c.isupper()])""",
}

ALSO = {
    ("q1", "zero_fill"): ["""
def masked_targets(ids, n_prompt):
    y = ids[1:]
    y[:n_prompt - 1] = [0] * (n_prompt - 1)
    return ids[:-1], y"""],
    ("q3", "padded_last"): ["""
def classify(hidden, lengths, weight, bias):
    return F.linear(hidden[:, hidden.shape[1] - 1], weight, bias)"""],
}

test_covered, test_hints, test_distinct = planted_tests("11_one_decoder_many_tasks", PLANTED, ALSO)
