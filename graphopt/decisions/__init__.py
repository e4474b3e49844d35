"""Decisions as data: reading every form a decision may come in (:mod:`.io`), the versioned
decision file keyed by op name (:mod:`.format`), a directory of saved decisions with its index
(:mod:`.files`) and the difference of two decisions op by op (:mod:`.diff`). See
``docs/decisions.md``."""
