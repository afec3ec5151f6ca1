"""Matching and assembly: once the test phase says which queries an arriving instance may
complete, their matches are built here — plain sequences from the per-source back chains
(:mod:`.assembly`), negation, Kleene closure and sub-patterns (:mod:`.composite`,
:mod:`.skeleton`), conjunctions (:mod:`.conjunction`), matches before selection
(:mod:`.candidate`), matches waiting for the clock (:mod:`.deadlines`) and the order in
which matches leave the network (:mod:`.emission`)."""
