"""apr.conrad: repository-level program repair guided by plans distilled backwards from
verified historical fixes (ConRAD, ICML 2026): ``mining`` (retrieval, judge, guardian,
distillation), ``repair`` (the four-stage pass), ``sandbox`` (edits and test runs)."""
