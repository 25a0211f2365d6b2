"""The course's diagrams: one visual language, drawn by code from the real config and tensors.

Hand-written (not exported from a chapter), like `cli.py`, in three kinds of module:
`primitives` (the palette `COLORS`, the font, SVG output, and the shapes `canvas`, `box`, `arrow`,
`plus`, `label`, `matrix`), `map` (the "where we are" map, `model_map`), and one `chNN_*` module
per chapter with that chapter's drawings. This file re-exports every name in their `__all__`, so
that a chapter imports one thing and writes `figures.box`, `figures.model_map` or
`figures.predict_append` without knowing which file draws what (tests/test_figures.py checks that
each module's `__all__` lists all its public names). Usage in a chapter:

    from gpt2_course import figures
    figures.use_svg()                      # once, in the setup cell: crisp SVG, fixed fonts

    # a cell tagged `hide-input` and `nbval-ignore-output`:
    fig = figures.model_map(GPT2Config(), highlight="attn")
    figures.glue_figure("ch04_map", fig)   # glued, not shown here; closed

and in the markdown cell below it (MyST-NB's figure-from-glue: alt text, then a caption
that says what to look at):

    ```{glue:figure} ch04_map
    :alt: The GPT-2 model as a column of boxes, the attention box highlighted.
    :name: fig-ch04-map

    Where we are: ...
    ```

Print (and assert) in a compared cell every number a figure shows: nbval never compares images.
"""
from .primitives import *  # noqa: F403
from .map import *  # noqa: F403
from .ch01_language_modeling import *  # noqa: F403
from .ch02_bpe import *  # noqa: F403
from .ch03_embeddings import *  # noqa: F403
from .ch04_self_attention import *  # noqa: F403
from .ch05_masking import *  # noqa: F403
