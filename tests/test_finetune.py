"""Chapter 11: tasks as text with a loss mask, the verse-or-prose task, a classification head,
fine-tuning, and the stored results' check."""
from __future__ import annotations

import json

import pytest
import torch

import gpt2_course.finetune as ft
from gpt2_course.config import GPT2Config
from gpt2_course.data import EOT_TOKEN_ID, VALIDATION_PLAYS, tiktoken_gpt2
from gpt2_course.fingerprint import save_results
from gpt2_course.model import GPT2


@pytest.fixture(scope="module")
def tiny() -> GPT2:
    """GPT-2's vocabulary, a very small body: fast enough to train in a test."""
    torch.manual_seed(0)
    return GPT2(GPT2Config(n_ctx=64, n_embd=32, n_layer=2, n_head=2)).eval()


@pytest.fixture(scope="module")
def splits():
    return ft.task_splits()


def test_encode_example_marks_where_the_answer_starts():
    enc = tiktoken_gpt2()
    ids, n_prompt = ft.encode_example("To be, or not to be" + ft.QUESTION, " verse")
    assert ids[:n_prompt] == enc.encode_ordinary("To be, or not to be" + ft.QUESTION)
    assert ids[n_prompt:] == [enc.encode_single_token(" verse"), EOT_TOKEN_ID]
    with pytest.raises(ValueError, match="non-empty"):
        ft.encode_example("", " verse")


def test_masked_targets_keep_only_the_answer():
    ids, n_prompt = ft.encode_example("Who's there?" + ft.QUESTION, " prose")
    x, y = ft.masked_targets(ids, n_prompt)
    assert x == ids[:-1] and len(y) == len(x)
    assert y[: n_prompt - 1] == [ft.IGNORE] * (n_prompt - 1)
    assert y[n_prompt - 1 :] == ids[n_prompt:]  # the answer and <|endoftext|>, each a target
    for bad in (0, len(ids)):
        with pytest.raises(ValueError, match="n_prompt"):
            ft.masked_targets(ids, bad)


def test_collate_pads_inputs_with_eot_and_targets_with_ignore():
    rows = [([1, 2, 3], [ft.IGNORE, 3, 4]), ([5], [6])]
    x, y = ft.collate(rows)
    assert x.tolist() == [[1, 2, 3], [5, EOT_TOKEN_ID, EOT_TOKEN_ID]]
    assert y.tolist() == [[ft.IGNORE, 3, 4], [6, ft.IGNORE, ft.IGNORE]]


def test_hidden_states_times_wte_are_the_logits(tiny):
    idx = torch.randint(50257, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(ft.hidden_states(tiny, idx) @ tiny.wte.weight.T, tiny(idx))


def test_answer_loss_equals_the_masked_full_loss(tiny):
    rows = [ft.masked_targets(*ft.encode_example(p, a)) for p, a in
            [("O Romeo, Romeo!" + ft.QUESTION, " verse"), ("Sir, a word." + ft.QUESTION, " prose and more")]]
    x, y = ft.collate(rows)
    with torch.no_grad():
        torch.testing.assert_close(ft.answer_loss(tiny, x, y), tiny(x, y)[1])


def test_line_form_reads_the_layout():
    assert ft.line_form(["Now is the winter", "Made glorious summer", "'Tis so"]) == 0
    assert ft.line_form(["I have of late lost all", "my mirth, forgone all", "Custom"]) == 1


def test_task_is_split_by_play_without_leaks(splits):
    train, val = splits
    assert {p.play for p in val} == set(VALIDATION_PLAYS)
    assert not {p.play for p in train} & set(VALIDATION_PLAYS)
    assert not {p.text for p in train} & {p.text for p in val}
    assert all("\n" not in p.text and p.label in (0, 1) for p in train + val)
    assert 0 < sum(p.label for p in val) < len(val)  # both classes are held out


def test_classifier_reads_the_last_real_position(tiny):
    torch.manual_seed(0)
    clf = ft.SequenceClassifier(tiny, 3).eval()
    idx = torch.randint(50257, (1, 6), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        short = clf(idx[:, :4], torch.tensor([4]))
        padded = clf(idx, torch.tensor([4]))  # two tokens of padding after the real ones
        longer = clf(idx, torch.tensor([6]))
        direct = clf.head(ft.hidden_states(tiny, idx[:, :4])[:, -1])
    assert short.shape == (1, 3)
    torch.testing.assert_close(short, padded)
    torch.testing.assert_close(short, direct)
    assert not torch.allclose(short, longer)


def test_fit_head_learns_a_separable_problem():
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(2, (64,), generator=g)
    feats = torch.randn(64, 5, generator=g)
    feats[:, 2] = (2 * labels - 1) * (0.5 + feats[:, 2].abs())  # the classes apart along one axis
    head = ft.fit_head(feats, labels, 2)
    assert ft.accuracy(head(feats), labels) == 1.0


def test_finetune_lowers_the_loss_and_records_a_curve(tiny, splits):
    train = splits[0][:32]
    model = GPT2(tiny.config)
    model.load_state_dict(tiny.state_dict())
    c = ft.FinetuneConfig(steps=4, batch_size=8, lr=1e-2, eval_every=2)
    curve = ft.finetune(model, ft.text_loss, train, lambda m: ft.text_loss(m, train).item(), c)
    assert [s for s, _ in curve] == [0, 2, 4]
    assert curve[-1][1] < curve[0][1]


def test_load_results_refuses_stale_results(tmp_path):
    """Results made with other settings, or by a module whose source has changed since, are refused
    with the part that changed and the command that remakes them."""
    config, data = ft.result_inputs(ft.FinetuneConfig())
    path = tmp_path / "results.json"
    save_results(path, {"n_val": 1}, {**config, "finetune": {**config["finetune"], "steps": 1}}, data)
    with pytest.raises(ValueError, match="another config .*python -m gpt2_course.finetune"):
        ft.load_results(path)
    save_results(path, {"n_val": 1}, config, data)
    assert ft.load_results(path)["n_val"] == 1
    stored = json.loads(path.read_text())
    stored["fingerprint"]["modules"]["gpt2_course.model"] = "0" * 64  # as if model.py had been edited since
    path.write_text(json.dumps(stored))
    with pytest.raises(ValueError, match="module gpt2_course.model"):
        ft.load_results(path)


def test_stored_results_match_this_checkout():
    """chapters/results/11_finetune.json was made by today's code, data, weights and config."""
    results = ft.load_results(ft.RESULTS)
    assert results["n_val"] == len(ft.task_splits()[1])
    assert set(results["runs"]) == {"text, pretrained", "head, pretrained", "head, random init"}
