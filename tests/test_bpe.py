"""Chapter 2's tokenizer, checked against tiktoken (GPT-2's reference ids), Hugging Face's byte
table, OpenAI's vocabulary files and an independent, naive BPE trainer written below."""
import json
import sys
import unicodedata
from collections import Counter
from pathlib import Path

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st
from tiktoken_ext.openai_public import r50k_pat_str

from gpt2_course.bpe import BYTE_ORDER, BYTE_TO_CHAR, GPT2Tokenizer, printable, train_merges
from gpt2_course.data import EOT_TOKEN_ID, gpt2_vocab_files, list_plays, load_play, tiktoken_gpt2

CHAPTER = Path(__file__).resolve().parent.parent / "chapters" / "02_bpe.ipynb"
TINY = "sing, singing, sings; ring, ringing, rings; the king sings and the king rings"  # the chapter's


@pytest.fixture(scope="module")
def gpt2():
    return GPT2Tokenizer.from_gpt2()


@pytest.fixture(scope="module")
def ref():
    return tiktoken_gpt2()


# Characters that Python's Unicode database knows (no surrogates, no unassigned code points). The
# `regex` module's tables are newer than tiktoken's, so on code points assigned only in the latest
# Unicode versions the two pre-tokenizers may disagree; the chapter shows and explains this.
known_chars = st.characters(exclude_categories=("Cs", "Cn"))
tricky = st.sampled_from(
    list(" \t\n\r\x0b\x0c\u00a0\u3000'’sdmtlvrSTLL0129.,!?<|>-_endoftext") + ["<|endoftext|>"]
)
texts = st.lists(st.one_of(known_chars, tricky), max_size=80).map("".join)


# --- equality with tiktoken -------------------------------------------------------------------

def test_vocabulary_equals_tiktoken_and_openai_files(gpt2, ref):
    assert gpt2.vocab_size == ref.n_vocab == 50257 and gpt2.eot_id == EOT_TOKEN_ID
    assert gpt2.tokens == [ref.decode_single_token_bytes(i) for i in range(ref.n_vocab)]
    encoder = json.loads(gpt2_vocab_files()["encoder.json"].read_text(encoding="utf-8"))
    assert {printable(t): i for i, t in enumerate(gpt2.tokens[:-1])} == {
        k: v for k, v in encoder.items() if v != EOT_TOKEN_ID
    }


def test_byte_table_is_the_one_in_openai_files():
    # encoder.json's first 256 entries are the byte stand-ins, in GPT-2's id order
    encoder = json.loads(gpt2_vocab_files()["encoder.json"].read_text(encoding="utf-8"))
    assert [encoder[BYTE_TO_CHAR[b]] for b in BYTE_ORDER] == list(range(256))
    assert sorted(BYTE_ORDER) == list(range(256)) and len(set(BYTE_TO_CHAR.values())) == 256
    assert all(c.isprintable() and not c.isspace() for c in BYTE_TO_CHAR.values())


def test_every_play_equals_tiktoken(gpt2, ref):
    for name in list_plays():
        text = load_play(name)
        ids = gpt2.encode(text)
        assert ids == ref.encode_ordinary(text), name
        assert gpt2.decode(ids) == text, name


def test_small_cache_changes_nothing(ref):
    tok = GPT2Tokenizer.from_gpt2()
    tok._cache_limit = 50  # forces many clears while encoding
    text = load_play("macbeth")[:20_000]
    assert tok.encode(text) == ref.encode_ordinary(text)
    assert len(tok._cache) <= 50


@settings(max_examples=250, deadline=None)
@given(texts)
def test_random_text_equals_tiktoken_and_round_trips(gpt2, ref, text):
    ids = gpt2.encode(text)
    assert ids == ref.encode_ordinary(text)
    assert gpt2.decode(ids) == text
    assert gpt2.encode(text, allowed_special="all") == ref.encode(text, allowed_special="all")


def in_context(c: str) -> str:
    """c next to a letter, a digit, punctuation, a contraction and spaces: its class decides the cuts."""
    return f"a{c}1{c}!{c}'s {c}  {c}\n"


def test_known_code_points_equal_tiktoken(gpt2, ref):
    """Every 7th code point that Python's Unicode database assigns (all of them take too long)."""
    unassigned = ("Cs", "Cn", "Co")  # surrogates, unassigned, private use
    known = [cp for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)) not in unassigned]
    chars = [chr(cp) for cp in known[::7]] + ["\ue000", "\U000f0000"]  # + two private-use ones
    text = "".join(in_context(c) for c in chars)
    if gpt2.encode(text) != ref.encode_ordinary(text):
        bad = next(c for c in chars if gpt2.encode(in_context(c)) != ref.encode_ordinary(in_context(c)))
        pytest.fail(f"ids differ from tiktoken for U+{ord(bad):04X} in {in_context(bad)!r}")


@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", "\ud83d\ude00 ok", "x\ud83d"])
def test_lone_surrogates_are_replaced_like_tiktoken(gpt2, ref, text):
    assert gpt2.encode(text) == ref.encode_ordinary(text)


# --- special token --------------------------------------------------------------------------

def test_special_token_is_text_unless_allowed(gpt2, ref):
    text = "end.<|endoftext|>start <|endoftext|>"
    plain = gpt2.encode(text)
    assert EOT_TOKEN_ID not in plain
    assert plain == ref.encode_ordinary(text) and gpt2.decode(plain) == text
    for allowed in ("all", {"<|endoftext|>"}, ["<|endoftext|>"]):
        ids = gpt2.encode(text, allowed_special=allowed)
        assert ids == ref.encode(text, allowed_special="all")
        assert ids.count(EOT_TOKEN_ID) == 2 and gpt2.decode(ids) == text


def test_bad_allowed_special_is_refused(gpt2):
    with pytest.raises(ValueError, match="unknown special tokens.*<\\|fim\\|>.*has only"):
        gpt2.encode("x", allowed_special={"<|fim|>"})
    with pytest.raises(ValueError, match='"all" or a set'):
        gpt2.encode("x", allowed_special="<|endoftext|>")
    with pytest.raises(TypeError, match="needs a str"):
        gpt2.encode(b"bytes")


# --- decoding -------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [50257, 10**9, -1])
def test_decoding_an_id_out_of_range_names_it(gpt2, bad):
    with pytest.raises(ValueError, match=f"token id {bad} is out of range.*0 to 50256"):
        gpt2.decode([15496, bad])


def test_partial_characters_decode_to_replacement(gpt2, ref):
    ids = gpt2.encode("👋")
    assert len(ids) > 1
    assert gpt2.decode(ids[:1]) == ref.decode(ids[:1]) == "\ufffd"
    assert gpt2.decode_bytes(ids) == "👋".encode()


# --- training -------------------------------------------------------------------------------

def naive_merges(text: str, num_merges: int) -> list[tuple[bytes, bytes, int]]:
    """Textbook BPE on byte strings: recount everything after each merge; ties to the pair
    whose bytes sort first. Shares no code with gpt2_course.bpe."""
    words = {}
    for piece, freq in Counter(regex.findall(r50k_pat_str, text)).items():
        words[tuple(bytes([b]) for b in piece.encode("utf-8"))] = freq
    trace = []
    for _ in range(num_merges):
        counts = Counter()
        for word, freq in words.items():
            for pair in zip(word, word[1:]):
                counts[pair] += freq
        if not counts:
            break
        a, b = min(counts, key=lambda p: (-counts[p], p))
        trace.append((a, b, counts[(a, b)]))
        merged = {}
        for word, freq in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + freq
        words = merged
    return trace


def fast_merges(text: str, num_merges: int) -> list[tuple[bytes, bytes, int]]:
    tokens = [bytes([b]) for b in BYTE_ORDER]
    trace = []
    for (a, b), count in train_merges(text, num_merges):
        trace.append((tokens[a], tokens[b], count))
        tokens.append(tokens[a] + tokens[b])
    return trace


def test_chapter_trace_equals_naive_trainer():
    assert TINY in CHAPTER.read_text(encoding="utf-8"), "the chapter's tiny text changed: update TINY"
    expected = naive_merges(TINY, 12)
    assert fast_merges(TINY, 12) == expected
    assert [a + b for a, b, _ in expected[:2]] == [b"in", b"ing"]


def test_ties_go_to_the_pair_whose_bytes_sort_first():
    # every pair occurs once; b" " sorts before b"a" and b"c", so " c" is merged first
    assert fast_merges("ab cd", 1) == [(b" ", b"c", 1)]
    assert fast_merges("ba ab", 2)[0] == (b" ", b"a", 1)


def test_training_on_a_play_equals_naive_trainer_and_is_deterministic():
    text = load_play("macbeth")[:20_000]
    expected = naive_merges(text, 100)
    assert fast_merges(text, 100) == expected
    assert fast_merges(text, 100) == expected


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="aab b\n'sé1", max_size=60), st.integers(1, 25))
def test_random_training_equals_naive_trainer(text, n):
    assert fast_merges(text, n) == naive_merges(text, n)


def test_train_builds_a_working_tokenizer():
    text = load_play("macbeth")
    tok = GPT2Tokenizer.train(text, 300)
    assert tok.vocab_size == 300 and tok.eot_id == 299
    smaller = GPT2Tokenizer(tok.merges[:20])  # training is greedy: a prefix is a smaller run
    assert len(tok.encode(text)) < len(smaller.encode(text)) < len(text.encode("utf-8"))
    sample = "Double, double toil and trouble; 火 🔥 <|endoftext|>"
    assert tok.decode(tok.encode(sample)) == sample
    assert tok.encode(sample, allowed_special="all")[-1] == 299


def test_train_stops_when_nothing_is_left_to_merge():
    tok = GPT2Tokenizer.train("ab ab ab", 1000)
    assert [tok.tokens[i] for i in tok.encode("ab ab")] == [b"ab", b" ab"]
    assert tok.vocab_size == 256 + 2 + 1


@pytest.mark.parametrize("size", [0, 100, 255, 256])
def test_train_refuses_a_vocabulary_smaller_than_the_bytes(size):
    with pytest.raises(ValueError, match="vocab_size must be at least 257"):
        GPT2Tokenizer.train("some text", size)


# --- save / load ----------------------------------------------------------------------------

def test_save_load_round_trip(tmp_path, gpt2):
    path = tmp_path / "gpt2.json"
    gpt2.save(path)
    again = GPT2Tokenizer.load(path)
    assert again.merges == gpt2.merges and again.tokens == gpt2.tokens
    text = load_play("macbeth")[:5_000]
    assert again.encode(text) == gpt2.encode(text)


def test_load_missing_file_says_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="no tokenizer file.*save"):
        GPT2Tokenizer.load(tmp_path / "nope.json")


@pytest.mark.parametrize(
    "content",
    [
        '{"format": "gpt2-course-bpe", "pattern": "PAT", "merges": [[1, 2]',  # truncated
        "[1, 2, 3]",
        '{"format": "something else", "pattern": "PAT", "merges": []}',
        '{"format": "gpt2-course-bpe", "pattern": "\\\\w+", "merges": []}',
        '{"format": "gpt2-course-bpe", "pattern": "PAT"}',
        '{"format": "gpt2-course-bpe", "pattern": "PAT", "merges": [[1, 2], [999, 3]]}',
        '{"format": "gpt2-course-bpe", "pattern": "PAT", "merges": [[1, 2], [3, 4], [1, 2]]}',
        '{"format": "gpt2-course-bpe", "pattern": "PAT", "merges": [[1, 2, 3]]}',
        '{"format": "gpt2-course-bpe", "pattern": "PAT", "merges": [["a", "b"]]}',
    ],
)
def test_load_corrupt_file_is_refused(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_text(content.replace("PAT", json.dumps(r50k_pat_str)[1:-1]), encoding="utf-8")
    with pytest.raises(ValueError, match="bad.json is not a valid GPT2Tokenizer file"):
        GPT2Tokenizer.load(path)
