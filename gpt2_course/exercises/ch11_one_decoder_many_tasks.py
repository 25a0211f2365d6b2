"""Exercises for chapter 11, one decoder, many tasks: the loss mask on the answer, a task
example as tokens, a classification head's forward pass, and a rule that reads only the surface."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gpt2_course.data import EOT_TOKEN_ID, tiktoken_gpt2
from gpt2_course.finetune import IGNORE, encode_example, masked_targets, mid_capitals
from gpt2_course.grading.questions import Case, Exercise, Question, planted, randn

Tensor = torch.Tensor


def _as_tensors(f: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    """Call an answer and compare the lists it returns as tensors (a learner may return either)."""
    return tuple(part if isinstance(part, int) else torch.as_tensor(part) for part in f(*args))


# --- q1: the loss mask -------------------------------------------------------------------------

@planted("Off by one: you also masked the target of the last prompt position, which is the first "
         "token of the answer. The prompt's n_prompt tokens are the targets of only n_prompt - 1 "
         "positions (targets are the ids shifted by one).")
def masks_answer_start(ids: list[int], n_prompt: int) -> tuple[list[int], list[int]]:
    return ids[:-1], [IGNORE] * n_prompt + ids[n_prompt + 1:]


@planted("The mask is inverted: you kept the prompt's targets and ignored the answer. The loss "
         "should be taken on the answer (and the closing <|endoftext|>) only.")
def inverted(ids: list[int], n_prompt: int) -> tuple[list[int], list[int]]:
    return ids[:-1], ids[1:n_prompt] + [IGNORE] * (len(ids) - n_prompt)


@planted("Masked targets were set to 0, which is a real token id ('!'): the loss would teach the "
         "model to predict it. Use -100, the value F.cross_entropy ignores.")
def zero_fill(ids: list[int], n_prompt: int) -> tuple[list[int], list[int]]:
    return ids[:-1], [0] * (n_prompt - 1) + ids[n_prompt:]


@planted("The targets are not shifted: position t must predict token t + 1, so the targets are "
         "ids[1:], not ids[:-1].")
def no_shift(ids: list[int], n_prompt: int) -> tuple[list[int], list[int]]:
    return ids[:-1], [IGNORE] * n_prompt + ids[n_prompt:-1]


def _mask_cases() -> list[Case]:
    examples = [("Who's there?\nVerse or prose?", " prose"), ("English: The king is here.\nFrench:",
                " Le roi est ici."), ("A\nTL;DR:", " B")]
    encoded = [(p, a, encode_example(p, a)) for p, a in examples]  # here: encode_example is q2's answer
    return [Case(f"masked_targets(*encode_example({p!r}, {a!r}))",
                 lambda f, ex=ex: _as_tensors(f, list(ex[0]), ex[1])) for p, a, ex in encoded]


# --- q2: formatting an example ----------------------------------------------------------------

@planted("The sequence does not end with <|endoftext|> (id 50256): without it, a fine-tuned model "
         "never learns where its answer stops.")
def no_eot(prompt: str, answer: str) -> tuple[list[int], int]:
    enc = tiktoken_gpt2()
    p = enc.encode_ordinary(prompt)
    return p + enc.encode_ordinary(answer), len(p)


@planted("The second value must count the prompt's tokens only, not the whole sequence: it says "
         "where the answer starts.")
def counts_all(prompt: str, answer: str) -> tuple[list[int], int]:
    ids = encode_example(prompt, answer)[0]
    return ids, len(ids)


@planted("<|endoftext|> goes at the end, after the answer: it marks where the answer stops.")
def eot_first(prompt: str, answer: str) -> tuple[list[int], int]:
    enc = tiktoken_gpt2()
    p = enc.encode_ordinary(prompt)
    return [EOT_TOKEN_ID] + p + enc.encode_ordinary(answer), len(p) + 1


def _format_cases() -> list[Case]:
    examples = [("Now, fair Hippolyta, our nuptial hour Draws on apace;", " verse"),
                ("Sir, a word with you.", " prose")]
    question = "\nVerse or prose?"
    return [Case(f"format_example({text + question!r}, {answer!r})",
                 lambda f, prompt=text + question, answer=answer: _as_tensors(f, prompt, answer))
            for text, answer in examples]


def format_example(prompt: str, answer: str) -> tuple[list[int], int]:
    return encode_example(prompt, answer)


# --- q3: a classification head's forward pass ------------------------------------------------

def classify(hidden: Tensor, lengths: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    last = hidden[torch.arange(hidden.size(0)), lengths - 1]  # [B, C]
    return last @ weight.T + bias


@planted("You read the last position of the padded batch, hidden[:, -1]: for a shorter row that is "
         "padding. Take each row's own last real position, lengths - 1.")
def padded_last(hidden: Tensor, lengths: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    return hidden[:, -1] @ weight.T + bias


@planted("Off by one: position lengths is the first padding position. The last real token of a row "
         "of length n sits at index n - 1.")
def one_past(hidden: Tensor, lengths: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    return hidden[torch.arange(hidden.size(0)), lengths] @ weight.T + bias


@planted("You averaged over every position, padding included. The head reads one vector per row: "
         "the hidden state at its last real position, the only one that has seen the whole prompt.")
def mean_pool(hidden: Tensor, lengths: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    return hidden.mean(1) @ weight.T + bias


@planted("You read the first position: under the causal mask it has seen only the first token. Read "
         "the last real position, lengths - 1.")
def first(hidden: Tensor, lengths: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    return hidden[:, 0] @ weight.T + bias


def _head_args() -> list[tuple[Any, ...]]:
    return [(randn(0, 3, 5, 4), torch.tensor([2, 4, 3]), randn(1, 2, 4), randn(2, 2)),
            (randn(3, 2, 6, 8), torch.tensor([1, 4]), randn(4, 3, 8), randn(5, 3))]


def _head_cases() -> list[Case]:
    return [Case(f"hidden {list(h.shape)}, lengths {n.tolist()}, weight {list(w.shape)}",
                 lambda f, a=(h, n, w, b): f(*(t.clone() for t in a))) for h, n, w, b in _head_args()]


# --- q4: a rule that reads only the surface -------------------------------------------------

_SENTENCE_END = (".", "!", "?", ":")


def _word(w: str) -> str:
    return w.strip(".,;:!?'\"-")


@planted("You counted the first word too. It starts with a capital because a sentence starts there, in "
         "verse and prose alike; count from the second word on.")
def counts_first(text: str) -> int:
    words = text.split()
    return sum(w[0].isupper() and _word(w) not in ("I", "O")
               and not (i > 0 and words[i - 1].endswith(_SENTENCE_END)) for i, w in enumerate(words))


@planted("'I' and 'O' are capitals wherever they stand, in prose too: leave them out.")
def keeps_i_and_o(text: str) -> int:
    words = text.split()
    return sum(w[0].isupper() and not prev.endswith(_SENTENCE_END) for prev, w in zip(words, words[1:]))


@planted("You also counted words after . ! ? or :, where a new sentence starts with a capital in prose "
         "as well. Only capitals where no sentence starts tell verse from prose.")
def counts_sentence_starts(text: str) -> int:
    words = text.split()
    return sum(w[0].isupper() and _word(w) not in ("I", "O") for w in words[1:])


@planted("You counted capital letters, not words that start with one.")
def counts_letters(text: str) -> int:
    return sum(ch.isupper() for ch in text)


def _capital_cases() -> list[Case]:
    texts = ["Now, fair Hippolyta, our nuptial hour Draws on apace",
             "O me, I am slain. Help! Who comes here? My Lord",
             "Give me thy hand: I am sorry I beat thee. But, thou knowest, Sir",
             "Speak: Thou art here, I, O! Come Lord Romeo"]  # I, and O! stay excluded; ':' ends a sentence
    return [Case(f"mid_capitals({t!r})", lambda f, t=t: int(f(t))) for t in texts]


EXERCISE = Exercise("11_one_decoder_many_tasks", "One decoder, many tasks", [
    Question("q1", "masked_targets", 2, masked_targets,
             cases=_mask_cases, course=(masked_targets,),
             mistakes=[masks_answer_start, inverted, zero_fill, no_shift]),
    Question("q2", "format_example", 2, format_example, cases=_format_cases, course=(encode_example,),
             mistakes=[no_eot, counts_all, eot_first]),
    Question("q3", "classify", 3, classify, cases=_head_cases,
             mistakes=[padded_last, one_past, mean_pool, first]),
    Question("q4", "mid_capitals", 2, mid_capitals, cases=_capital_cases, course=(mid_capitals,),
             mistakes=[counts_first, keeps_i_and_o, counts_sentence_starts, counts_letters]),
])
