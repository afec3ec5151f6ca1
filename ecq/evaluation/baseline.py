"""The separate-processing (SP) baseline: the scheme the SCEMon paper compares against.

SCEMon §3.2 (after Wu et al.'s SASE): a **query index** maps each event class to the
plans that use it, ``class -> [(plan, node, positions)]``; every query has its own
**plan**; an arriving instance is handed to each plan in turn, which *searches* its own
per-source structure, *evaluates* its transitions and *stores* the instance in its own
structure, and every plan *deletes* its own obsolete instances at cleaning time. Nothing
is shared across queries: an instance used by 60 queries is stored 60 times, and
cleaning scans every plan's every source (O(queries x sources) per cleaning).

A plan evaluates its pattern as follows:

- a plain sequence (the paper's workload) runs on **per-source stacks**, SASE's active
  instance stacks: stack ``k`` of a source holds the instances that can end a partial
  match at position ``k``, each with the latest start such a partial match can have and
  a pointer to the top of stack ``k - 1`` when it arrived (SASE's RIP pointer); a match
  is assembled by walking the stacks back from the pointers;
- a one-component pattern and a disjunction store nothing: a passing event is a match;
- everything else (negation, Kleene closure, sub-patterns, conjunctions, ``@name``) keeps
  a **private per-source, per-class store** and applies the same matching rules as the
  shared engine (:mod:`ecq.matching.composite`) to it.

The baseline produces exactly the matches of :class:`ecq.Engine` — same order, same
``seq``, same ``trigger`` (docs/semantics.md): it compiles queries with the same compiler,
runs the same moments and phases, and uses the same per-class *drop horizon*. The
horizon is part of the result for late events (docs/semantics.md, Cleaning), so each
class's horizon is kept here too, as metadata of the query set: it says which stored
copies are still visible; it holds no instance.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ecq.compiler.conditions import MISSING
from ecq.compiler.query import CompiledQuery
from ecq.engine import Engine
from ecq.errors import DuplicateQueryError, SemanticError, UnknownQueryError
from ecq.evaluation.plan import (
    DISJ,
    FILTER,
    SASE,
    Entry,
    Horizon,
    Plan,
    PlanNode,
    Stacks,
    assemble,
)
from ecq.event import Event
from ecq.language.ast import Query
from ecq.matching.candidate import Cand
from ecq.matching.composite import (
    Context,
    bound_ok,
    complete,
    derived_instance,
    entry_prims,
    inst_key,
    match_cand,
    trailing_factor,
)
from ecq.matching.emission import Emission
from ecq.network import check_depends
from ecq.ops import OpClock
from ecq.structures.qstate import QState

__all__ = ["SeparateEngine", "PHASES"]

NEG_INF = float("-inf")

# The keys of ``SeparateEngine.timers`` (the shared engine's, for the breakdown figure).
PHASES = ("search", "probe", "evaluate", "insert", "clean")

# An instance waiting to be processed, and the plan it belongs to (a sub-pattern's
# instance) or None (a primitive event or an ``@name`` instance: the index routes it).
Delivery = tuple[Event, "Plan | None"]
# A node of a plan that uses a class, at these positions.
Route = tuple[Plan, PlanNode, tuple[int, ...]]
# What a plain sequence's evaluation of an instance pushes: the node, its stacks for the
# source (None: not made yet), whether position 0 takes the instance, and the entries
# of later positions.
Push = tuple[PlanNode, "Stacks | None", bool, "list[tuple[int, Entry]] | None"]


class SeparateEngine(OpClock):
    """The separate-processing scheme with :class:`ecq.Engine`'s API and results.

    ``clean_every``: physical cleaning every that many events (results do not depend on
    it). ``profile``: accumulate seconds per phase in :attr:`timers` (keys
    :data:`PHASES`; ``search`` is finding the plans and each plan's per-source stacks,
    ``evaluate`` the transitions and match assembly, ``insert`` storing the copies,
    ``clean`` the periodic scan; ``probe`` has no SP counterpart and stays 0).
    """

    def __init__(self, clean_every: int = 4096, profile: bool = False) -> None:
        self.index: dict[str, list[Route]] = {}
        # The plans that keep a class in their private store (general nodes).
        self.keepers: dict[str, list[Plan]] = {}
        self.plans: dict[str, Plan] = {}
        self.horizons: dict[str, Horizon] = {}
        super().__init__(clean_every)
        self.profile = profile
        self.timers: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self._order = 0
        self._stored = 0
        self._waiting: dict[int, tuple[Plan, PlanNode]] = {}

    # ------------------------------------------------------------------ queries

    def register(self, name: str, query: str | Query | CompiledQuery) -> CompiledQuery:
        """Compile ``query`` into a plan of its own; it sees the events processed from
        now on. Same errors as :meth:`ecq.Engine.register`; the engine is unchanged on
        error. O(size of the query + index entries of its classes)."""
        if not isinstance(name, str) or not name:
            raise SemanticError("a query needs a non-empty name")
        if name in self.plans:
            raise DuplicateQueryError(f"a query named {name!r} is already registered")
        # Plans share nothing, so no sharing tag: every sub-pattern is the plan's own.
        cq = Engine.compile(name, query)
        if cq.policy is not None:
            raise SemanticError(
                f"query {name!r}: the separate-processing baseline has no selection or consumption "
                "policies (MODE CHRONICLE, STRATEGY, CONSUME, AFTER MATCH SKIP); run it on the shared engine"
            )
        self.ops += 1  # as the engine: a rejected @name still took an op
        check_depends(cq, self._depends)
        reg = 2 * self.ops + 1
        order = self._order
        self._order += 1
        nodes = [PlanNode(QState(node, i, order, reg)) for i, node in enumerate((*cq.subs, cq))]
        plan = Plan(name, order, reg, nodes)
        for node in nodes:
            self._windows(node.cq, add=True)
        for cls, routes in plan.routes.items():
            self.index.setdefault(cls, []).extend(routes)
        for cls in plan.stored:
            self.keepers.setdefault(cls, []).append(plan)
        self.plans[name] = plan
        return cq

    def unregister(self, name: str) -> None:
        """Drop a query's plan with everything it stores and its pending matches.
        O(index entries of its classes + its stored instances)."""
        plan = self.plans.pop(name, None)
        if plan is None:
            raise UnknownQueryError(f"no query named {name!r} is registered")
        self.ops += 1
        self._stored -= plan.size()
        for cls in plan.routes:
            left = [r for r in self.index[cls] if r[0] is not plan]
            if left:
                self.index[cls] = left
            else:
                del self.index[cls]
        for cls in plan.stored:
            keep = [p for p in self.keepers[cls] if p is not plan]
            if keep:
                self.keepers[cls] = keep
            else:
                del self.keepers[cls]
        for node in plan.nodes:
            self._windows(node.cq, add=False)
            self._waiting.pop(id(node), None)

    def _windows(self, cq: CompiledQuery, add: bool) -> None:
        """Keep the per-class horizons as :class:`ecq.network.Network` does."""
        classes = cq.classes()
        storing = cq.stores and cq.window is not None
        for cls in sorted(classes):
            hz = self.horizons.get(cls)
            if hz is None:
                hz = self.horizons[cls] = Horizon()
            if storing:
                if add:
                    hz.set_windows(self.clock, add=cq.window)
                else:
                    hz.set_windows(self.clock, remove=cq.window)
            hz.uses += 1 if add else -1
            if hz.uses == 0:
                del self.horizons[cls]

    def _depends(self, name: str) -> frozenset[str] | None:
        plan = self.plans.get(name)
        return plan.top.cq.depends if plan is not None else None

    def queries(self) -> list[CompiledQuery]:
        """Registered queries in registration order."""
        return [p.top.cq for p in sorted(self.plans.values(), key=lambda p: p.order)]

    # ------------------------------------------------------------------- events

    def _on_event(self, e: Event, clock_before: float, clock: float) -> list[Emission] | None:
        emitted: list[Emission] = []
        if self._waiting:
            self._fire(e.moment - 1, clock_before, clock, e.arrival, emitted)
        self._run([[(e, None)]], e.moment, clock, clock, 1, e.arrival, emitted)
        return emitted

    def _fire(self, moment: int, before: float, clock: float, arrival: int, out: list[Emission]) -> None:
        """Phase 0: pending trailing-negation matches whose deadline the clock passed,
        checked against each plan's store as it was before this op."""
        made: list[Delivery] = []
        for key, (plan, node) in list(self._waiting.items()):
            due = [(c, d) for c, d in node.pending if clock > d]
            if not due:
                continue
            node.pending = [(c, d) for c, d in node.pending if not clock > d]
            if not node.pending:
                del self._waiting[key]
            for cand, _deadline in due:
                ctx = Context(moment, self._probe(plan, cand.trigger.src, before))
                prob = cand.prob * trailing_factor(node.qs, cand, ctx)
                self._finish(plan, node, cand, prob, moment, 0, arrival, made, out)
        if made:
            self._run(_groups(made), moment, before, clock, 0, arrival, out)

    def _run(
        self,
        queue_items: list[list[Delivery]],
        moment: int,
        hclock: float,
        clock: float,
        phase: int,
        arrival: int,
        out: list[Emission],
    ) -> None:
        """Process the instances of one moment and the derived instances their matches
        make, in the order :class:`ecq.network.Network` does (a group is the copies of
        one instance the shared engine makes once)."""
        queue = deque(queue_items)
        while queue:
            group = queue.popleft()
            made: list[Delivery] = []
            for plan, node, cand, x in self._process(group, hclock, moment):
                if node.trailing:
                    deadline = cand.start + node.window
                    if clock > deadline:
                        ctx = Context(moment, self._probe(plan, x.src, hclock), x)
                        prob = cand.prob * trailing_factor(node.qs, cand, ctx)
                        self._finish(plan, node, cand, prob, moment, phase, arrival, made, out)
                    else:
                        node.pending.append((cand, deadline))
                        self._waiting[id(node)] = (plan, node)
                else:
                    self._finish(plan, node, cand, cand.prob, moment, phase, arrival, made, out)
            if made:
                queue.extend(_groups(made))

    def _finish(
        self,
        plan: Plan,
        node: PlanNode,
        cand: Cand,
        prob: float,
        moment: int,
        phase: int,
        arrival: int,
        made: list[Delivery],
        out: list[Emission],
    ) -> None:
        cq = node.cq
        if not bound_ok(cq, prob):
            return
        entries = cand.entries(cq)
        prims = cand.prims if cand.prims else entry_prims(entries)
        if not cq.top:
            flat = [
                ev
                for item in entries
                for inst in (item if type(item) is list else (item,))
                for ev in inst.flat or (inst,)
            ]
            made.append(
                (derived_instance(cand, cq.name, {}, prob, moment, arrival, entries, flat, prims), plan)
            )
            return
        attrs: dict[str, Any] = {}
        for label, fn in cq.returns:
            value = fn(cand.binding)
            if value is not MISSING:
                attrs[label] = value
        out.append(Emission(node.qs, cand, prob, attrs, phase))
        plan.matches += 1
        derived = "@" + cq.name
        if derived in self.index:
            made.append(
                (
                    derived_instance(cand, derived, dict(attrs), prob, moment, arrival, entries, None, prims),
                    None,
                )
            )

    def _probe(self, plan: Plan, src: Any, hclock: float) -> Callable[[str], list[Event]]:
        """The plan's private store for ``src``: visible instances of a class, latest
        first. O(instances of the class and source) per class, cached per call."""
        per = plan.store.get(src)
        horizons = self.horizons
        probes: dict[str, list[Event]] = {}

        def probe(cls: str) -> list[Event]:
            got = probes.get(cls)
            if got is None:
                xs = per.get(cls) if per is not None else None
                hz = horizons.get(cls)
                if not xs or hz is None:
                    got = []
                else:
                    h = hz.at(hclock)
                    got = [p for p in reversed(xs) if p.start >= h]
                probes[cls] = got
            return got

        return probe

    # ------------------------------------------------------------ one instance

    def _process(
        self, group: list[Delivery], hclock: float, moment: int
    ) -> list[tuple[Plan, PlanNode, Cand, Event]]:
        """Hand one instance (or the plans' copies of it) to every plan that uses its
        class, in SASE's phases: :meth:`_evaluate` (search each plan's stacks for the
        source, evaluate the transitions), :meth:`_insert` (each plain sequence's own
        copy on the stacks it pushes to), then :meth:`_keep` (a copy for every plan
        that keeps the class for its general nodes). Plans share nothing, so inserting
        after every plan has evaluated finds the same matches. O(plans using the class
        x their source's stacks)."""
        done: list[tuple[Plan, PlanNode, Cand, Event]] = []
        stored = 0
        for x, owner in group:
            routes = self.index.get(x.type) if owner is None else owner.routes.get(x.type)
            if routes:
                pushes = self._evaluate(routes, x, hclock, moment, done)
                if pushes:
                    stored += self._insert(pushes, x)
        if self.keepers:  # every plan with general nodes is there
            stored += self._keep(group)
        self._stored += stored
        return done

    def _evaluate(
        self,
        routes: list[Route],
        x: Event,
        hclock: float,
        moment: int,
        done: list[tuple[Plan, PlanNode, Cand, Event]],
    ) -> list[Push]:
        """Search and evaluate, per plan: a plain sequence finds its stacks for ``x``'s
        source; position 0 pushes, a later position pushes (the last one completes, into
        ``done``) if the previous stack holds a visible predecessor whose partial match
        started inside the window. Any other node evaluates ``x`` on its private store
        (:meth:`_other`). Returns the pushes to make."""
        prof = self.profile
        timers = self.timers
        now = time.perf_counter
        t0 = t1 = 0.0
        horizons = self.horizons
        src = x.src
        x_start = x.start
        x_end = x.end
        out: list[Push] = []
        for plan, node, positions in routes:
            if node.kind != SASE:
                if prof:
                    t0 = now()
                self._other(plan, node, positions, x, hclock, moment, done)
                if prof:
                    timers["evaluate"] += now() - t0
                continue
            # ---- search: this plan's stacks for the source
            if prof:
                t0 = now()
            st = node.sources.get(src)
            if prof:
                t1 = now()
                timers["search"] += t1 - t0
            if node.never:
                continue
            # ---- evaluate
            push0 = False
            pushes: list[tuple[int, Entry]] | None = None
            filters = node.filters
            for k in positions:
                f = filters[k]
                if f is not None and not f(x):
                    continue
                if k == 0:
                    push0 = True
                    continue
                if st is None:
                    continue
                stack = st.items[k - 1]
                if not stack:
                    continue
                # The latest start of a partial match ``x`` extends, over the visible
                # predecessors that end before ``x`` starts and started inside the window.
                window = node.window
                cls = node.single[k - 1]
                h = horizons[cls].at(hclock) if cls is not None else NEG_INF
                best = NEG_INF
                found = False
                for p, t, _ptr in stack:
                    if p.end > x_start or x_end - t > window:
                        continue
                    if cls is None:
                        if p.start < horizons[p.type].at(hclock):
                            continue
                    elif p.start < h:
                        continue
                    if not found or t > best:
                        best = t
                        found = True
                if not found:
                    continue
                top = st.base[k - 1] + len(stack) - 1
                if k < node.n - 1:
                    if pushes is None:
                        pushes = []
                    pushes.append((k, (x, best, top)))
                else:
                    for env in assemble(node, st, x, top, hclock, horizons):
                        done.append((plan, node, match_cand(env, x), x))
            if prof:
                timers["evaluate"] += now() - t1
            if push0 or pushes:
                out.append((node, st, push0, pushes))
        return out

    def _insert(self, pushes: list[Push], x: Event) -> int:
        """Each plain sequence's own copy of ``x`` on the stacks it pushes to (position
        0 with ``x``'s start, a later one with the start and top it evaluated); returns
        the number of copies stored."""
        prof = self.profile
        t0 = time.perf_counter() if prof else 0.0
        stored = 0
        for node, st, push0, entries in pushes:
            if st is None:
                st = node.sources[x.src] = Stacks(node.n - 1)
            items = st.items
            if push0:
                items[0].append((x, x.start, -1))
                stored += 1
            if entries:
                for k, entry in entries:
                    items[k].append(entry)
                stored += len(entries)
        if prof:
            self.timers["insert"] += time.perf_counter() - t0
        return stored

    def _keep(self, group: list[Delivery]) -> int:
        """Every plan that keeps the instance's class for its general nodes stores its
        own copy, per source; returns the number stored."""
        prof = self.profile
        t0 = time.perf_counter() if prof else 0.0
        stored = 0
        for x, owner in group:
            cls = x.type
            keepers = self.keepers.get(cls, ()) if owner is None else (owner,) if cls in owner.stored else ()
            for plan in keepers:
                per = plan.store.get(x.src)
                if per is None:
                    per = plan.store[x.src] = {}
                xs = per.get(cls)
                if xs is None:
                    per[cls] = [x]
                else:
                    xs.append(x)
                stored += 1
        if prof:
            self.timers["insert"] += time.perf_counter() - t0
        return stored

    def _other(
        self,
        plan: Plan,
        node: PlanNode,
        positions: tuple[int, ...],
        x: Event,
        hclock: float,
        moment: int,
        done: list[tuple[Plan, PlanNode, Cand, Event]],
    ) -> None:
        """A filter, a disjunction or a general node evaluates ``x`` (the general node on
        its plan's private store, with the shared engine's matching rules)."""
        cq = node.cq
        if cq.never:
            return
        kind = node.kind
        if kind == FILTER:
            f = node.filters[0]
            if (f is None or f(x)) and bound_ok(cq, x.prob):
                done.append((plan, node, match_cand([x], x), x))
        elif kind == DISJ:
            for k in positions:
                f = node.filters[k]
                if f is None or f(x):
                    if bound_ok(cq, x.prob):
                        done.append((plan, node, match_cand([x], x, k, node.n), x))
                    return
        elif x.type in node.finals and x.moment > plan.reg:
            ctx = Context(moment, self._probe(plan, x.src, hclock), x)
            for cand in complete(node.qs, x, ctx):
                done.append((plan, node, cand, x))

    # ----------------------------------------------------------------- cleaning

    def clean(self) -> int:
        """Every plan drops, from the bottom of each of its per-source stacks and lists,
        the instances below their class's horizon, and deletes emptied per-source
        structures. O(plans x sources + dropped): the SP scheme's cleaning cost."""
        t0 = time.perf_counter() if self.profile else 0.0
        self.since_clean = 0
        clock = self.clock
        limits = {cls: hz.at(clock) for cls, hz in self.horizons.items()}
        dropped = 0
        for plan in self.plans.values():
            for node in plan.nodes:
                if not node.sources:
                    continue
                empty = []
                for src, st in node.sources.items():
                    live = False
                    for k, stack in enumerate(st.items):
                        cut = 0
                        for p, _t, _ptr in stack:
                            if p.start < limits[p.type]:
                                cut += 1
                            else:
                                break
                        if cut:
                            del stack[:cut]
                            st.base[k] += cut
                            dropped += cut
                        if stack:
                            live = True
                    if not live:
                        empty.append(src)
                for src in empty:
                    del node.sources[src]
            if plan.store:
                gone = []
                for src, per in plan.store.items():
                    for cls in list(per):
                        xs = per[cls]
                        limit = limits[cls]
                        cut = 0
                        for p in xs:
                            if p.start < limit:
                                cut += 1
                            else:
                                break
                        if cut == len(xs):
                            del per[cls]
                        elif cut:
                            del xs[:cut]
                        dropped += cut
                    if not per:
                        gone.append(src)
                for src in gone:
                    del plan.store[src]
        self._stored -= dropped
        if self.profile:
            self.timers["clean"] += time.perf_counter() - t0
        return dropped

    # -------------------------------------------------------------------- stats

    def stored(self) -> int:
        """Instances stored over all plans (one per plan that keeps it). O(1)."""
        return self._stored

    def stats(self) -> dict[str, Any]:
        """Plans, stored instances (every copy), per-source structures, pending matches,
        events, matches, matches per query."""
        return {
            "queries": len(self.plans),
            "plans": len(self.plans),
            "stored_instances": self._stored,
            "source_structures": sum(len(node.sources) for p in self.plans.values() for node in p.nodes)
            + sum(len(p.store) for p in self.plans.values()),
            "pending_matches": sum(len(node.pending) for p in self.plans.values() for node in p.nodes),
            "events": self.arrivals,
            "matches": self.next_seq,
            "clock": self.clock,
            "matches_per_query": {name: p.matches for name, p in self.plans.items()},
        }

    def _check(self) -> None:
        assert self._stored == sum(p.size() for p in self.plans.values()), "stored count drifted"
        for cls, keepers in self.keepers.items():
            assert keepers and all(cls in p.stored and self.plans.get(p.name) is p for p in keepers)
        for cls, routes in self.index.items():
            assert routes and cls in self.horizons
            for plan, _node, positions in routes:
                assert self.plans.get(plan.name) is plan and positions
        for plan in self.plans.values():
            for node in plan.nodes:
                if node.pending:
                    assert self._waiting.get(id(node)) == (plan, node)
                for st in node.sources.values():
                    for stack in st.items:
                        moments = [e[0].moment for e in stack]
                        assert moments == sorted(moments), "a stack must be in arrival order"
            for per in plan.store.values():
                for xs in per.values():
                    assert xs
                    moments = [x.moment for x in xs]
                    assert moments == sorted(moments), "a store must be in arrival order"


# ---------------------------------------------------------------------- helpers


def _groups(made: list[Delivery]) -> list[list[Delivery]]:
    """Sort derived instances as the shared engine does and group the plans' copies of
    one instance (equal keys: the engine makes that instance once, for every query that
    shares the sub-pattern), so they are processed as one step."""
    made.sort(key=lambda d: inst_key(d[0]))
    out: list[list[Delivery]] = []
    last_key: tuple[Any, ...] | None = None
    for d in made:
        key = inst_key(d[0])
        if out and key == last_key and d[1] is not None:
            out[-1].append(d)
        else:
            out.append([d])
        last_key = key
    return out
