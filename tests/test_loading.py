"""Chapter 8's checkpoint loader: every layout it reads, what it writes, and how it fails."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file
from test_model import random_hf_model

from gpt2_course.config import GPT2Config
from gpt2_course.loading import POCKET_DIR, course_model, load_model, save_model
from gpt2_course.model import GPT2

SIZES = dict(n_layer=2, n_head=4, n_embd=64, n_ctx=32)
IDS = torch.randint(0, 50257, (2, 16), generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def hf_model():
    return random_hf_model(**SIZES, seed=5)


@pytest.fixture(scope="module")
def hf_logits(hf_model):
    with torch.no_grad():
        return hf_model(IDS).logits


def logits_of(model: GPT2) -> torch.Tensor:
    with torch.no_grad():
        return model(IDS)


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def hub_layout(hf_model, folder: Path, extra: dict[str, torch.Tensor] | None = None) -> Path:
    """Write hf_model the way the hub's gpt2 repository stores it: no "transformer." prefix,
    plus each layer's attn.bias mask and attn.masked_bias constant."""
    folder.mkdir(parents=True, exist_ok=True)
    n = hf_model.config.n_positions
    tensors = {k.removeprefix("transformer."): v.clone() for k, v in hf_model.state_dict().items()}
    tensors.pop("lm_head.weight")
    for i in range(hf_model.config.n_layer):
        tensors[f"h.{i}.attn.bias"] = torch.tril(torch.ones(n, n)).view(1, 1, n, n)
        tensors[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    tensors.update(extra or {})
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    hf_model.config.to_json_file(folder / "config.json")
    return folder


# --- layouts that load --------------------------------------------------------------------------

def test_save_pretrained_folder(tmp_path, hf_model, hf_logits):
    hf_model.save_pretrained(tmp_path)
    assert "transformer.h.0.attn.c_attn.weight" in load_file(tmp_path / "model.safetensors")
    model = load_model(tmp_path)
    assert not model.training
    assert max_diff(logits_of(model), hf_logits) <= 1e-4
    assert max_diff(logits_of(load_model(str(tmp_path / "model.safetensors"))), hf_logits) <= 1e-4


def test_pytorch_model_bin(tmp_path, hf_model, hf_logits):
    hf_model.save_pretrained(tmp_path, safe_serialization=False)
    assert (tmp_path / "pytorch_model.bin").is_file()
    assert max_diff(logits_of(load_model(tmp_path)), hf_logits) <= 1e-4


def test_sharded_checkpoint(tmp_path, hf_model, hf_logits):
    hf_model.save_pretrained(tmp_path, max_shard_size="2MB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    assert max_diff(logits_of(load_model(tmp_path)), hf_logits) <= 1e-4


def test_hub_layout_with_buffers_and_lm_head(tmp_path, hf_model, hf_logits):
    wte = hf_model.transformer.wte.weight.detach().clone()
    folder = hub_layout(hf_model, tmp_path, extra={"lm_head.weight": wte})
    keys = load_file(folder / "model.safetensors")
    assert "h.0.attn.bias" in keys and "h.0.attn.c_attn.bias" in keys
    assert max_diff(logits_of(load_model(folder)), hf_logits) <= 1e-4


def test_lm_head_that_is_not_tied_is_refused(tmp_path, hf_model):
    other = torch.randn_like(hf_model.transformer.wte.weight)
    folder = hub_layout(hf_model, tmp_path, extra={"lm_head.weight": other})
    with pytest.raises(ValueError, match="lm_head.weight differs from wte.weight"):
        load_model(folder)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_storage_loads_as_float32(tmp_path, hf_model, dtype):
    hf_model.save_pretrained(tmp_path / "f32")
    ours = load_model(tmp_path / "f32")
    save_model(ours, tmp_path / "half", dtype=dtype)
    stored = load_file(tmp_path / "half" / "model.safetensors")
    assert all(t.dtype == dtype for t in stored.values())
    half = load_model(tmp_path / "half")
    assert all(p.dtype == torch.float32 for p in half.parameters())
    expected = ours.h[1].mlp.c_fc.weight.to(dtype).float()
    assert torch.equal(half.h[1].mlp.c_fc.weight, expected)


def test_save_model_loads_in_transformers(tmp_path):
    torch.manual_seed(0)
    ours = GPT2(GPT2Config(n_layer=3, n_head=5, n_embd=80, n_ctx=48)).eval()
    with torch.no_grad():
        for p in ours.parameters():
            p.add_(torch.randn_like(p) * 0.05)  # make biases and LayerNorms non-trivial
    save_model(ours, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "gpt2" and config["architectures"] == ["GPT2LMHeadModel"]
    assert config["activation_function"] == "gelu_new" and config["tie_word_embeddings"] is True
    sizes = [config[k] for k in ("n_positions", "n_ctx", "n_embd", "n_layer", "n_head")]
    assert sizes == [48, 48, 80, 3, 5]
    assert config["bos_token_id"] == config["eos_token_id"] == 50256
    stored = load_file(tmp_path / "model.safetensors")
    assert stored["transformer.h.0.mlp.c_fc.weight"].shape == (80, 320)  # Conv1D layout: [in, out]
    hf = transformers.GPT2LMHeadModel.from_pretrained(tmp_path, attn_implementation="eager").eval()
    with torch.no_grad():
        assert max_diff(hf(IDS).logits, logits_of(ours)) <= 1e-4
    assert max_diff(logits_of(load_model(tmp_path)), logits_of(ours)) == 0.0


def test_pocket_checkpoint_matches_transformers():
    ours = load_model("pocket")
    assert ours.config == GPT2Config.from_name("pocket")
    hf = transformers.GPT2LMHeadModel.from_pretrained(
        POCKET_DIR, attn_implementation="eager", dtype=torch.float32
    ).eval()
    idx = torch.randint(0, 50257, (2, ours.config.n_ctx), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert max_diff(ours(idx), hf(idx).logits) <= 1e-4


def test_course_model(tmp_path, monkeypatch, hf_model, hf_logits):
    monkeypatch.delenv("GPT2_COURSE_MODEL", raising=False)
    model = course_model()
    assert model.config == GPT2Config.from_name("pocket") and not model.training
    hf_model.save_pretrained(tmp_path)
    monkeypatch.setenv("GPT2_COURSE_MODEL", str(tmp_path))
    assert max_diff(logits_of(course_model()), hf_logits) <= 1e-4


# --- what fails, and how ------------------------------------------------------------------------

def test_unknown_name():
    with pytest.raises(ValueError, match=r"Known names: pocket, gpt2, gpt2-medium, gpt2-large, gpt2-xl"):
        load_model("gpt3")


def test_missing_unexpected_and_misshaped_in_one_error(tmp_path, hf_model):
    sd = {k: v.clone() for k, v in hf_model.state_dict().items() if k != "lm_head.weight"}
    del sd["transformer.h.1.ln_2.bias"]
    del sd["transformer.ln_f.weight"]
    sd["transformer.h.0.attn.q_proj.weight"] = torch.zeros(3)
    fc = "transformer.h.0.mlp.c_fc.weight"
    sd[fc] = sd[fc].T.contiguous()  # nn.Linear's layout instead of Conv1D's
    sd["transformer.wpe.weight"] = sd["transformer.wpe.weight"][:10]
    save_file(sd, tmp_path / "model.safetensors", metadata={"format": "pt"})
    hf_model.config.to_json_file(tmp_path / "config.json")
    with pytest.raises(ValueError) as err:
        load_model(tmp_path)
    msg = str(err.value)
    for text in ("missing (2)", "h.1.ln_2.bias", "ln_f.weight", "unexpected (1)", "h.0.attn.q_proj.weight",
                 "wrong shape (2)", "transformer.h.0.mlp.c_fc.weight (256, 64), expected (64, 256)",
                 "transformer.wpe.weight (10, 64), expected (32, 64)"):
        assert text in msg, f"{text!r} not in:\n{msg}"


def test_checkpoint_of_another_size(tmp_path, hf_model):
    hf_model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["n_layer"] = 3
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"missing \(12\).*h\.2\.ln_1\.weight"):
        load_model(tmp_path)


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
def test_corrupt_file_is_named(tmp_path, hf_model, damage, fmt):
    hf_model.save_pretrained(tmp_path, safe_serialization=fmt == "safetensors")
    file = tmp_path / ("model.safetensors" if fmt == "safetensors" else "pytorch_model.bin")
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"\x07not a checkpoint" * 100)
    with pytest.raises(ValueError, match=rf"Could not read the weights file .*{file.name}.*truncated or"):
        load_model(tmp_path)


def test_folder_without_weights_or_config(tmp_path, hf_model):
    with pytest.raises(FileNotFoundError, match="no model.safetensors or pytorch_model.bin"):
        load_model(tmp_path)
    hf_model.save_pretrained(tmp_path)
    (tmp_path / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_model(tmp_path)


def test_a_file_that_is_not_weights(tmp_path, hf_model):
    hf_model.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="config.json is not a weights file"):
        load_model(tmp_path / "config.json")


def test_missing_shard_is_named(tmp_path, hf_model):
    hf_model.save_pretrained(tmp_path, max_shard_size="2MB")
    shard = sorted(tmp_path.glob("model-*.safetensors"))[-1]
    shard.unlink()
    with pytest.raises(FileNotFoundError, match=shard.name):
        load_model(tmp_path)


def test_unsupported_config_is_refused(tmp_path, hf_model):
    hf_model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config.update(activation_function="relu", scale_attn_weights=False)
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="activation_function 'relu'.*scale_attn_weights=False"):
        load_model(tmp_path)


def test_save_model_refuses_a_file(tmp_path):
    (tmp_path / "x").write_text("")
    with pytest.raises(ValueError, match="is a file"):
        save_model(GPT2(GPT2Config(n_layer=1, n_head=1, n_embd=8, n_ctx=4)), tmp_path / "x")


# --- OpenAI's weights through the Hugging Face hub ----------------------------------------------

def load_in_subprocess(name: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """load_model(name) in a fresh interpreter (huggingface_hub reads its settings at import).
    The first line of stdout is how many seconds load_model ran, also when it raised."""
    code = (
        "import time\nfrom gpt2_course.loading import load_model\nt = time.time()\n"
        f"try:\n    m = load_model({name!r})\n"
        "finally:\n    print(f'{time.time() - t:.2f}')\n"
    )
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=120)


def seconds(run: subprocess.CompletedProcess) -> float:
    return float(run.stdout.split()[0])


def test_offline_without_cache_fails_fast_and_says_what_to_do(tmp_path):
    run = load_in_subprocess("gpt2", {"HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"})
    assert run.returncode != 0
    assert "FileNotFoundError" in run.stderr and "HF_HUB_OFFLINE is set" in run.stderr
    assert "Run once with internet access" in run.stderr and "load_model('that/folder')" in run.stderr
    assert seconds(run) < 10


@pytest.fixture
def silent_server():
    """A local endpoint that accepts connections and never answers: a hub that hangs."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.close()


@pytest.mark.parametrize("kind", ["connection-refused", "never-answers"])
def test_unreachable_hub_fails_fast(tmp_path, request, kind):
    # Dead endpoints stand in for "no network", so the test never downloads on a machine that has one.
    refused = "http://127.0.0.1:9"  # the discard port: nothing listens there
    endpoint = refused if kind == "connection-refused" else request.getfixturevalue("silent_server")
    run = load_in_subprocess("gpt2-medium", {"HF_HOME": str(tmp_path), "HF_ENDPOINT": endpoint})
    assert run.returncode != 0
    assert "FileNotFoundError" in run.stderr and "could not be downloaded" in run.stderr
    assert "Run once with internet access" in run.stderr
    assert seconds(run) < 10, f"took {seconds(run)} s"


def test_openai_name_is_taken_from_the_cache_offline(tmp_path, hf_model, hf_logits):
    """A Hugging Face cache holding "openai-community/gpt2" (here: small random weights) is used offline."""
    snapshot = tmp_path / "hub" / "models--openai-community--gpt2" / "snapshots" / ("0" * 40)
    hf_model.save_pretrained(snapshot)
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("0" * 40)
    torch.save(hf_logits, tmp_path / "expected.pt")
    code = (
        "import torch; from gpt2_course.loading import load_model\n"
        f"m = load_model('gpt2'); idx = torch.tensor({IDS.tolist()})\n"
        f"with torch.no_grad(): d = (m(idx) - torch.load({str(tmp_path / 'expected.pt')!r})).abs().max()\n"
        "print(m.config.n_layer, float(d))\n"
    )
    env = {**os.environ, "HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    n_layer, diff = run.stdout.split()
    # another process may sum in another order (threads, alignment): float32 rounding, not 1e-1 errors
    assert int(n_layer) == SIZES["n_layer"] and float(diff) <= 1e-3


@pytest.fixture(scope="module")
def openai_gpt2():
    """OpenAI's gpt2, from the hub or its cache. Skipped when neither is reachable; with
    GPT2_COURSE_PRETRAINED=1 (make test-pretrained) that is a failure instead."""
    try:
        return load_model("gpt2")
    except FileNotFoundError as e:
        if os.environ.get("GPT2_COURSE_PRETRAINED") == "1":
            raise
        pytest.skip(f"OpenAI's gpt2 weights are not reachable (no network, no cache): {e}")


@pytest.mark.pretrained
def test_openai_gpt2_greedy_continuation(openai_gpt2):
    # transformers' own integration test for gpt2: greedy decoding after "The dog".
    expected = [464, 3290, 373, 1043, 287, 257, 2214, 1474, 262, 16246, 286, 2688, 290, 2688, 27262, 13,
                198, 198, 464, 3290]
    idx = torch.tensor([[464, 3290]])
    with torch.no_grad():
        for _ in range(18):
            idx = torch.cat([idx, openai_gpt2(idx)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert idx[0].tolist() == expected


@pytest.mark.pretrained
def test_openai_gpt2_matches_transformers(openai_gpt2):
    folder = Path(openai_gpt2_folder())
    hf = transformers.GPT2LMHeadModel.from_pretrained(folder, attn_implementation="eager").eval()
    idx = torch.randint(0, 50257, (2, 64), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert max_diff(openai_gpt2(idx), hf(idx).logits) <= 1e-3


def openai_gpt2_folder() -> str:
    from gpt2_course.loading import _hub_folder

    return str(_hub_folder("gpt2"))
