"""The chapter-1 bigram baseline."""
import math

import numpy as np
import pytest

from gpt2_course.bigram import BigramModel


def brute_force_prob(ids, a, b, lam, vocab):
    pairs = list(zip(ids[:-1], ids[1:]))
    row = sum(1 for x, _ in pairs if x == a)
    pair = sum(1 for x, y in pairs if (x, y) == (a, b))
    uni = (ids.count(b) + 1) / (len(ids) + vocab)
    if row == 0:
        return uni
    return lam * pair / row + (1 - lam) * uni


@pytest.mark.parametrize("lam", [0.0, 0.3, 1.0])
def test_probabilities_match_the_formula(lam):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 7, size=200).tolist()
    model = BigramModel(vocab_size=9, lam=lam).fit(ids)
    for a in range(9):  # 7 and 8 never occur: unigram fallback
        probs = model.next_token_probs(a)
        assert probs.sum() == pytest.approx(1.0)
        for b in range(9):
            assert probs[b] == pytest.approx(brute_force_prob(ids, a, b, lam, 9))


def test_cross_entropy_is_mean_negative_log_prob():
    ids = [0, 1, 0, 2, 0, 1, 1, 0]
    model = BigramModel(vocab_size=3, lam=0.5).fit(ids)
    test = [0, 1, 1, 2]
    expected = -np.mean([math.log(model.next_token_probs(a)[b]) for a, b in zip(test[:-1], test[1:])])
    assert model.cross_entropy(test) == pytest.approx(expected)


def test_sampling_is_seeded():
    model = BigramModel(vocab_size=5, lam=0.8).fit([0, 1, 2, 3, 4, 0, 2, 4])
    a = model.sample([0], 20, np.random.default_rng(3))
    b = model.sample([0], 20, np.random.default_rng(3))
    assert a == b and len(a) == 21


@pytest.mark.parametrize("bad", [[-1, 2], [1, 50], []])
def test_bad_token_ids_are_named(bad):
    model = BigramModel(vocab_size=50, lam=0.5).fit([1, 2, 3])
    with pytest.raises(ValueError, match="outside|non-empty"):
        model.cross_entropy(bad)


def test_lambda_out_of_range():
    with pytest.raises(ValueError, match=r"lam must be in \[0, 1\]"):
        BigramModel(lam=1.5)
