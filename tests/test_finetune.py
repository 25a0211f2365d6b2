"""Chapter 11: tasks as text with a loss mask, the verse-or-prose task, a classification head,
fine-tuning, and the stored results' check."""
from __future__ import annotations

import importlib

import pytest
import torch

from gpt2_course.config import GPT2Config
from gpt2_course.data import EOT_TOKEN_ID, VALIDATION_PLAYS, tiktoken_gpt2
from gpt2_course.model import GPT2

ft = importlib.import_module("gpt2_course.finetune")  # (gpt2_course.finetune is the function)


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


def test_finetune_lowers_the_loss(tiny, splits):
    train = splits[0][:32]
    model = GPT2(tiny.config)
    model.load_state_dict(tiny.state_dict())
    before = ft.text_loss(model, train).item()
    ft.finetune(model, ft.text_loss, train, steps=4, batch_size=8, lr=1e-2, seed=0)
    with torch.no_grad():
        assert ft.text_loss(model, train).item() < before
    assert not model.training


def test_every_layer_ends_with_the_usual_hidden_states(tiny):
    idx = torch.randint(50257, (2, 5), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        layers = ft.hidden_states(tiny, idx, every_layer=True)
        assert layers.shape == (tiny.config.n_layer + 1, 2, 5, tiny.config.n_embd)
        torch.testing.assert_close(layers[-1], ft.hidden_states(tiny, idx))
        torch.testing.assert_close(layers[0], tiny.ln_f(tiny.wte(idx) + tiny.wpe(torch.arange(5))))


def test_features_of_every_layer_end_with_the_features(tiny, splits):
    ps = splits[1][:5]
    every = ft.features(tiny, ps, every_layer=True, batch_size=2)
    assert every.shape == (tiny.config.n_layer + 1, 5, tiny.config.n_embd)
    torch.testing.assert_close(every[-1], ft.features(tiny, ps, batch_size=2))


def test_mid_capitals_count_capitals_where_no_sentence_starts():
    assert ft.mid_capitals("Now, fair Hippolyta, our nuptial hour Draws on apace") == 2
    assert ft.mid_capitals("I have of late lost all my mirth. Forgone all custom, O me") == 0
    assert ft.mid_capitals("Who's there? Nay, answer me: Stand") == 0


def test_surface_features_and_thresholds():
    ps = [ft.Passage("Short Line here", 0, "x"), ft.Passage("a much, much longer line; of prose.", 1, "x")]
    X = ft.surface_features(ps)
    assert X.shape == (2, 3) and X[0, 1] == 1 and X[1, 2] == 3
    t, sign = ft.fit_threshold(X[:, 0], ft.labels(ps))
    assert sign == 1 and X[0, 0] <= t < X[1, 0]
    t, sign = ft.fit_threshold(X[:, 1], ft.labels(ps))
    assert sign == -1 and X[1, 1] <= t < X[0, 1]


def test_bag_of_words_keeps_case_and_punctuation():
    X = ft.bag_of_words([ft.Passage("Draws draws, draws", 0, "x")], {"draws": 0, "Draws": 1, ",": 2, "x": 3})
    assert X.tolist() == [[2.0, 1.0, 1.0, 0.0]]


def test_fit_head_standardises_features_of_any_scale():
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(2, (64,), generator=g)
    feats = torch.randn(64, 3, generator=g)
    feats[:, 1] = 1e4 * (2 * labels - 1) * (0.5 + feats[:, 1].abs())  # far from unit scale
    assert ft.accuracy(ft.fit_head(feats, labels, 2)(feats), labels) == 1.0


def test_experiment_splits_choose_nothing_on_the_held_out_plays():
    from gpt2_course.finetune_runs import ExperimentConfig, experiment_splits, head_sample

    c = ExperimentConfig()
    s = experiment_splits(c)
    plays = {k: {p.play for p in v} for k, v in s.items()}
    assert plays["dev"] <= set(c.dev_plays) and not plays["fit"] & set(c.dev_plays)
    assert plays["test"] == set(VALIDATION_PLAYS) and not (plays["fit"] | plays["dev"]) & plays["test"]
    assert len(s["dev"]) == c.n_dev and len(s["test"]) == len(ft.task_splits()[1])
    assert head_sample(16, 0, 512).tolist() == list(range(16))  # the page re-runs seed 0
    assert len(set(head_sample(16, 1, 512).tolist())) == 16


def test_stored_results_match_this_checkout():
    """chapters/results/11_finetune.json was made by today's code, data, weights, config and torch
    (else: remake it with the command the error names)."""
    from gpt2_course.finetune_runs import ARMS, BODIES, ExperimentConfig, stored_results

    results, c = stored_results(), ExperimentConfig()
    assert results["n"]["test"] == len(ft.task_splits()[1])
    assert set(results["full"]) == set(ARMS) and set(results["head only"]) == set(BODIES)
    for name in BODIES:
        assert all(len(v) == len(c.seeds) for v in results["head only"][name]["by size"].values())
    assert "gpt2_course.finetune_runs" in results["fingerprint"]["modules"]


def test_passages_hide_length_capitals_and_line_breaks(splits):
    """The task's passages all have WORDS words, in lower case; words=None gives the lines as
    printed, whose capitals give the label away."""
    train, held_out = splits
    for p in train[:200] + held_out:
        assert len(p.text.split()) == ft.WORDS and p.text == p.text.lower() and "\n" not in p.text
    printed = ft.passages(["hamlet"], words=None)
    assert any(ft.mid_capitals(p.text) > 0 for p in printed if p.label == 0)
    assert {p.label for p in printed} == {0, 1}


def test_second_round_runs_the_other_seeds_at_the_learning_rate_dev_chose():
    from gpt2_course.finetune_runs import ARMS, ExperimentConfig, merge, parts

    c = ExperimentConfig()
    first = parts(c)
    assert not any(p.startswith("full/") and not p.endswith(f"/{c.seeds[0]}") for p in first)
    fake = {"acc": 0.5, "greedy": 0.5}
    done = {p: ({"dev": {"acc": 0.9 if f"/{c.lrs[1]}/" in p else 0.6}, "test": fake} if p.startswith("full/")
                else [{str(lr): {"dev": 0.5, "by size": {str(n): 0.5 for n in c.sizes}, "by layer": [0.5]}
                       for lr in c.head_lrs}] * (len(c.seeds) if p.endswith("pretrained") else 1)
                if p.startswith("head only") else fake) for p in first}
    second = parts(c, done)
    assert sorted(second) == sorted(f"full/{arm}/{c.lrs[1]}/{s}" for arm in ARMS for s in c.seeds[1:])
    merged = merge(c, done | {p: {"dev": {"acc": 0.0}, "test": fake} for p in second})
    assert all(merged["full"][arm]["lr"] == c.lrs[1] and len(merged["full"][arm]["acc"]) == len(c.seeds)
               for arm in ARMS)


def test_a_part_reports_the_modules_its_process_imported(tmp_path, monkeypatch):
    """--jobs runs parts in other processes; each reports its modules so that the fingerprint,
    taken in the parent, covers every module that ran."""
    import json

    import gpt2_course.finetune_runs as runs

    monkeypatch.setattr(runs, "run_part", lambda part, c: {"acc": 1.0})
    runs.main(["--part", "zero-shot", "--out", str(tmp_path / "part.json")])
    written = json.loads((tmp_path / "part.json").read_text())
    assert written["out"] == {"acc": 1.0} and "gpt2_course.finetune_runs" in written["modules"]
