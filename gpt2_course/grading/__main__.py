"""`python -m gpt2_course.grading PATH...`: the same as `gpt2-course grade PATH...`."""
import sys

from gpt2_course.cli import main

main(["grade", *sys.argv[1:]])
