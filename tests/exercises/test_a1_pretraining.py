"""Pretraining (A1_pretraining): a learner-style wrong answer for every planted mistake of its bank,
gpt2_course/exercises/a1_pretraining.py, and other forms learners write that must get the same hint."""
from planted import planted_tests

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

test_covered, test_hints, test_distinct = planted_tests("A1_pretraining", PLANTED)
