"""PNG figures for comparisons and recipes (matplotlib, an optional extra: pip install 'groc-cli[plots]').

Figures are drawn on a bare `matplotlib.figure.Figure` with the Agg canvas, never through
pyplot, so no global backend or figure state is touched, and are written atomically.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from .artifacts.atomic import atomic_path
from .errors import GrocError

INSTALL_HINT = "pip install 'groc-cli[plots]' (or pip install matplotlib)"


def require_matplotlib():
    """The matplotlib module; call it early to fail, with the fix, before work whose result would be plotted."""
    try:
        import matplotlib
    except ImportError:
        raise GrocError(f"plots need matplotlib, which is not installed; {INSTALL_HINT}") from None
    return matplotlib


def _figure(width: float, height: float):
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=150, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


#: The formats a figure is written in, by the file name's ending (matplotlib's Agg and vector backends);
#: a name without one is PNG.
FIGURE_FORMATS = {".png": "png", ".jpg": "jpg", ".jpeg": "jpg", ".pdf": "pdf", ".svg": "svg"}


def figure_format(path: Path) -> str:
    """The format that ``path``'s ending names (PNG for none); an ending groc does not draw is refused,
    before any work, where PNG bytes were written under it."""
    suffix = Path(path).suffix.lower()
    if not suffix:
        return "png"
    if suffix not in FIGURE_FORMATS:
        raise GrocError(f"{path}: groc draws figures as PNG, JPEG, PDF or SVG, not {suffix}; give a file name ending "
                        "in .png, .jpg, .pdf or .svg")
    return FIGURE_FORMATS[suffix]


def _save(fig, path: Path) -> None:
    form = figure_format(path)
    with atomic_path(Path(path)) as tmp:
        fig.savefig(tmp, format=form)  # the temporary name has no suffix to infer it from


def _number(value: Any) -> float:
    return float("nan") if value is None else float(value)


def bar_by_bin(table_rows: Sequence[dict], path: Path, title: str = "", value: str = "median_diff", label: str = "bin",
               count: str | None = "words", xlabel: str = "training frequency of the word",
               ylabel: str = "median loss difference (nats)") -> None:
    """One bar per row (Figure 3 of the GroC paper), a zero line, and n=count under each bar.

    Rows without a value (empty bins) keep their place on the axis with no bar."""
    fig = _figure(max(4.0, 0.9 * len(table_rows) + 1.5), 3.6)
    ax = fig.add_subplot()
    labels = [str(r[label]) for r in table_rows]
    values = [_number(r.get(value)) for r in table_rows]
    colors = ["#2b7bba" if v < 0 else "#d6604d" for v in values]
    ax.bar(range(len(values)), [0.0 if math.isnan(v) else v for v in values], color=colors, width=0.7)
    ax.axhline(0.0, color="black", linewidth=0.8)
    ticks = labels if count is None else [f"{t}\nn={r.get(count) or 0:,}" for t, r in zip(labels, table_rows)]
    ax.set_xticks(range(len(values)), ticks, fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", linewidth=0.4, alpha=0.5)
    ax.set_axisbelow(True)
    _save(fig, path)


def heatmap(grid_rows: Sequence[dict], x: str, y: str, value: str, path: Path, title: str = "") -> None:
    """value over a grid of two hyperparameters (e.g. a cache's θ × weight); the best (minimum) cell is outlined."""
    if not grid_rows:
        raise GrocError("heatmap: no rows to plot")
    from matplotlib.patches import Rectangle

    xs = sorted({r[x] for r in grid_rows})
    ys = sorted({r[y] for r in grid_rows})
    grid = [[float("nan")] * len(xs) for _ in ys]
    for r in grid_rows:
        grid[ys.index(r[y])][xs.index(r[x])] = _number(r[value])
    finite = [(v, i, j) for i, row in enumerate(grid) for j, v in enumerate(row) if math.isfinite(v)]
    fig = _figure(max(4.0, 0.8 * len(xs) + 2.0), max(3.0, 0.5 * len(ys) + 1.5))
    ax = fig.add_subplot()
    image = ax.imshow(grid, cmap="viridis_r", aspect="auto", origin="lower")
    fig.colorbar(image, ax=ax, label=value)
    best = min(finite)[1:] if finite else None
    low, high = (min(finite)[0], max(finite)[0]) if finite else (0.0, 0.0)
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            if math.isfinite(v):
                bright = high == low or (v - low) / (high - low) < 0.5  # viridis_r is light at the low end
                ax.text(j, i, f"{v:.4g}" + ("\nbest" if (i, j) == best else ""), ha="center", va="center", fontsize=7,
                        color="black" if bright else "white", fontweight="bold" if (i, j) == best else "normal")
    if best:
        ax.add_patch(Rectangle((best[1] - 0.5, best[0] - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
    ax.set_xticks(range(len(xs)), [f"{v:g}" if isinstance(v, float) else str(v) for v in xs], fontsize=8)
    ax.set_yticks(range(len(ys)), [f"{v:g}" if isinstance(v, float) else str(v) for v in ys], fontsize=8)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title, fontsize=10)
    _save(fig, path)


def curves(series: dict[str, Sequence[tuple[float, float]]], path: Path, xlabel: str = "epoch", ylabel: str = "loss",
           title: str = "") -> None:
    """One line per named series of (x, y) points, e.g. train and valid loss per epoch (the paper's Figures 4-5)."""
    if not series:
        raise GrocError("curves: no series to plot")
    fig = _figure(5.0, 3.4)
    ax = fig.add_subplot()
    for name, points in series.items():
        points = sorted(points)
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3, label=name)
    if all(float(p[0]).is_integer() for points in series.values() for p in points):
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs, not 1.25 epochs
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(linewidth=0.4, alpha=0.5)
    ax.legend(fontsize=8)
    _save(fig, path)


def training_curves(runs: dict[str, dict], path: Path, smooth: int = 50, title: str = "") -> None:
    """Training curves of one or several runs (`groc plot`): left, the training loss per step
    (a moving average over `smooth` steps) against training tokens; right, training (dashed) and
    validation (solid) perplexity per epoch. Each run: {"steps": [(tokens, loss)], "epochs":
    [(epoch, train_ppl, valid_ppl)]}; a run without per-step rows (trained before groc logged
    them) has only its epochs."""
    if not runs:
        raise GrocError("training_curves: no runs to plot")
    fig = _figure(10.0, 3.8)
    left, right = fig.subplots(1, 2)
    colors = [f"C{i % 10}" for i in range(len(runs))]
    for (name, run), color in zip(runs.items(), colors):
        steps = run.get("steps") or []
        if steps:
            window = max(1, min(smooth, len(steps)))
            tokens = [t for t, _ in steps]
            losses = [loss for _, loss in steps]
            running, averaged = 0.0, []
            for i, loss in enumerate(losses):
                running += loss - (losses[i - window] if i >= window else 0.0)
                averaged.append(running / min(i + 1, window))
            left.plot(tokens, averaged, color=color, linewidth=1.0, label=name)
        epochs = run.get("epochs") or []
        if epochs:
            x = [e for e, _, _ in epochs]
            right.plot(x, [_number(t) for _, t, _ in epochs], color=color, linestyle="--", marker=".", linewidth=1.0)
            right.plot(x, [_number(v) for _, _, v in epochs], color=color, marker="o", markersize=3, linewidth=1.2,
                       label=name)
    from matplotlib.ticker import MaxNLocator

    left.set_xlabel("training tokens")
    left.set_ylabel(f"training loss (nats; mean of {smooth} steps)")
    right.set_xlabel("epoch")
    right.set_ylabel("perplexity (solid: validation, dashed: training)")
    right.set_yscale("log")
    right.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in (left, right):
        ax.grid(linewidth=0.4, alpha=0.5)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    _save(fig, path)
