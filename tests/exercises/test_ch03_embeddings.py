"""Embeddings (03_embeddings): a learner-style wrong answer for every planted mistake of its bank,
gpt2_course/exercises/ch03_embeddings.py, and other forms learners write that must get the same
hint."""
from planted import define, planted_tests

from gpt2_course.grading import check_answer

PLANTED = {
    ("q1", "with_head"): "embedding_params = 2 * 50257 * 768 + 1024 * 768",
    ("q1", "wte_only"): "embedding_params = 50257 * 768",
    ("q2", "integer"): """
def one_hot(ids, vocab_size):
    return F.one_hot(ids, vocab_size)""",
    ("q3", "dtype"): """
def embed_matmul(ids, weight):
    return F.one_hot(ids, weight.shape[0]) @ weight""",
    ("q3", "transposed"): """
def embed_matmul(ids, weight):
    return F.one_hot(ids, weight.shape[0]).to(weight.dtype) @ weight.T""",
    ("q4", "by_token"): """
def input_embeddings(idx, wte, wpe):
    return wte[idx] + wpe[idx]""",
    ("q4", "concat"): """
def input_embeddings(idx, wte, wpe):
    pos = wpe[:idx.shape[1]].unsqueeze(0).expand(idx.shape[0], -1, -1)
    return torch.cat((wte[idx], pos), dim=2)""",
    ("q4", "from_one"): """
def input_embeddings(idx, wte, wpe):
    return wte[idx] + wpe[1:idx.shape[1] + 1]""",
    ("q4", "no_positions"): """
def input_embeddings(idx, wte, wpe):
    return wte[idx]""",
}

test_covered, test_hints, test_distinct = planted_tests("03_embeddings", PLANTED)


def test_a_one_hot_written_by_hand_passes():
    """Every case's ids lie below vocab_size (the contract: ids of a vocabulary), so an answer that
    builds the rows itself passes; F.one_hot's error on an id out of range is no expected output."""
    for code in ("def one_hot(ids, vocab_size):\n    return torch.eye(vocab_size)[ids]",
                 "def one_hot(ids, vocab_size):\n    z = torch.zeros(*ids.shape, vocab_size)\n"
                 "    return z.scatter(-1, ids[..., None], 1.0)"):
        result = check_answer("03_embeddings", "q2", define(code)["one_hot"])
        assert result.status == "pass", (code, result)
