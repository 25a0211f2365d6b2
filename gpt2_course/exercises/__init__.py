"""Question banks: one module per chapter, named after the chapter's notebook.

    chapters/05_masking.ipynb   ->  gpt2_course/exercises/ch05_masking.py     (exercise "05_masking")
    chapters/A1_pretraining...  ->  gpt2_course/exercises/a1_pretraining.py   (exercise "A1_pretraining")

The grading engine (gpt2_course/grading/) finds every module here whose name does not start
with "_" and reads its `EXERCISE`. Adding a question touches three files and nothing else:

1. the solution notebook `exercises/solutions/NN_name.ipynb` (heading, solution cell, `check("qN")`
   cell; `make exercises` regenerates the blank notebook and the book page);
2. the chapter's bank here: a `Question` in its `EXERCISE`;
3. the chapter's test file `tests/exercises/test_chNN_name.py`: one learner-style wrong answer
   for every planted mistake, in its `PLANTED` dict.

How a bank is written (ch05_masking.py is a short example):

    from gpt2_course.grading.questions import Exercise, Question, calls, planted, value
    from gpt2_course.masking import causal_mask

    @planted("Mask off by one: each token sees the next token too ...")   # the hint
    def sees_future(t_q, t_k=None):                                        # the mistake's name
        return causal_mask(t_q, t_k).roll(1, -1) | causal_mask(t_q, t_k)   # the same kind of output

    EXERCISE = Exercise("05_masking", "Masking", [
        value("visible_pairs", "q1", 1, 1024 * 1025 // 2, {"all": (1024 * 1024, "hint ...")}),
        Question("q2", "causal_mask", 3, causal_mask, course=(causal_mask,),
                 cases=calls(lambda: [(4,), (3, 5)]), mistakes=[sees_future]),
    ])

- `reference`: the package's own exported function where one exists (`course=` names it too, so
  an answer that calls it, directly or wrapped, scores 0 as "borrowed"); else a short reference.
- `cases`: small, deterministic inputs (`randn(seed, ...)` is float64 and seeded); all of a
  question's cases run in well under a second. `calls(make_args, label=...)` calls the answer
  with each tuple of arguments; write `Case(label, run)` objects for anything else.
- `mistakes`: each a small named function with exactly one classic error, decorated with
  `@planted(hint)`; `also=(other_forms, ...)` adds other common ways to make the same error. A
  mistake that raises instead is `Mistake(name, hint, error=r"regex on the message")`.
  An answer scores the points only when every case's output equals the reference's; when all its
  outputs equal a mistake's, the learner gets that mistake's hint.
- `explain=` (bool outputs) says in words what a differing entry means, e.g. which query sees
  which key. Hints that several chapters share live in `_hints.py`.
"""
