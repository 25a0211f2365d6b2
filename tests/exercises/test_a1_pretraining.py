"""Pretraining (A1_pretraining): a learner-style wrong answer for every planted mistake of its bank,
gpt2_course/exercises/a1_pretraining.py, and other forms learners write that must get the same hint."""
import torch
from planted import planted_tests, solution_answers

from gpt2_course.grading import check_answer, get_exercise

PLANTED = {
    ("q1", "linear"): """
def lr_at(step, warmup, max_steps, max_lr, min_lr):
    if step < warmup:
        return max_lr * (step + 1) / warmup
    return max_lr - (max_lr - min_lr) * (step - warmup) / (max_steps - warmup)""",
    ("q1", "no_half"): """
def lr_at(step, warmup, max_steps, max_lr, min_lr):
    if step < warmup:
        return max_lr * (step + 1) / warmup
    t = (step - warmup) / (max_steps - warmup)
    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * t))""",
    ("q1", "progress_all"): """
def lr_at(step, warmup, max_steps, max_lr, min_lr):
    if step < warmup:
        return max_lr * (step + 1) / warmup
    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * step / max_steps)) / 2""",
    ("q1", "to_zero"): """
def lr_at(step, warmup, max_steps, max_lr, min_lr):
    if step < warmup:
        return max_lr * (step + 1) / warmup
    t = (step - warmup) / (max_steps - warmup)
    return max_lr * (1 + math.cos(math.pi * t)) / 2""",
    ("q1", "warmup_from_zero"): """
def lr_at(step, warmup, max_steps, max_lr, min_lr):
    if step < warmup:
        return max_lr * step / warmup
    t = (step - warmup) / (max_steps - warmup)
    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * t)) / 2""",
    ("q2", "misses_last"): """
def random_windows(data, batch_size, n_ctx, generator):
    ix = torch.randint(len(data) - n_ctx - 1, (batch_size,), generator=generator)
    return (torch.stack([data[i:i + n_ctx] for i in ix]),
            torch.stack([data[i + 1:i + n_ctx + 1] for i in ix]))""",
    ("q2", "global_rng"): """
def random_windows(data, batch_size, n_ctx, generator):
    ix = torch.randint(len(data) - n_ctx, (batch_size,))
    return (torch.stack([data[i:i + n_ctx] for i in ix]),
            torch.stack([data[i + 1:i + n_ctx + 1] for i in ix]))""",
    ("q2", "no_shift"): """
def random_windows(data, batch_size, n_ctx, generator):
    ix = torch.randint(len(data) - n_ctx, (batch_size,), generator=generator)
    x = torch.stack([data[i:i + n_ctx] for i in ix])
    return x, x.clone()""",
    ("q2", "overflow"): """
def random_windows(data, batch_size, n_ctx, generator):
    ix = torch.randint(len(data) - n_ctx + 1, (batch_size,), generator=generator)
    return (torch.stack([data[i:i + n_ctx] for i in ix]),
            torch.stack([data[i + 1:i + n_ctx + 1] for i in ix]))""",
    ("q2", "same_start"): """
def random_windows(data, batch_size, n_ctx, generator):
    i = int(torch.randint(len(data) - n_ctx, (1,), generator=generator))
    x = data[i:i + n_ctx].repeat(batch_size, 1)
    y = data[i + 1:i + n_ctx + 1].repeat(batch_size, 1)
    return x, y""",
    ("q3", "always"): """
def clip_grad_norm(grads, max_norm):
    norm = torch.cat([g.flatten() for g in grads]).norm()
    return [g * (max_norm / norm) for g in grads]""",
    ("q3", "l1"): """
def clip_grad_norm(grads, max_norm):
    norm = sum(g.abs().sum() for g in grads)
    return [g * max_norm / norm if norm > max_norm else g for g in grads]""",
    ("q3", "zero_norm"): """
def clip_grad_norm(grads, max_norm):
    norm = torch.sqrt(sum((g**2).sum() for g in grads))
    scale = min(1.0, max_norm / norm.item())
    return [g * scale for g in grads]""",
    ("q3", "per_tensor"): """
def clip_grad_norm(grads, max_norm):
    return [g * min(1, max_norm / g.norm().item()) for g in grads]""",
    ("q4", "all"): """
def decay_param_names(model):
    return sorted(dict(model.named_parameters()))""",
    ("q4", "by_name"): """
def decay_param_names(model):
    return sorted(n for n, _ in model.named_parameters() if "weight" in n)""",
    ("q4", "inverted"): """
def decay_param_names(model):
    return sorted(n for n, p in model.named_parameters() if p.ndim == 1)""",
    ("q5", "chained"): """
import re
def rename(text, mapping):
    for old, new in mapping.items():
        text = re.sub(rf"\\b{old}\\b", new, text)
        text = re.sub(rf"\\b{old.title()}\\b", new.title(), text)
    return text""",
    ("q5", "empty_mapping"): """
import re
def rename(text, mapping):
    table = {**mapping, **{k.title(): v.title() for k, v in mapping.items()}}
    return re.sub(r"\\b(" + "|".join(table) + r")\\b", lambda m: table[m.group(1)], text)""",
    ("q5", "substring"): """
def rename(text, mapping):
    table = {**mapping, **{k.title(): v.title() for k, v in mapping.items()}}
    out, i = "", 0
    while i < len(text):
        hit = next((k for k in table if text.startswith(k, i)), None)
        out, i = (out + table[hit], i + len(hit)) if hit else (out + text[i], i + 1)
    return out""",
    ("q5", "upper_only"): """
import re
def rename(text, mapping):
    return re.sub(r"\\b[A-Z]+\\b", lambda m: mapping.get(m.group(), m.group()), text)""",
}

# Other forms of the same mistakes, as they meet all-zero gradients or an empty mapping: a float norm
# (max_norm / 0.0 raises), a tensor norm (0 * inf = NaN), torch's max_norm / (norm + 1e-6) (zeros).
ALSO = {
    ("q3", "always"): ["""
def clip_grad_norm(grads, max_norm):
    norm = math.sqrt(sum((g**2).sum().item() for g in grads))
    return [g * max_norm / norm for g in grads]""", """
def clip_grad_norm(grads, max_norm):
    norm = torch.cat([g.flatten() for g in grads]).norm()
    return [g * (max_norm / (norm + 1e-6)) for g in grads]"""],
    ("q3", "per_tensor"): ["""
def clip_grad_norm(grads, max_norm):
    return [g * torch.clamp(max_norm / g.norm(), max=1.0) for g in grads]"""],
    ("q3", "l1"): ["""
def clip_grad_norm(grads, max_norm):
    norm = sum(g.abs().sum().item() for g in grads)
    return [g * min(1.0, max_norm / norm) for g in grads]"""],
    ("q5", "substring"): ["""
import re
def rename(text, mapping):
    table = {**mapping, **{k.title(): v.title() for k, v in mapping.items()}}
    return re.sub("|".join(table), lambda m: table[m.group()], text)"""],
    ("q5", "upper_only"): ["""
import re
def rename(text, mapping):
    return re.sub(r"\\b(" + "|".join(mapping) + r")\\b", lambda m: mapping[m.group(1)], text)"""],
}

test_covered, test_hints, test_distinct = planted_tests("A1_pretraining", PLANTED, ALSO)


def test_clipping_all_zero_gradients_returns_them_unchanged():
    """The checks hand clip_grad_norm gradients whose norm is 0: the bank's reference and the course's
    solution return them as they are (no max_norm / 0), and the solution passes every case."""
    q = get_exercise("A1_pretraining").question("q3")
    assert any("all-zero" in c.label for c in q.cases())
    solution = solution_answers("A1_pretraining")["clip_grad_norm"]
    for clip in (solution, q.reference):
        out = clip([torch.zeros(3), torch.zeros(2, 2)], 1.0)
        assert [t.tolist() for t in out] == [[0.0] * 3, [[0.0] * 2] * 2], clip
    assert check_answer("A1_pretraining", "q3", solution).status == "pass"


def test_renaming_with_an_empty_mapping_leaves_the_text():
    q = get_exercise("A1_pretraining").question("q5")
    assert any(c.label == "the scene with {}" for c in q.cases())
    solution = solution_answers("A1_pretraining")["rename"]
    for rename in (solution, q.reference):
        assert rename("ROMEO:\nJuliet!\n", {}) == "ROMEO:\nJuliet!\n", rename
    assert check_answer("A1_pretraining", "q5", solution).status == "pass"
