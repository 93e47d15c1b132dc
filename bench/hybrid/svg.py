#!/usr/bin/python3
"""bench/hybrid/svg.py SERIES.json OUT.svg - the overshoot runs of
bench/hybrid.sh as a plot: admitted per 100 ms by all instances together,
over time, one panel per sync interval, against the limit's line (rate x
0.1 s). SERIES.json is what `drive.py overshoot-summary --series` writes:
per interval, the points of the round furthest from the limit [seconds
since the clients started, admitted since the last read, seconds since
that read]; a read that came late (a busy machine) is scaled to 100 ms.
Hand-written SVG, standard library only.
"""

import json
import sys
from xml.sax.saxutils import escape

W, PANEL_H, TOP, LEFT, RIGHT, GAP, BOTTOM = 720, 120, 84, 62, 16, 34, 44
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]


def fmt(n):
    return "{:,.0f}".format(n)


def main():
    data = json.load(open(sys.argv[1]))
    rate, burst, n = data["limit"], data["burst"], data["instances"]
    per_bucket = rate * data["bucket_s"]
    ymax = 4 * per_bucket
    xmax = data["seconds"] + 0.5
    intervals = list(data["series"])
    runs = data["shown"]
    H = TOP + len(intervals) * (PANEL_H + GAP) - GAP + BOTTOM
    pw = W - LEFT - RIGHT
    out = []
    put = out.append
    put('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
        'font-family="sans-serif" font-size="11">' % (W, H, W, H))
    put('<rect width="100%" height="100%" fill="white"/>')
    put('<text x="%d" y="18" font-size="13" font-weight="bold">sync: local, %d instances on one '
        'Redis: admitted per 100 ms, all instances together</text>' % (LEFT, n))
    put('<text x="%d" y="56" text-anchor="end" fill="#444">each interval: its round furthest '
        'from the limit</text>' % (W - RIGHT))
    put('<text x="%d" y="36" fill="#444">token bucket %s/s, burst %s, asked %s/s in all (%s '
        'through each) for %g s; allowed = burst + rate x time</text>' % (
            LEFT, fmt(rate), fmt(burst), fmt(rate * n), fmt(rate), data["seconds"]))
    # legend
    lx = LEFT
    put('<line x1="%d" y1="52" x2="%d" y2="52" stroke="#333" stroke-width="1.5"/>' % (lx, lx + 22))
    put('<text x="%d" y="56">admitted per 100 ms</text>' % (lx + 27))
    lx += 150
    put('<line x1="%d" y1="52" x2="%d" y2="52" stroke="#e08000" stroke-width="1.5" '
        'stroke-dasharray="5,3"/>' % (lx, lx + 22))
    put('<text x="%d" y="56">the limit: %s per 100 ms</text>' % (lx + 27, fmt(per_bucket)))
    for k, iv in enumerate(intervals):
        color = COLORS[k % len(COLORS)]
        y0 = TOP + k * (PANEL_H + GAP)

        def X(t):
            return LEFT + pw * min(max(t, 0.0), xmax) / xmax

        def Y(v):
            return y0 + PANEL_H - PANEL_H * min(max(v, 0.0), ymax) / ymax

        put('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>' % (
            LEFT, y0, pw, PANEL_H))
        for v in range(0, int(ymax) + 1, int(per_bucket)):
            put('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>' % (
                LEFT + 1, Y(v), LEFT + pw - 1, Y(v)))
            put('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (LEFT - 5, Y(v) + 4, fmt(v)))
        put('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e08000" stroke-width="1.5" '
            'stroke-dasharray="5,3"/>' % (LEFT, Y(per_bucket), LEFT + pw, Y(per_bucket)))
        pts, clipped = [], []
        for t, adm, dt in data["series"][iv]:
            if dt <= 0:
                continue
            v = adm * data["bucket_s"] / dt
            pts.append("%.1f,%.1f" % (X(t), Y(v)))
            if v > ymax:
                clipped.append((t, v))
        put('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>' % (
            color, " ".join(pts)))
        for t, v in clipped:
            put('<text x="%.1f" y="%d" fill="%s">%s (off the scale)</text>' % (
                X(t) + 4, y0 + 12, color, fmt(v)))
        r = runs[iv]
        over = max(r["overshoot"], 0)
        under = max(r["under"], 0)
        title = "sync_interval %s, round %d of %d: admitted %s of %s allowed, overshoot %s, " \
            "unused %s" % (iv, r["round"], data["rounds"], fmt(r["admitted"]), fmt(r["allowed"]),
                           fmt(over), fmt(under))
        put('<text x="%d" y="%d" fill="%s" font-weight="bold">%s</text>' % (
            LEFT, y0 - 5, color, escape(title)))
        put('<text transform="translate(14,%d) rotate(-90)" text-anchor="middle" '
            'fill="#444">admitted</text>' % (y0 + PANEL_H // 2))
    # x axis, under the last panel
    yb = TOP + len(intervals) * (PANEL_H + GAP) - GAP
    for s in range(0, int(xmax) + 1):
        x = LEFT + pw * s / xmax
        put('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#999"/>' % (x, yb, x, yb + 4))
        put('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (x, yb + 16, s))
    put('<text x="%d" y="%d" text-anchor="middle" fill="#444">seconds since the clients '
        'started (every instance&#8217;s /metrics read every 100 ms)</text>' % (
            LEFT + pw // 2, yb + 34))
    put("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
