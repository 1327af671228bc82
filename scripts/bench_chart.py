"""The line charts of BENCHMARKS.md (SVG, no dependencies): decisions/s
against concurrency, one line per series."""


def line_chart(path, title, x_label, levels, series, width=640, legend=160):
    """Writes to `path` a chart of `series` — (label, colour, values at
    `levels`) — with `levels` evenly spaced along the x axis."""
    W, H, L, B, T, R = width, 360, 70, 40, 30, legend
    top = max(max(values) for _, _, values in series) * 1.1

    def x(i):
        return L + i * (W - L - R) / (len(levels) - 1)

    def y(v):
        return H - B - v / top * (H - B - T)

    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{L}" y="18">{title}</text>']
    for i in range(6):
        v = top * i / 5
        svg.append(f'<line x1="{L}" x2="{W - R}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
        svg.append(f'<text x="{L - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v / 1000:.0f}k</text>')
    for i, c in enumerate(levels):
        svg.append(f'<text x="{x(i):.1f}" y="{H - B + 16}" text-anchor="middle">{c}</text>')
    svg.append(f'<text x="{(L + W - R) / 2}" y="{H - 6}" text-anchor="middle">{x_label}</text>')
    for n, (label, colour, values) in enumerate(series):
        line = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        svg.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for i, v in enumerate(values):
            svg.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3" fill="{colour}"/>')
        svg.append(f'<rect x="{W - R + 12}" y="{T + 10 + 18 * n}" width="12" height="3" fill="{colour}"/>')
        svg.append(f'<text x="{W - R + 30}" y="{T + 15 + 18 * n}">{label}</text>')
    svg.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(svg) + "\n")
