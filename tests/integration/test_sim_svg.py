"""`weir sim --svg`: the real binary's plot, parsed with an XML parser.

The numbers come from the SVG's data (see tools/sim_svg.h): each panel's
<g data-algorithm data-peak ...> and its polyline's data-t / data-n, the
exact sliding count of what the algorithm admitted. On the boundary burst
the fixed window's count reaches twice the limit in one window that spans
a window boundary, the sliding log's never passes the limit; the drawn line
and the limit's line sit where the axis labels say those numbers are.
"""
import os
import re
import shlex
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import weir_bin

SVG = "{http://www.w3.org/2000/svg}"
ROOT = Path(__file__).resolve().parents[2]


def sim(*args, check=True):
    r = subprocess.run([weir_bin(), "sim", *args], capture_output=True, timeout=120)
    if check:
        assert r.returncode == 0, r.stderr.decode()
    return r


def panels(root):
    """{algorithm: panel} with the exact steps and the drawing's numbers."""
    out = {}
    for g in root.iter(SVG + "g"):
        name = g.get("data-algorithm")
        line = g.find(SVG + "polyline")
        t = [int(v) for v in line.get("data-t").split()]
        n = [int(v) for v in line.get("data-n").split()]
        assert len(t) == len(n)
        limit_line = g.find(SVG + "line[@class='limit']")
        labels = {}  # grid label -> its line's y
        for text in g.findall(SVG + "text"):
            if text.get("text-anchor") == "end" and re.fullmatch(r"[\d,]+", text.text):
                labels[int(text.text.replace(",", ""))] = float(text.get("y")) - 4
        ys = [float(p.split(",")[1]) for p in line.get("points").split()]
        out[name] = {
            "t": t, "n": n, "peak": int(g.get("data-peak")),
            "admitted": int(g.get("data-admitted")), "denied": int(g.get("data-denied")),
            "limit_y": (float(limit_line.get("y1")), float(limit_line.get("y2"))),
            "labels": labels, "top_y": min(ys),
        }
    return out


def table(text):
    """The text report's rows: {algorithm: (admitted, denied, max in window)}."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+)\s+(\d+)\s+(\d+)\s+(\d+)\s", line)
        if m:
            rows[m.group(1)] = tuple(int(v) for v in m.groups()[1:])
    return rows


@pytest.mark.parametrize("args, limit, window", [
    ([], 10, 1_000_000),
    (["--limit", "5", "--window", "500ms", "--duration", "5s"], 5, 500_000),
])
def test_boundary_burst_doubles_the_fixed_window_and_not_the_log(tmp_path, args, limit, window):
    out = tmp_path / "boundary.svg"
    r = sim("boundary", *args, "--svg", str(out))
    root = ET.parse(out).getroot()
    assert root.tag == SVG + "svg"
    assert int(root.get("data-limit")) == limit
    assert int(root.get("data-window-us")) == window
    p = panels(root)
    assert len(p) == 8 and len(root.findall(f".//{SVG}polyline")) == 8

    for name, s in p.items():
        # the steps are a sliding count: in time order, back to 0 at the end
        assert s["t"] == sorted(set(s["t"])), name
        assert s["n"][-1] == 0 and max(s["n"]) == s["peak"], name
        # the limit's line is level, at the grid line labelled with the limit
        assert s["limit_y"][0] == s["limit_y"][1] == s["labels"][limit], name

    # the same numbers as the table (one key: its busiest key is this one)
    assert table(r.stdout.decode()) == {
        name: (s["admitted"], s["denied"], s["peak"]) for name, s in p.items()}

    fixed = p["fixed_window"]
    assert fixed["peak"] == 2 * limit
    for t, n in zip(fixed["t"], fixed["n"]):
        if n == 2 * limit:
            # 2 x limit admitted in (t - window, t], across a boundary it has
            # just passed (the burst's second half is in its first tenth)
            boundary = t // window * window
            assert t - window < boundary <= t < boundary + window // 10
    # and the drawn line goes up to the label that says 2 x limit
    assert fixed["top_y"] == fixed["labels"][2 * limit]

    log = p["sliding_window_log"]
    assert max(log["n"]) == limit == log["peak"]
    assert all(n <= limit for n in log["n"])
    assert log["top_y"] == log["limit_y"][0]
    assert log["denied"] > 0


def test_bursty_pattern_and_the_same_bytes_every_time(tmp_path):
    a, b = tmp_path / "a.svg", tmp_path / "b.svg"
    sim("bursty", "--limit", "4", "--svg", str(a))
    sim("bursty", "--limit", "4", "--svg", str(b))
    assert a.read_bytes() == b.read_bytes()
    r = sim("bursty", "--limit", "4", "--svg", "-")
    assert r.stdout == a.read_bytes()  # stdout: the SVG alone
    assert sorted(os.listdir(tmp_path)) == ["a.svg", "b.svg"]  # no temporary files
    root = ET.fromstring(r.stdout)
    p = panels(root)
    assert p["sliding_window_log"]["peak"] == 4
    assert all(n <= 4 for n in p["sliding_window_log"]["n"])
    assert p["gcra"]["peak"] == 1  # burst 1: one at a time, a quarter second apart
    assert table(sim("bursty", "--limit", "4").stdout.decode()) == {
        name: (s["admitted"], s["denied"], s["peak"]) for name, s in p.items()}
    title = root.find(SVG + "title").text
    assert title == "weir sim bursty: 4 requests per 1s, the same limit for every algorithm"


def test_names_from_a_trace_are_escaped(tmp_path):
    d = tmp_path / 'dir&<"x">'
    d.mkdir()
    trace = d / "t&'.csv"
    trace.write_text("time_us,key,cost\n0,<k&\"1\">\n5,b\n10,<k&\"1\">\n2000000,<k&\"1\">,2\n")
    out = d / "p.svg"
    sim("--trace", str(trace), "--limit", "2", "--svg", str(out))
    root = ET.parse(out).getroot()
    texts = ["".join(t.itertext()) for t in root.iter(SVG + "text")]
    assert f"trace {trace}" in texts
    assert 'plotted: the key <k&"1">, the one with the most requests' in texts
    p = panels(root)
    assert p["sliding_window_log"]["admitted"] == 4  # units: 1 + 1 + 2
    assert p["sliding_window_log"]["t"] == [0, 10, 1_000_000, 1_000_010, 2_000_000, 3_000_000]


def test_a_file_it_cannot_write_is_an_error_and_leaves_nothing(tmp_path):
    r = sim("boundary", "--svg", str(tmp_path / "no" / "such" / "dir.svg"), check=False)
    assert r.returncode == 1
    assert b"weir sim: cannot write " in r.stderr and b"No such file or directory" in r.stderr
    (tmp_path / "taken").mkdir()
    r = sim("boundary", "--svg", str(tmp_path / "taken"), check=False)
    assert r.returncode == 1 and b"cannot write" in r.stderr
    assert os.listdir(tmp_path) == ["taken"]
    r = sim("--svg", check=False)
    assert r.returncode == 2 and b"--svg needs a value" in r.stderr


def test_the_plots_in_the_docs_are_what_their_commands_make():
    doc = (ROOT / "docs" / "ALGORITHMS.md").read_text()
    commands = re.findall(r"^weir sim (.*) --svg (docs/\S+\.svg)$", doc, re.M)
    assert len(commands) >= 2
    for args, path in commands:
        r = sim(*shlex.split(args), "--svg", "-")
        assert r.stdout == (ROOT / path).read_bytes(), f"{path}: run 'weir sim {args} --svg {path}'"
        assert f"]({Path(path).name})" in doc, f"{path} is not shown"
