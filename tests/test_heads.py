"""Chapter 6's gpt2_course.heads: the fixed passage that chapters 4, 6 and 7 measure the model on."""
from __future__ import annotations

import torch

from gpt2_course.attention import ROLE_T, ROLE_WINDOWS
from gpt2_course.data import token_ids
from gpt2_course.heads import merge_heads, role_windows, split_heads


def test_role_windows_spread_evenly_from_the_first_to_the_last_validation_token() -> None:
    ids = torch.from_numpy(token_ids("validation").astype("int64"))
    windows = role_windows()
    assert windows.shape == (ROLE_WINDOWS, ROLE_T) and windows.dtype == torch.int64
    assert torch.equal(windows[0], ids[:ROLE_T]) and torch.equal(windows[-1], ids[-ROLE_T:])
    flat = ids.unfold(0, ROLE_T, 1)  # every window of ROLE_T tokens, by its start
    starts = [int((flat == w).all(-1).nonzero()[0]) for w in windows]
    gaps = torch.tensor(starts).diff()
    assert (gaps > 0).all() and gaps.max() - gaps.min() <= 1  # evenly spaced, to the token
    assert torch.equal(role_windows(), windows)  # the same passage every time


def test_merge_heads_undoes_split_heads() -> None:
    x = torch.randn(2, 5, 12)
    assert split_heads(x, 3).shape == (2, 3, 5, 4)
    assert torch.equal(merge_heads(split_heads(x, 3)), x)
