"""Exercises for appendix A2, making it fast: bytes per token, the ceiling, int8 rows, the decode layout."""
from __future__ import annotations

import torch

from gpt2_course.grading.questions import Case, Exercise, Question, calls, planted, randn, value

Tensor = torch.Tensor
PARAMS, WPE, HEAD = 124_439_808, 1024 * 768, 50257 * 768  # gpt2 (124M): all, its position table, wte
BYTES = 4 * (PARAMS - WPE)  # float32 weights one decode step reads
COPY = 20e9  # bytes per second, as copy_bandwidth counts them


def quantize_rows(w: Tensor, *, per_row: bool = True, top: int = 127, magnitude: bool = True,
                  rounding: bool = True, clamp: bool = True) -> tuple[Tensor, Tensor]:
    """Int8Linear's quantization: one scale per output row, the row's largest |w| becomes 127; a row of
    zeros keeps a tiny scale, as in Int8Linear, so it quantizes to 0 instead of 0 / 0 = NaN. The keyword
    switches are the planted mistakes' (signed_max is left as a learner writes it, without the clamp)."""
    m = w.abs() if magnitude else w
    top_w = m.amax(dim=1) if per_row else m.max()
    scale = (top_w.clamp(min=1e-12) if clamp else top_w) / top
    q = w / (scale[:, None] if per_row else scale)
    return (q.round() if rounding else q).to(torch.int8), scale


@planted("Use one scale per output row (w.abs().amax(dim=1)), not one for the whole matrix: a row of small "
         "weights would then use only a few of the 255 levels.")
def per_tensor(w: Tensor) -> tuple[Tensor, Tensor]:
    return quantize_rows(w, per_row=False)


@planted("Round to the nearest integer first: .to(torch.int8) cuts the fraction off, towards zero.")
def truncate(w: Tensor) -> tuple[Tensor, Tensor]:
    return quantize_rows(w, rounding=False)


@planted("Divide by 127: the largest |w| of a row must land on 127, the largest int8; 128 does not fit.")
def by_128(w: Tensor) -> tuple[Tensor, Tensor]:
    return quantize_rows(w, top=128)


@planted("Scale by the row's largest |w| (w.abs()), not its largest w: a row whose biggest weight is "
         "negative would not fit in -127..127.")
def signed_max(w: Tensor) -> tuple[Tensor, Tensor]:
    return quantize_rows(w, magnitude=False, clamp=False)


@planted("A row of zeros needs its scale clamped before the division (scale.clamp(min=1e-12) / 127, as "
         "Int8Linear does): an unclamped scale of 0 gives 0 / 0 = NaN, whose cast to int8 is undefined.")
def no_clamp(w: Tensor) -> tuple[Tensor, Tensor]:
    return quantize_rows(w, clamp=False)


def _zero_row_scale(f: object) -> float:
    """The scale the answer gives a row of zeros, in units of 1e-12 / 127: 1 when it is clamped."""
    scale = torch.as_tensor(f(_zero_row(randn(2, 4, 8), 1))[1]).flatten()
    return float(scale[1] if scale.numel() > 1 else scale[0]) * 127 / 1e-12  # per row, or one for all


def _zero_row(w: Tensor, row: int) -> Tensor:
    w[row] = 0
    return w


def _w_label(w: Tensor) -> str:
    return f"w {list(w.shape)}" + (", a row of zeros" if (w == 0).all(1).any() else "")


def decode_layout(w: Tensor) -> Tensor:
    """decode_layout_ for one matrix [out, in]: by columns if out >= in, else by rows."""
    return w.t().contiguous().t() if w.size(0) >= w.size(1) else w.contiguous()


@planted("Only a matrix with out >= in goes by columns; one like mlp.c_proj [C, 4C] has its longer side "
         "along its rows: keep it row-major.")
def always_columns(w: Tensor) -> Tensor:
    return w.t().contiguous().t()


@planted("The other way round: the longer side must be the contiguous one, so [out, in] with out >= in is "
         "stored by columns.")
def reversed_rule(w: Tensor) -> Tensor:
    return w.contiguous() if w.size(0) >= w.size(1) else w.t().contiguous().t()


@planted("Keep the shape [out, in]: transpose, copy with .contiguous(), then transpose back. Only the "
         "strides may change.")
def transposed(w: Tensor) -> Tensor:
    return w.t().contiguous() if w.size(0) >= w.size(1) else w.contiguous()


@planted("A square matrix (out == in) goes by columns too, as decode_layout_ stores attn.c_proj.")
def square_rows(w: Tensor) -> Tensor:
    return w.t().contiguous().t() if w.size(0) > w.size(1) else w.contiguous()


@planted("The matrix is still stored row by row: one with out >= in must be stored by columns, "
         "w.t().contiguous().t().")
def unchanged(w: Tensor) -> Tensor:
    return w


def _layout_cases() -> list[Case]:
    """The answer's output and its strides: the strides are the point of the question."""
    def run(f, shape: tuple[int, int], seed: int):
        out = f(randn(seed, *shape))
        return tuple(out.stride()), out

    return [Case(f"w {list(shape)}", lambda f, shape=shape, seed=seed: run(f, shape, seed))
            for seed, shape in enumerate([(6, 2), (2, 6), (3, 3)])]


EXERCISE = Exercise("A2_making_it_fast", "Making it fast", [
    value("gpt2_bytes", "q1", 1, BYTES, {
        "params": (PARAMS - WPE, "That counts parameters: every float32 parameter is 4 bytes."),
        "with_wpe": (4 * PARAMS, "A decode step reads one row of the position table wpe, not all of it: "
                     "leave wpe out."),
        "untied": (BYTES + 4 * HEAD, "The output head is wte itself (tied weights): its bytes count once."),
    }),
    value("ceiling", "q2", 1, COPY / BYTES, {
        "params": (COPY / (PARAMS - WPE), "Divide bytes per second by bytes per token, not by parameters: "
                   "each float32 weight is 4 bytes."),
        "with_wpe": (COPY / (4 * PARAMS), "A decode step reads one row of wpe, not the whole table."),
        "bf16": (COPY / (BYTES / 2), "The weights are float32, 4 bytes each; 2 bytes would be bf16."),
    }, rtol=2e-3),  # three significant digits of 40.4...: a relative error up to 1.3e-3
    Question("q3", "quantize_rows", 3, quantize_rows,
             cases=lambda: [*calls(lambda: [(randn(0, 6, 4),), (randn(1, 3, 8) * 5,)], label=_w_label)(),
                            Case("w [4, 8], a row of zeros: its scale, over 1e-12 / 127", _zero_row_scale),
                            *calls(lambda: [(_zero_row(randn(2, 4, 8), 1),)], label=_w_label)()],
             mistakes=[per_tensor, truncate, by_128, signed_max, no_clamp]),
    Question("q4", "decode_layout", 2, decode_layout, cases=_layout_cases,
             mistakes=[always_columns, reversed_rule, transposed, square_rows, unchanged]),
])
