"""Exercises for appendix A1, pretraining: the schedule, batches, clipping, weight decay, renaming."""
from __future__ import annotations

import math
import re
from typing import Any

import torch
import torch.nn as nn

from gpt2_course.grading.questions import Case, Exercise, Mistake, Question, gen, planted, randn
from gpt2_course.train import TrainConfig, get_batch, lr_at, rename

Tensor = torch.Tensor


def lr_schedule(step: int, warmup: int, max_steps: int, max_lr: float, min_lr: float) -> float:
    """The package's lr_at, with the question's arguments."""
    return lr_at(step, TrainConfig(warmup=warmup, steps=max_steps, lr=max_lr, min_lr=min_lr))


def _cosine(step: int, warmup: int, max_steps: int, max_lr: float, min_lr: float, ramp: int = 1,
            progress: float | None = None, half: float = 0.5) -> float:
    if step < warmup:
        return max_lr * (step + ramp) / warmup
    t = (step - warmup) / max(1, max_steps - warmup) if progress is None else progress
    return min_lr + half * (max_lr - min_lr) * (1 + math.cos(math.pi * t))


@planted("The warm-up starts at 0, so step 0 trains with learning rate 0: ramp as max_lr * (step + 1) / "
         "warmup.")
def warmup_from_zero(step: int, warmup: int, max_steps: int, max_lr: float, min_lr: float) -> float:
    return _cosine(step, warmup, max_steps, max_lr, min_lr, ramp=0)


@planted("The cosine must end at min_lr, not 0: min_lr + 0.5 (max_lr - min_lr) (1 + cos(pi * progress)).")
def to_zero(step: int, warmup: int, max_steps: int, max_lr: float, min_lr: float) -> float:
    return _cosine(step, warmup, max_steps, max_lr, 0.0)


@planted("The cosine's progress counts the steps after the warm-up: (step - warmup) / (max_steps - warmup).")
def progress_all(step: int, warmup: int, max_steps: int, max_lr: float, min_lr: float) -> float:
    return _cosine(step, warmup, max_steps, max_lr, min_lr, progress=step / max_steps)


@planted("(1 + cos) runs from 2 to 0: multiply by 0.5, or the rate starts at twice max_lr.")
def no_half(step: int, warmup: int, max_steps: int, max_lr: float, min_lr: float) -> float:
    return _cosine(step, warmup, max_steps, max_lr, min_lr, half=1.0)


@planted("That decays linearly: the schedule follows half a cosine.")
def linear(step: int, warmup: int, max_steps: int, max_lr: float, min_lr: float) -> float:
    if step < warmup:
        return max_lr * (step + 1) / warmup
    return min_lr + (max_lr - min_lr) * (1 - (step - warmup) / max(1, max_steps - warmup))


def _lr_cases() -> list[Case]:
    configs = [(10, 100, 1e-3, 1e-4), (4, 20, 6e-4, 6e-5), (1, 8, 2e-3, 0.0)]
    return [Case(f"warmup={w}, max_steps={m}, max_lr={hi}, min_lr={lo}: steps 0..{m - 1}",
                 lambda f, c=(w, m, hi, lo): tuple(float(f(s, *c)) for s in range(c[1])))
            for w, m, hi, lo in configs]


def _windows(data: Tensor, batch_size: int, n_ctx: int, starts: Tensor,
             shift: int = 1) -> tuple[Tensor, Tensor]:
    rows = torch.stack([data[s : s + n_ctx + 1] for s in starts.tolist()])
    return rows[:, :-1], rows[:, shift : shift + n_ctx]


@planted("y must be x shifted by one position (the next token of every position): take a window of "
         "n_ctx + 1 tokens, x = row[:-1], y = row[1:].")
def no_shift(data: Tensor, batch_size: int, n_ctx: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    starts = torch.randint(len(data) - n_ctx, (batch_size,), generator=generator)
    return _windows(data, batch_size, n_ctx, starts, shift=0)


@planted("Every row of the batch starts at the same place: draw batch_size start positions, one per row.")
def same_start(data: Tensor, batch_size: int, n_ctx: int,
               generator: torch.Generator) -> tuple[Tensor, Tensor]:
    start = torch.randint(len(data) - n_ctx, (1,), generator=generator)
    return _windows(data, batch_size, n_ctx, start.expand(batch_size))


@planted("Same seed, different batch: pass generator=generator to torch.randint, so that a run can be "
         "reproduced.")
def global_rng(data: Tensor, batch_size: int, n_ctx: int,
               generator: torch.Generator) -> tuple[Tensor, Tensor]:
    return _windows(data, batch_size, n_ctx, torch.randint(len(data) - n_ctx, (batch_size,)))


@planted("The last window never comes: torch.randint's high is exclusive, and the last window starts at "
         "len(data) - n_ctx - 1, so draw starts below len(data) - n_ctx, not len(data) - n_ctx - 1.")
def misses_last(data: Tensor, batch_size: int, n_ctx: int,
                generator: torch.Generator) -> tuple[Tensor, Tensor]:
    starts = torch.randint(len(data) - n_ctx - 1, (batch_size,), generator=generator)
    return _windows(data, batch_size, n_ctx, starts)


def _window_cases() -> list[Case]:
    data, B, n = torch.arange(50), 16, 8

    def draw(f: Any, seed: int) -> tuple[Tensor, Tensor]:
        x, y = f(data.clone(), B, n, gen(seed))
        return torch.as_tensor(x), torch.as_tensor(y)

    def inside(f: Any) -> bool:
        for seed in range(40):
            x, y = draw(f, seed)
            if x.min() < 0 or y.max() >= len(data) or x.shape != (B, n) or y.shape != (B, n):
                return False
        return True

    def shapes(f: Any) -> tuple[Any, ...]:
        return tuple(tuple(t.shape) for t in draw(f, 0))

    def offsets(f: Any) -> tuple[int, ...]:
        x, y = draw(f, 1)
        return tuple(sorted(set((y - x).flatten().tolist())))

    def contiguous(f: Any) -> bool:
        return bool((draw(f, 2)[0].diff(dim=1) == 1).all())

    def last_start(f: Any) -> int:  # 40 batches of 16 draw every one of the 42 starts (seeds fixed)
        return max(int(draw(f, seed)[0][:, 0].max()) for seed in range(40))

    def varied(f: Any) -> bool:
        return len(set(draw(f, 3)[0][:, 0].tolist())) > 1

    def reproducible(f: Any) -> bool:
        return all(torch.equal(a, b) for a, b in zip(draw(f, 4), draw(f, 4), strict=True))

    return [
        Case("shapes of x and y for batch_size 16, n_ctx 8", shapes),
        Case("y - x (y must be x shifted by one position)", offsets),
        Case("each row of x is a contiguous window of the data", contiguous),
        Case("every window lies inside the data (40 batches)", inside),
        Case("the largest start drawn in 40 batches (the last window must be possible)", last_start),
        Case("the rows of a batch start at different places", varied),
        Case("the same generator seed gives the same batch", reproducible),
    ]


def _l2(grads: list[Tensor]) -> float:
    return math.sqrt(sum(float((g**2).sum()) for g in grads))


def clip_grad_norm(grads: list[Tensor], max_norm: float) -> list[Tensor]:
    """min(1, max_norm / norm) without its division by zero: all-zero gradients come back as they are."""
    return [g * (max_norm / max(_l2(grads), max_norm)) for g in grads]


def _tensor_norm(grads: list[Tensor], max_norm: float) -> list[Tensor]:
    """`always` with a tensor norm: all-zero gradients give 0 * inf = NaN."""
    norm = torch.tensor(_l2(grads), dtype=torch.float64)
    return [g * (max_norm / norm) for g in grads]


@planted("You clipped each gradient separately. The norm is global: the square root of the sum of "
         "squares over *all* gradients, one scale for all.",
         also=(lambda grads, max_norm: [g * min(1.0, max_norm / _l2([g])) for g in grads],))
def per_tensor(grads: list[Tensor], max_norm: float) -> list[Tensor]:
    return [clip_grad_norm([g], max_norm)[0] for g in grads]


@planted("Small gradients were scaled up: only scale when the total norm exceeds max_norm.",
         also=(_tensor_norm, lambda grads, max_norm: [g * (max_norm / (_l2(grads) + 1e-6)) for g in grads]))
def always(grads: list[Tensor], max_norm: float) -> list[Tensor]:
    norm = _l2(grads)
    return [g * (max_norm / norm) for g in grads]


def _l1(grads: list[Tensor]) -> float:
    return sum(float(g.abs().sum()) for g in grads)


@planted("That is the L1 norm (sum of absolute values): use the L2 norm, sqrt(sum of squares).",
         also=(lambda grads, max_norm: [g * min(1.0, max_norm / _l1(grads)) for g in grads],))
def l1(grads: list[Tensor], max_norm: float) -> list[Tensor]:
    return [g * (max_norm / max(_l1(grads), max_norm)) for g in grads]


zero_norm = Mistake("zero_norm", "All-zero gradients have norm 0, so max_norm / norm divides by zero. "
                    "Their norm does not exceed max_norm: they come back unchanged. Scale by "
                    "max_norm / max(norm, max_norm), or divide only when norm > max_norm.",
                    error=r"division by zero")


def _clip_cases() -> list[Case]:
    specs = [([(3, 4), (5,), (2, 2)], 1.0, 1), ([(3, 4), (5,)], 100.0, 2), ([(6,)], 0.5, 3),
             ([(2, 3), (4,)], 2.0, 4)]

    def run(f: Any, shapes: list[tuple[int, ...]], max_norm: float, seed: int) -> tuple[Any, ...]:
        grads = [randn(seed * 10 + i, *s) for i, s in enumerate(shapes)]
        return tuple(f(grads, max_norm))

    def zeros(f: Any) -> tuple[Any, ...]:
        return tuple(f([torch.zeros(3, 4, dtype=torch.float64), torch.zeros(5, dtype=torch.float64)], 1.0))

    return [*(Case(f"{len(s)} gradients {s}, max_norm {m}", lambda f, s=s, m=m, seed=seed: run(f, s, m, seed))
              for s, m, seed in specs),
            Case("2 all-zero gradients [(3, 4), (5,)], max_norm 1.0 (norm 0)", zeros)]


def decay_param_names(model: nn.Module) -> list[str]:
    return sorted(n for n, p in model.named_parameters() if p.dim() >= 2)


@planted("Weight decay on everything also shrinks biases and layer-norm gains towards 0: decay only the "
         "matrices (tensors with 2 or more dimensions).", name="all")
def decay_all(model: nn.Module) -> list[str]:
    return sorted(n for n, _ in model.named_parameters())


@planted("Inverted: decay the matrices (dim >= 2), not the biases and gains.")
def inverted(model: nn.Module) -> list[str]:
    return sorted(n for n, p in model.named_parameters() if p.dim() < 2)


@planted("Names ending in 'weight' include the layer norms' gains (1-D): decide by the tensor's "
         "dimension, p.dim() >= 2.")
def by_name(model: nn.Module) -> list[str]:
    return sorted(n for n, _ in model.named_parameters() if n.endswith("weight"))


def _decay_cases() -> list[Case]:
    def model() -> nn.Module:
        from gpt2_course.config import GPT2Config
        from gpt2_course.model import GPT2

        torch.manual_seed(0)
        return GPT2(GPT2Config(vocab_size=32, n_ctx=8, n_embd=8, n_layer=2, n_head=2))

    return [Case("a 2-layer GPT2", lambda f: tuple(sorted(f(model()))))]


def _rename_with(text: str, table: dict[str, str], bound: str = r"\b", guard: bool = True) -> str:
    """One regular expression over the names; without `guard`, an empty table's pattern matches the
    empty string and table[''] raises KeyError, as in an answer written without the check."""
    if guard and not table:
        return text
    pattern = bound + "(" + "|".join(map(re.escape, table)) + ")" + bound
    return re.sub(pattern, lambda m: table[m.group(1)], text)


def _titled(mapping: dict[str, str]) -> dict[str, str]:
    return {**mapping, **{old.title(): new.title() for old, new in mapping.items()}}


@planted("Names were renamed one after another, so a name produced by one replacement was replaced again "
         "by a later one (swap ROMEO and JULIET and both end up the same). Replace all names in one pass: "
         "one regular expression, and a function that looks each match up in the mapping.")
def chained(text: str, mapping: dict[str, str]) -> str:
    for old, new in _titled(mapping).items():
        text = re.sub(rf"\b{re.escape(old)}\b", new, text)
    return text


@planted("A name inside a longer word was replaced too (ADRIAN inside ADRIANA): match whole words only, "
         "with \\b on both sides of the pattern.",
         also=(lambda text, mapping: _rename_with(text, _titled(mapping), bound="", guard=False),))
def substring(text: str, mapping: dict[str, str]) -> str:
    return _rename_with(text, _titled(mapping), bound="")


@planted("The dialogue still says the old names: speakers are in capitals (ROMEO) but mentions are in "
         "title case (Romeo). Rename old.title() to new.title() as well.",
         also=(lambda text, mapping: _rename_with(text, dict(mapping), guard=False),))
def upper_only(text: str, mapping: dict[str, str]) -> str:
    return _rename_with(text, dict(mapping))


empty_mapping = Mistake("empty_mapping", "With an empty mapping there is nothing to rename, but the pattern "
                        "r'\\b()\\b' matches the empty string and mapping[''] raises KeyError: return the "
                        "text unchanged when the mapping is empty.", error=r"^''$")


def _rename_cases() -> list[Case]:
    scene = ("ROMEO:\nJuliet, my love! Adriana, fetch the Nurse.\n\nJULIET:\nRomeo, Romeo!\n\n"
             "ADRIANA:\nAy.\n\n[Exit ROMEO and JULIET]\n")
    swap = {"ROMEO": "JULIET", "JULIET": "ROMEO", "ADRIAN": "BRUTUS"}
    fresh = {"ROMEO": "ANTONY", "JULIET": "CLEOPATRA", "ADRIAN": "ROMEO"}
    return [Case(f"the scene with {m}", lambda f, m=m: f(scene, dict(m))) for m in (swap, fresh, {})]


EXERCISE = Exercise("A1_pretraining", "Pretraining", [
    Question("q1", "lr_at", 3, lr_schedule, cases=_lr_cases, rtol=1e-6, atol=1e-12, course=(lr_at,),
             mistakes=[warmup_from_zero, to_zero, progress_all, no_half, linear]),
    Question("q2", "random_windows", 3, get_batch, cases=_window_cases, course=(get_batch,), mistakes=[
        no_shift, same_start, global_rng, misses_last,
        Mistake("overflow", "A window ran past the end of the data: a start must leave room for "
                "n_ctx + 1 tokens, so draw starts below len(data) - n_ctx.",
                error=r"stack expects each tensor to be equal size|out of bounds|out of range"),
    ]),
    Question("q3", "clip_grad_norm", 2, clip_grad_norm, cases=_clip_cases,
             mistakes=[per_tensor, always, l1, zero_norm]),
    Question("q4", "decay_param_names", 2, decay_param_names, cases=_decay_cases,
             mistakes=[decay_all, inverted, by_name]),
    Question("q5", "rename", 2, rename, cases=_rename_cases, course=(rename,),
             mistakes=[chained, substring, upper_only, empty_mapping]),
])
