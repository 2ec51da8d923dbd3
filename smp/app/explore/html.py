"""The HTML report of an explore result (``smp-emu report`` of its JSON):
``explore_html`` for an explore scenario's, ``explore_sim_html`` for a run
scenario's explored in the simulator.

``explore_html`` gives the page's title and body: the figures, the queue,
the changes, the outcome tree as an SVG and the outcome table.  The tree
has one column per queued message, in queue order: a branch is the
receiver that got the message or ``drop:reason``, a leaf is an outcome
with its shortest schedule, green when nonsmp produces it too, red when it
cannot; drops are amber.
"""

from __future__ import annotations

from html import escape

from smp.app.explore.text import _state_text
from smp.sim.report import race_lines, shrunk_words

__all__ = ["explore_html", "explore_sim_html"]


def explore_html(d: dict) -> tuple[str, str]:
    """(title, body) of the report page for an explore result: the figures,
    the outcome tree (one level per queued message, a branch per receiver
    or drop reason, a leaf per outcome) and the outcome table."""
    s = d["schedules"]
    title = f"smp-emu explore: {d['scenario']}"
    parts = [
        f"<p>{_n(len(d['queue']), 'queued message')}, {_n(len(d['changes']), 'change')}: "
        f"{_n(s['possible'], 'schedule')} possible, {_n(s['classes'], 'class', 'classes')}, "
        f"{s['run']} run"
        f"{' (exhaustive)' if s['exhaustive'] else ''}"
        f"{'' if s['exhaustive'] or s['seed'] is None else ', seed ' + str(s['seed'])}, "
        f"{_n(s['outcomes'], 'outcome')}, {s['elapsed_s']:.1f} s.</p>"
    ]
    parts.append(
        "<h2>Queue</h2><table><tr><th>#</th><th>type</th><th>from</th><th>message</th>"
        "</tr>"
        + "".join(
            f"<tr><td>m{q['index']}</td><td>{escape(q['type'])}</td>"
            f"<td>{escape(q['from'])}</td><td><code>{escape(q['msg'])}</code></td></tr>"
            for q in d["queue"]
        )
        + "</table>"
    )
    parts.append(
        "<h2>Changes</h2><ul>"
        + "".join(
            f"<li><code>{escape(c['name'])}</code>: <code>{escape(c['call'])}</code>, does not "
            f"commute with {escape(', '.join(c['depends_on']) or 'any message')}</li>"
            for c in d["changes"]
        )
        + "</ul>"
    )
    parts.append(
        "<h2>Outcomes as a tree</h2>"
        + _tree_svg(d)
        + "<p class='note'>One column per queued message, in queue order: a branch is "
        "the receiver that got it or <code>drop:reason</code>; a leaf is an outcome "
        "with its shortest schedule (<code>change@k</code>: made after k queued "
        "messages were dispatched). A leaf in green is an outcome nonsmp has too, one "
        "in red an outcome only smp can have; a drop is in orange.</p>"
    )
    rows = "".join(
        f"<tr><td>#{o['index']}</td><td><code>{escape(o['schedule'])}</code></td>"
        f"<td>{escape(_state_text(o['state'], ('seq_tracer', 'system_monitor', 'system_profile', 'dead')))}</td>"
        f"<td>{'' if o['nonsmp'] is None else ('same as nonsmp' if o['nonsmp'] else 'not in nonsmp')}</td>"
        f"<td class='why'>{escape('; '.join(w['text'] for w in o['why_not_nonsmp']))}</td></tr>"
        for o in d["outcomes"]
    )
    parts.append(
        "<h2>Outcomes</h2><table><tr><th>#</th><th>shortest schedule</th>"
        "<th>state after the queue</th><th>nonsmp</th><th>why nonsmp cannot</th></tr>"
        + rows
        + "</table>"
    )
    return title, "".join(parts)


def _sample_end(r: dict, limits: dict) -> str:
    """How a random or PCT sample ended, as the terminal says it: a sample
    has no estimate of the whole."""
    asked = limits.get("runs")
    of = "" if asked is None or asked == r["executions"] else f" of the {asked:,} asked for"
    why = {"time": " (the time budget cut the runs)", "interrupted": " (interrupted)"}
    cut = "".join(why.get(c, f" (cut by {escape(c)})") for c in r["cut_by"])
    return (
        f"a sample of {r['executions']:,} runs{of}{cut}: it does not say how many orders "
        "there are, nor that none is left."
    )


def _tree_svg(d: dict) -> str:
    outs = d["outcomes"]
    nq = len(d["queue"])
    # the prefix tree of the fates
    root: dict = {"label": "queue", "kids": {}, "leaf": None}
    for o in outs:
        node = root
        for f in o["fates"]:
            node = node["kids"].setdefault(f, {"label": f, "kids": {}, "leaf": None})
        leaf = {
            "label": f"#{o['index']} {o['schedule']}" + (" (nonsmp)" if o["nonsmp"] else ""),
            "kids": {},
            "leaf": o,
        }
        node["kids"][f"#{o['index']}"] = leaf
    cw = 7  # about a character at 12 px
    heads = [f"m{i + 1} {q['type']}" for i, q in enumerate(d["queue"])]
    # (a column as wide as its longest fate and its heading, which the
    # fates' width alone let run into the next one: "m1 SEQTRACE")
    longest = max([len(f) for o in outs for f in o["fates"]] + [len(h) for h in heads] + [5])
    col_w, row_h, pad = cw * longest + 40, 26, 12
    leaves: list = []
    pos: dict[int, tuple] = {}

    def layout(node, depth):
        kids = list(node["kids"].values())
        if not kids:
            y = pad + row_h * len(leaves) + row_h / 2
            leaves.append(node)
        else:
            ys = [layout(k, depth + 1) for k in kids]
            y = (ys[0] + ys[-1]) / 2
        pos[id(node)] = (pad + depth * col_w, y)
        return y

    layout(root, 0)
    width = pad * 2 + (nq + 1) * col_w + cw * max(len(n["label"]) for n in leaves) + 20
    height = pad * 2 + row_h * max(1, len(leaves)) + 20
    el = []

    def draw(node):
        x, y = pos[id(node)]
        for k in node["kids"].values():
            kx, ky = pos[id(k)]
            x0 = x + cw * len(node["label"]) + 4
            el.append(
                f"<path d='M{x0:.0f},{y:.0f} C{x0 + 20:.0f},{y:.0f} {kx - 20:.0f},"
                f"{ky:.0f} {kx - 4:.0f},{ky:.0f}' fill='none' stroke='#999'/>"
            )
            draw(k)
        leaf = node["leaf"]
        color = "#222"
        if leaf is not None:
            color = "#1a7f37" if leaf["nonsmp"] else "#b42318"
        elif node["label"].startswith("drop:"):
            color = "#b54708"
        el.append(
            f"<text x='{x:.0f}' y='{y + 4:.0f}' font-size='12' fill='{color}'>"
            f"{escape(node['label'])}</text>"
        )

    draw(root)
    head_text = "".join(
        f"<text x='{pad + (i + 1) * col_w}' y='{height - 6}' font-size='11' "
        f"fill='#666'>{escape(h)}</text>"
        for i, h in enumerate(heads)
    )
    return (
        f"<figure class='plot' id='explore-tree'><figcaption>outcomes of "
        f"{escape(d['scenario'])}</figcaption><svg class='chart' xmlns='http://www.w3.org/2000/svg' "
        f"width='{width}' height='{height}' viewBox='0 0 {width} {height}' role='img'>"
        + "".join(el)
        + head_text
        + "</svg></figure>"
    )


def _fates_table(fates: list) -> str:
    return (
        "<table><tr><th>message</th><th>fate</th></tr>"
        + "".join(
            f"<tr><td><code>{escape(str(m))}</code></td><td>{escape(str(f))}</td></tr>"
            for m, f in fates
        )
        + "</table>"
    )


def _shrunk_html(sh) -> str:
    """An outcome's shrunk schedule (``smp.sim.shrink``), if it has one."""
    if not isinstance(sh, dict):
        return ""
    words = shrunk_words(sh.get("choices", 0), sh.get("from_choices", 0), sh.get("runs", 0))
    return (
        f"<p>{escape(words)}: <code>{escape(str(sh.get('replay', sh.get('schedule'))))}</code></p>"
    )


def _proof_html(p) -> str:
    """An outcome's proof on real processes (``--prove``), if it was asked."""
    if not isinstance(p, dict):
        return ""
    if p.get("same"):
        return (
            f"<p>Proof on real processes: the same ({escape(str(p.get('steps')))} steps, "
            f"{len(p.get('fates') or {})} message fates).</p>"
        )
    items = "".join(f"<li>{escape(str(m))}</li>" for m in (p.get("mismatches") or [])[:5])
    return f"<p><strong>Proof on real processes: DIFFERS</strong></p><ul>{items}</ul>"


def explore_sim_html(d: dict) -> tuple[str, str]:
    """(title, body) of the report page for a simulator explore result
    (``smp-emu explore SCENARIO --json`` of a run scenario): the figures and
    bounds, then each distinct outcome with its fates, what each tracer
    received, the invariants it broke, the race pairs that made the explorer
    try it, nonsmp's verdict, its events, the command that replays it and
    (``--prove``) its proof on real processes."""
    r = d["result"]
    title = f"smp-emu explore: {d['scenario']} (simulator)"
    # (as the terminal says it: the blocked ones are not counted among them)
    runs = f"{r['executions']} executions" + (
        f" (besides {r['blocked']} sleep-set blocked, not counted)" if r["blocked"] else ""
    )
    cut = ", ".join(r["cut_by"]) if r["cut_by"] else ""
    how = str(r["method"])
    if how == "dpor" and r.get("dpor"):
        how = f"{r['dpor']} DPOR"
    figures = (
        f"<p>{escape(how)}"
        f"{'' if r['seed'] is None else ', seed ' + escape(str(r['seed']))}, "
        f"{r['schedulers']} schedulers: {runs}, "
        f"{r['events']} events, {len(r['outcomes'])} distinct outcomes in "
        f"{r['elapsed']:.2f} s; "
        + (
            "exhaustive."
            if r["exhausted"]
            else _sample_end(r, d.get("limits") or {})
            if r["method"] in ("random", "pct")
            else f"cut by {escape(cut or 'a bound')} (estimated total {r['estimate']:,.0f})."
        )
        + (
            ""
            if r["first_violation"] is None
            else f" First broken invariant at execution {r['first_violation']}."
        )
        + "</p>"
    )
    bounds = ", ".join(f"{escape(k)} {escape(str(v))}" for k, v in d["bounds"].items())
    notes = "".join(f"<li>{escape(str(n))}</li>" for n in list(d["notes"]) + list(r["notes"]))
    parts = [
        figures,
        f"<p>Bounds: {bounds or 'none'}.</p>",
        f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "",
    ]
    expect = "".join(
        f"<li><code>{escape(str(e['where']))}</code> <code>{escape(str(e['clause']))}</code>: "
        + (
            f"broken in outcome(s) {escape(', '.join(f'#{i}' for i in e['broken_in']))} "
            f"of {e['outcomes']}"
            if e["broken_in"]
            else f"held in all {e['outcomes']} outcome(s)"
        )
        + (
            ""
            if e["nonsmp_broken"] is None
            else f"; nonsmp {'breaks' if e['nonsmp_broken'] else 'keeps'} it"
        )
        + "</li>"
        for e in d.get("expect", [])
    )
    if expect:
        parts.append(f"<h2>Expect clauses</h2><ul>{expect}</ul>")
    # outcomes are numbered from 1 in their order, as the text report and the
    # expect clauses' broken_in number them; "index" is the execution that
    # first reached each
    rows = "".join(
        f"<tr><td><a href='#outcome-{n}'>#{n}</a></td><td>{o['count']}</td>"
        f"<td>{o['index']}</td>"
        f"<td>{len(o['outcome']['fates'])}</td><td>{len(o['outcome']['violations'])}</td>"
        f"<td>{len(o['races'])}</td><td>{escape(str(o['nonsmp_verdict'] or ''))}</td></tr>"
        for n, o in enumerate(r["outcomes"], 1)
    )
    parts.append(
        "<h2>Outcomes</h2><table><tr><th>#</th><th>executions</th><th>first at execution</th>"
        "<th>messages</th>"
        "<th>broken invariants</th><th>race pairs</th><th>nonsmp</th></tr>" + rows + "</table>"
    )
    for n, o in enumerate(r["outcomes"], 1):
        parts.append(
            f"<h3 id='outcome-{n}'>Outcome #{n}: {o['count']} execution(s), the first "
            f"execution {o['index']}</h3>"
            + _execution_html(
                o,
                f"<p>Replay: <code>{escape(o['replay'])}</code></p>"
                + _shrunk_html(o.get("shrunk"))
                + (
                    f"<p>Not shrunk: {escape(str(o['not_shrunk']))}.</p>"
                    if o.get("not_shrunk")
                    else ""
                ),
            )
        )
    nonsmp = r.get("nonsmp")
    if nonsmp:
        parts.append("<h2>nonsmp</h2>" + _fates_table(nonsmp["fates"]))
    return title, "".join(parts)


def _execution_html(o: dict, after_races: str) -> str:
    """One execution's broken invariants, nonsmp verdict, fates, what each
    collector received and race pairs, then ``after_races``, its proof and
    its events (an outcome's first execution, or a replayed schedule)."""
    out = o["outcome"]
    received = "".join(
        f"<li><code>{escape(name)}</code>: {len(terms)} message(s)"
        + (
            "<ul>" + "".join(f"<li><code>{escape(t)}</code></li>" for t in terms) + "</ul>"
            if terms
            else ""
        )
        + "</li>"
        for name, terms in out["received"].items()
    )
    violations = "".join(f"<li>{escape(str(v))}</li>" for v in out["violations"])
    races = escape("\n".join(line[4:] for line in race_lines(o["races"])))
    return (
        (f"<p>Broken invariants:</p><ul>{violations}</ul>" if violations else "")
        + f"<p>nonsmp: {escape(str(o['nonsmp_verdict'] or 'no verdict'))}</p>"
        + _fates_table(out["fates"])
        + f"<p>Received:</p><ul>{received}</ul>"
        + (f"<p>Race pairs:</p><pre>{races}</pre>" if races else "")
        + after_races
        + _proof_html(o.get("proof"))
        + "<details><summary>events</summary><pre>"
        + escape("\n".join(o["events"]))
        + "</pre></details>"
    )


def explore_replay_html(d: dict) -> tuple[str, str]:
    """(title, body) of the report page for one replayed schedule
    (``smp-emu explore SCENARIO --schedule '...' --json``)."""
    x = d["replay"]
    title = f"smp-emu explore: {d['scenario']} (one schedule, simulator)"
    given, added = x["given_steps"], x["completed_steps"]
    bounds = ", ".join(f"{escape(k)} {escape(str(v))}" for k, v in d["bounds"].items())
    body = (
        f"<p>{d['schedulers']} schedulers; the schedule names {given} step(s)"
        + (f", the first enabled thread took each of the {added} after them" if added else "")
        + f". Bounds: {bounds or 'none'}.</p>"
        + _execution_html(x, f"<p>Schedule: <code>{escape(x['schedule'])}</code></p>")
    )
    return title, body


def _n(n: int, one: str, many: str | None = None) -> str:
    """``n`` and its noun, singular for 1 ("1 change", it said "1 changes")."""
    return f"{n} {one if n == 1 else many or one + 's'}"
