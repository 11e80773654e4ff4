"""Figure 3 as a table: loss difference per training-frequency bin (recipes/figure3/run.sh)."""

from __future__ import annotations

from pathlib import Path

from report import DATASET_NAMES, Table, load, report


@report
def figure3(out: Path, scale: str, datasets: list[str], baselines: list[str]) -> None:
    """Figure 3 as a table: median loss difference per training-frequency bin (figure3.sh, from groc compare)."""
    rows = {(ds, base): load(out / f"{ds}-{base}-vs-groc.json") for ds in datasets for base in baselines}
    bins = [b["bin"] for b in next(iter(rows.values()))["bins"]]
    t = Table("figure3", f"Figure 3: median loss difference, GroC minus baseline, per training-frequency bin (SCALE={scale})",
              ["dataset", "baseline", *bins, "overall"], {b: "+.3f" for b in [*bins, "overall"]})
    for (ds, base), r in rows.items():
        t.add(dataset=DATASET_NAMES[ds], baseline=base,
              **{b["bin"]: b["median_diff"] for b in r["bins"]}, overall=r["overall"]["median_diff"])
    t.write(out, notes=["Nats per word, loss(GroC) - loss(baseline): negative = GroC better on the words of that bin "
                        "(the paper plots the same quantity per baseline).",
                        "Plots: <dataset>-<baseline>-vs-groc.png (groc compare --plot)."])
