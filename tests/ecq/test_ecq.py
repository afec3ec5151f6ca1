"""The event-centric composable queue and its tables, named as the SCEMon paper names
them: an ECQ per class holds a SIQ, a CLT of CLinks and an R-CLT of RCLinks, and every
stored instance a PMB."""

from __future__ import annotations

from ecq.engine import Engine
from ecq.event import Event
from ecq.structures.ecq import CLT, ECQ, RCLT, CLink, RCLink
from ecq.structures.pmb import PMB
from ecq.structures.siq import SIQ


def test_the_papers_structures_are_classes_of_the_papers_names() -> None:
    # The pure-Python engine: the compiled one keeps the same PMBs in a class of its own.
    eng = Engine(compiled=False)
    eng.register("q1", "SEQ(A, B, C) WITHIN 10 s")
    ecq = eng.network.ecqs["B"]
    assert isinstance(ecq, ECQ) and isinstance(ecq.siq, SIQ)
    assert isinstance(ecq.clt, CLT) and isinstance(ecq.rclt, RCLT)
    q1 = eng.query_state("q1")
    assert ecq.clt == [CLink(q1, 1)]
    assert list(ecq.rclt) == ["A"] and ecq.rclt["A"] == RCLink("A", {1: q1.bit})
    eng.process([Event("s", "A", 1), Event("s", "B", 2)])
    [stored_b] = list(ecq.siq)
    assert isinstance(stored_b.pmb, PMB)
    assert stored_b.pmb.latest(1, q1.bit, stored_b.start) == 1.0


def test_one_rclink_serves_every_query_that_probes_the_same_class() -> None:
    eng = Engine()
    eng.register("q1", "SEQ(A, B) WITHIN 10 s")
    eng.register("q2", "SEQ(A, B, C) WITHIN 10 s")
    q1, q2 = eng.query_state("q1"), eng.query_state("q2")
    rclt = eng.network.ecqs["B"].rclt
    assert list(rclt) == ["A"] and rclt["A"].masks == {1: q1.bit | q2.bit}
    eng.unregister("q1")
    assert rclt["A"].masks == {1: q2.bit}
    eng.unregister("q2")
    assert "B" not in eng.network.ecqs  # its CLT emptied: the ECQ went


def test_the_clt_drops_every_clink_of_a_query() -> None:
    eng = Engine()
    eng.register("q1", "SEQ(A, A) WITHIN 10 s")
    eng.register("q2", "SEQ(A, B) WITHIN 10 s")
    q1, q2 = eng.query_state("q1"), eng.query_state("q2")
    clt = CLT([CLink(q1, 0), CLink(q2, 0), CLink(q1, 1)])
    clt.drop(q1)
    assert clt == [CLink(q2, 0)] and isinstance(clt, CLT)


def test_the_rclt_links_and_unlinks_positions_and_forgets_an_empty_rclink() -> None:
    rclt = RCLT()
    rclt.link("A", 1, 0b01)
    rclt.link("A", 2, 0b10)
    rclt.link("A", 1, 0b100)
    assert rclt["A"].masks == {1: 0b101, 2: 0b10}
    rclt.unlink("A", 1, 0b01)
    rclt.unlink("A", 1, 0b100)
    assert rclt["A"].masks == {2: 0b10}
    rclt.unlink("A", 2, 0b10)
    assert rclt == {}
    rclt.unlink("B", 1, 0b1)  # nothing linked: nothing happens
    assert rclt == {}
