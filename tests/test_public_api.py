"""`gpt2_course.NAME` is, on every read and whatever was imported first, the object its module
defines, for every public name the notebooks define; no public function is out of reach."""
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gpt2_course

ROOT = Path(__file__).resolve().parent.parent
SUBMODULES = sorted(m.name for m in pkgutil.iter_modules(gpt2_course.__path__))

# One interpreter imports the heavy third-party packages (torch, matplotlib...) but nothing of
# gpt2_course, then forks a child per case: each child is a fresh gpt2_course, which imports one
# submodule first, then reads every public name, imports the module that defines it and reads
# the name again. A child prints one line per name that is not its module's object.
PROBE = r"""
import importlib, os, sys, types
import huggingface_hub, matplotlib.pyplot, nbclient, numpy, safetensors.torch, tiktoken, torch  # noqa
assert not [m for m in sys.modules if m.startswith("gpt2_course")]
for first in sys.argv[1:]:
    sys.stdout.flush()
    if os.fork() == 0:
        if first != "-":
            importlib.import_module("gpt2_course." + first)
        import gpt2_course as gc
        for name, module in sorted(gc._NAMES.items()):
            read = getattr(gc, name)
            documented = getattr(importlib.import_module("gpt2_course." + module), name)
            again = getattr(gc, name)
            if not (read is again is documented) or isinstance(read, types.ModuleType):
                print(f"after importing {first}: {name} read {read!r}, then {again!r}; "
                      f"documented {documented!r}")
        print(f"checked {first}: {len(gc._NAMES)} names")
        sys.stdout.flush()
        os._exit(0)
    os.wait()
"""


def test_every_name_is_its_modules_object_whatever_was_imported_first() -> None:
    assert len(SUBMODULES) > 10 and "generate" in SUBMODULES and "attention" in SUBMODULES
    cases = ["-", *SUBMODULES]  # "-": import nothing first
    result = subprocess.run([sys.executable, "-c", PROBE, *cases], capture_output=True, text=True,
                            cwd=ROOT, timeout=600)
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stderr
    assert [line.split(":")[0] for line in lines if line.startswith("checked ")] == [
        f"checked {c}" for c in cases], result.stdout + result.stderr  # every child ran to the end
    assert not [line for line in lines if not line.startswith("checked ")], result.stdout


def test_names_that_are_also_modules_stay_functions() -> None:
    import gpt2_course.attention
    import gpt2_course.generate  # noqa: F401 - the import used to rebind gpt2_course.generate

    assert callable(gpt2_course.generate) and gpt2_course.generate.__module__ == "gpt2_course.generate"
    assert callable(gpt2_course.attention) and gpt2_course.attention.__module__ == "gpt2_course.attention"
    assert sys.modules["gpt2_course.generate"].generate is gpt2_course.generate


def test_public_names_are_listed_and_unknown_names_fail_clearly() -> None:
    assert gpt2_course.__all__ == sorted(gpt2_course._NAMES)
    assert set(gpt2_course.__all__) <= set(dir(gpt2_course))
    with pytest.raises(AttributeError, match="no_such_name"):
        gpt2_course.no_such_name  # noqa: B018


def check_api(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "tools" / "check_api.py"), "--root", str(root)],
                          capture_output=True, text=True)


def test_check_api_passes() -> None:
    result = check_api(ROOT)
    assert result.returncode == 0, result.stderr


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A copy of the notebooks and the package's sources to break."""
    for name in ("chapters", "gpt2_course"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("pocket", "__pycache__"))
    return tmp_path


@pytest.mark.parametrize("path, old, new, message", [
    # `__all__` edited by hand
    ("masking.py", '"causal_mask",', '"causal_mask", "math",',
     "gpt2_course/masking.py: `__all__` is not what its notebook's `#| export` cells make public"),
    # a name dropped from `__all__`: gpt2_course.causal_mask no longer reaches it
    ("masking.py", '"causal_mask",', "",
     "gpt2_course/masking.py: `gpt2_course.causal_mask` is not masking.causal_mask"),
    # a function added to a module by hand: public by the notebooks' rule, but in no `__all__`
    ("mlp.py", "class MLP(", "def sneaky():\n    pass\n\n\nclass MLP(",
     "gpt2_course/mlp.py: `sneaky` is defined but not public"),
])
def test_check_api_catches_drift(copy: Path, path: str, old: str, new: str, message: str) -> None:
    target = copy / "gpt2_course" / path
    assert old in target.read_text()
    target.write_text(target.read_text().replace(old, new))
    result = check_api(copy)
    assert result.returncode == 1 and message in result.stderr, result.stderr
