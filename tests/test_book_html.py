"""One setting, repository.url, decides every button that points at the repository."""
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import yaml

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("book_html", ROOT / "tools" / "book_html.py")
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
    assert config["sphinx"]["local_extensions"] == {"book_html": "tools"}
    assert not any(config["html"].get(k) for k in book_html.REPOSITORY_BUTTONS)  # the extension decides
    assert "YOUR-ORG" not in (ROOT / "_config.yml").read_text()
