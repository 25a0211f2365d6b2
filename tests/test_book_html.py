"""One setting, repository.url, decides every button that points at the repository."""
import importlib.util
import subprocess
from pathlib import Path
from types import SimpleNamespace

import yaml

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("book_html", ROOT / "book" / "_ext" / "book_html.py")
book_html = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(book_html)

LAUNCH = {"notebook_interface": "jupyterlab", "binderhub_url": "https://mybinder.org",
          "colab_url": "https://colab.research.google.com"}


def options(url: str) -> dict:
    config = SimpleNamespace(html_theme_options={"repository_url": url, "launch_buttons": dict(LAUNCH)})
    book_html.set_buttons(None, config)
    return config.html_theme_options


def test_no_repository_no_repository_buttons() -> None:
    opts = options("")
    assert not any(opts[k] for k in book_html.REPOSITORY_BUTTONS)
    assert not any(opts["launch_buttons"].get(k) for k in book_html.LAUNCH_URLS)


def test_a_github_repository_turns_every_button_on() -> None:
    opts = options("https://github.com/someone/gpt2-course")
    assert all(opts[k] for k in book_html.REPOSITORY_BUTTONS)
    assert opts["launch_buttons"]["binderhub_url"] and opts["launch_buttons"]["colab_url"]


def test_colab_only_for_github() -> None:
    opts = options("https://gitlab.com/someone/gpt2-course")
    assert opts["use_repository_button"] and opts["launch_buttons"]["binderhub_url"]
    assert opts["launch_buttons"]["colab_url"] == ""


def test_the_shipped_config_has_no_repository_and_loads_the_extension() -> None:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["repository"]["url"] == ""
    assert config["sphinx"]["local_extensions"] == {"book_html": "book/_ext"}
    assert not any(config["html"].get(k) for k in book_html.REPOSITORY_BUTTONS)  # the extension decides
    assert "YOUR-ORG" not in (ROOT / "_config.yml").read_text()


def test_book_execute_rewrites_the_extension_path_for_its_config_in_build(tmp_path) -> None:
    """`make book-execute` builds from a copy of _config.yml in _build/: the copy must still find us."""
    recipe = (ROOT / "Makefile").read_text().split("\nbook-execute:", 1)[1]
    sed = recipe[recipe.index("sed "):recipe.index(" > _build/_config_execute.yml")].replace("\\\n", " ")
    subprocess.run(f"{sed} > {tmp_path / 'config.yml'}", shell=True, cwd=ROOT, check=True, timeout=30)
    config = yaml.safe_load((tmp_path / "config.yml").read_text())
    assert config["execute"]["execute_notebooks"] == "cache"
    [(name, path)] = config["sphinx"]["local_extensions"].items()
    assert (ROOT / "_build" / path / f"{name}.py").resolve() == (ROOT / "book" / "_ext" / "book_html.py")
