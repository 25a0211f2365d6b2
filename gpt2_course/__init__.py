"""gpt2-course: GPT-2 built chapter by chapter.

Every module except this file, `cli.py` and `grading.py` is generated from the chapter
notebooks by `make export`. Names are imported lazily so that `import gpt2_course` stays
fast and a learner who has only reached chapter 3 can already use what chapters 1-3 built.

`gpt2_course.NAME` is the object `_EXPORTS` documents, whatever was imported before: the
modules `attention` and `generate` share their name with their main function, and the
function wins (`import gpt2_course.generate as m` gives the function too). Reach such a
module's other names with `from gpt2_course.generate import ...`.
`make check` (tools/check_api.py) fails when a name here is not defined in its module.
"""
from __future__ import annotations

import importlib
import sys
import types
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    # chapter 1: language modeling
    "list_plays": "data", "load_play": "data", "split_plays": "data", "token_ids": "data",
    "tiktoken_gpt2": "data", "VALIDATION_PLAYS": "data", "EOT_TOKEN_ID": "data",
    "BigramModel": "bigram",
    # chapter 2: byte-pair encoding
    "GPT2Tokenizer": "bpe",
    # chapters 3-8: the model
    "GPT2Config": "config",
    "attention": "attention", "attention_weights": "attention", "attention_heatmap": "plots",
    "causal_mask": "masking",
    "CausalSelfAttention": "heads", "split_heads": "heads", "merge_heads": "heads", "attention_maps": "heads",
    "MLP": "mlp", "gelu_tanh": "mlp",
    "Block": "model", "GPT2": "model",
    "load_model": "loading", "save_model": "loading", "course_model": "loading",
    "POCKET_DIR": "loading",
    # chapters 9-10
    "generate": "generate", "stream": "generate", "KVCache": "generate", "LayerCache": "generate",
    "generate_text": "generate", "sample_next": "generate",
    "top_k_filter": "generate", "top_p_filter": "generate",
    "count_parameters": "params", "parameter_breakdown": "params", "format_breakdown": "params",
    # appendix
    "TrainConfig": "train",
}

__all__ = sorted(_EXPORTS)


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        # `import gpt2_course.generate` ends with setattr(package, "generate", <module>), which
        # would shadow the function `generate` for every later read: keep the function.
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
