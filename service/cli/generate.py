"""``scemon generate``: write the SCEMon paper's synthetic workload as files that
``scemon replay`` (or the Spark job) reads, so a measurement can be repeated exactly."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import orjson
import typer

from ecq.evaluation import workload as wl

__all__ = ["generate"]


class Template(StrEnum):
    seq = "seq"
    cnj = "cnj"
    dsj = "dsj"


def generate(
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Folder to write queries.txt and events.jsonl into.")
    ],
    queries: Annotated[int, typer.Option(help="Number of queries (Nq).")] = 1000,
    sources: Annotated[int, typer.Option(help="Number of event sources (Ns).")] = 1000,
    classes: Annotated[int, typer.Option(help="Number of primitive event classes (Npc).")] = 50,
    steps: Annotated[int, typer.Option(help="Components per sequence query (Nstep).")] = 3,
    events: Annotated[int, typer.Option(help="Number of events.")] = 100_000,
    source_gap: Annotated[
        float, typer.Option(help="Mean seconds between two events of one source.")
    ] = 3600.0,
    template: Annotated[
        Template, typer.Option(help="Query template: sequence, conjunction or disjunction.")
    ] = Template.seq,
    seed: Annotated[int, typer.Option(help="Random seed: the same options give the same files.")] = 42,
) -> None:
    """Write a workload of the paper's templates: QUERY blocks in queries.txt (windows
    200-240 mins) and random (src, class, start, end) events in events.jsonl."""
    w = wl.Workload(
        n_queries=queries,
        n_sources=sources,
        n_classes=classes,
        n_steps=steps,
        source_gap=source_gap,
        seed=seed,
    )
    made = {
        Template.seq: wl.sequence_queries,
        Template.cnj: wl.conjunction_queries,
        Template.dsj: wl.disjunction_queries,
    }[template](w)
    out.mkdir(parents=True, exist_ok=True)
    (out / "queries.txt").write_text("".join(f"QUERY {name}\n{text}\n\n" for name, text in made))
    with (out / "events.jsonl").open("wb") as fh:
        for e in wl.events(w, events):
            fh.write(orjson.dumps(e.to_dict()) + b"\n")
    typer.echo(
        f"wrote {len(made)} queries to {out / 'queries.txt'} and {events} events to {out / 'events.jsonl'}",
        err=True,
    )
