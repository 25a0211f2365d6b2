"""`python -m gpt2_course.figures [PATH]`: write the introduction's full map (book/figures/model_map.svg)."""
import sys

from .map import write_model_map

write_model_map(sys.argv[1] if len(sys.argv) > 1 else "book/figures/model_map.svg")
