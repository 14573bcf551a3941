"""The options as pictures: the text plot (a snapshot) and ``--plot FILE.png`` from bats-sim."""

from __future__ import annotations

import struct

from bats.master.cli.sim import main
from bats.master.core.planning.planner import Option
from bats.master.views.plots import text_plot, write_options_png

PAPER = "deploy/examples/paper/s3-4.toml"
RUN = ["--config", PAPER, "--tasks", "1000", "--runtimes", "normal:15m,134s", "--seed", "1"]


def option(id, label, makespan_s, cost, also=(), pareto=True):
    return Option(id=id, label=label, machines={"c1": id, "c2": 1}, makespan_s=makespan_s,
                  makespan_atu=-(-int(makespan_s) // 3600), cost=cost, cushion=0.0, budget=cost, delta_n=0,
                  rounding="", pareto=pareto, also=tuple(also))


OPTIONS = [
    option(1, "cheapest", 27240.0, 513.0),
    option(2, "+20%", 24720.0, 582.0, also=("fastest-20%",)),
    option(3, "pareto", 15500.0, 668.0),
    option(5, "pareto", 17500.0, 700.0, pareto=False),
    option(4, "fastest", 12500.0, 768.0),
]


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_text_plot_snapshot():
    assert text_plot(OPTIONS, width=24, height=6) == "\n".join([
        "  cost against makespan: C cheapest, + +20%, - fastest-20%, F fastest, * Pareto-optimal, o other",
        "   768.00 ┤F",
        "          │        o",
        "          │     *",
        "          │",
        "          │                   -",
        "   513.00 ┤                       C",
        "          └────────────────────────",
        "           3h28m              7h34m  makespan",
    ])


def test_text_plot_of_one_option_and_of_none():
    one = text_plot(OPTIONS[:1], width=9, height=3)
    assert "C" in one and "7h34m" in one
    assert text_plot([]) == ""


def test_options_png_is_a_real_picture(tmp_path):
    path = tmp_path / "options.png"
    write_options_png(path, OPTIONS, chosen=3, tasks=970)
    data = path.read_bytes()
    width, height = png_size(data)
    assert (width, height) == (700, 450) and len(data) > 20_000


def test_sim_plot_flag_writes_the_png_and_a_missing_folder_is_exit_2(tmp_path, capsys):
    path = tmp_path / "o.png"
    assert main(RUN + ["--plan-only", "-q", "--plot", str(path)]) == 0  # plan only: planned, exit 0 as bats-master
    assert png_size(path.read_bytes()) == (700, 450)
    assert main(RUN + ["--plan-only", "--plot", str(tmp_path / "nope" / "o.png")]) == 2
    assert "--plot" in capsys.readouterr().err


def test_option_costs_that_differ_print_differently():
    from bats.master.views.options_table import money_places

    assert money_places([0.347, 0.354]) == 3
    assert money_places([12.0, 13.5, 13.5]) == 2
    assert money_places([1.00001, 1.00002]) == 5
