"""The `gpt2-course` command: argument parsing only; the work is done by the exported modules."""
from __future__ import annotations

import argparse
import os
import sys


def _generate(args: argparse.Namespace) -> None:
    from gpt2_course.fast import decode_layout_
    from gpt2_course.generate import generate_text
    from gpt2_course.loading import load_model

    model = decode_layout_(load_model(args.model))  # same values, faster to decode (appendix A2)
    pieces = generate_text(
        model, args.prompt, args.max_new_tokens, temperature=args.temperature,
        top_k=args.top_k, top_p=args.top_p, seed=args.seed,
    )
    first = next(pieces, "")  # bad arguments raise here, before anything is printed
    sys.stdout.write(args.prompt + first)
    for piece in pieces:
        sys.stdout.write(piece)
        sys.stdout.flush()
    sys.stdout.write("\n")


def _params(args: argparse.Namespace) -> None:
    from gpt2_course.config import GPT2Config
    from gpt2_course.params import format_breakdown

    print(format_breakdown(GPT2Config.from_name(args.name)))


def _train(args: argparse.Namespace) -> None:
    from gpt2_course.train import main as train_main

    train_main(args.train_args)


def _grade(args: argparse.Namespace) -> None:
    if os.name != "posix":  # the sandbox needs fork and resource limits
        sys.exit("gpt2-course grade runs on Linux (all protections) and macOS (time and memory limits, "
                 "no namespaces); on Windows, run it in WSL.")
    from gpt2_course.grading.batch import run

    sys.exit(run(args))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpt2-course", description="GPT-2 from an empty file.")
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser("generate", help="stream text from a model")
    g.add_argument("prompt", nargs="?", default="", help="text to continue (empty: unconditional)")
    g.add_argument("--model", default="pocket", help="pocket, gpt2, gpt2-medium, ... or a checkpoint path")
    g.add_argument("--max-new-tokens", type=int, default=80)
    g.add_argument("--temperature", type=float, default=1.0, help="0 means greedy")
    g.add_argument("--top-k", type=int, default=None)
    g.add_argument("--top-p", type=float, default=None)
    g.add_argument("--seed", type=int, default=0)
    g.set_defaults(func=_generate)

    q = sub.add_parser("params", help="count a configuration's parameters, by component")
    q.add_argument("name", help="gpt2, gpt2-medium, gpt2-large, gpt2-xl or pocket")
    q.set_defaults(func=_params)

    # `train` has its own parser (gpt2_course.train.main): its flags, --help included, pass through.
    t = sub.add_parser("train", help="pretrain a GPT-2 on Shakespeare (see appendix A1)", add_help=False)
    t.set_defaults(func=_train)

    r = sub.add_parser("grade", help="grade submitted exercise notebooks, each in its own sandbox")
    r.add_argument("paths", nargs="+", help="submitted notebooks, or folders of them")
    r.add_argument("--csv", default=None, help="also write the grades to this CSV file (row by row)")
    r.add_argument("--timeout", type=float, default=60.0,
                   help="seconds each notebook's own cells may run, in total (default 60)")
    r.add_argument("--question-timeout", type=float, default=10.0,
                   help="seconds each question's tests may run (default 10)")
    r.add_argument("--exercise", default=None, metavar="ID",
                   help="grade every file as this exercise (e.g. 05_masking), whatever its name says")
    r.add_argument("--jobs", type=int, default=1, help="submissions graded at the same time (default 1)")
    r.set_defaults(func=_grade)
    return p


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "train":
        args.train_args = extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        args.func(args)
    except (ValueError, FileNotFoundError, ModuleNotFoundError, RuntimeError, KeyError) as err:
        # Bad input is the user's to fix: say what went wrong, without a traceback.
        print(f"gpt2-course {args.command}: error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
