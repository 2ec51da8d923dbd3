"""The journal's records around a seq, for a reader (``smp-emu replay --around``).

``queue_listing`` lists the runs, decisions, table events and state changes
near a seq, each run with its recorded and replayed decision and its first
messages cut short; ``format_listing`` writes that as text.
"""

from __future__ import annotations

from smp.app.journal_records import read_records
from smp.app.replay_report import (
    SHOW_MESSAGES,
    ReplayReport,
    _brief,
    _fields,
    _nil,
    _same,
    _show,
    _terms,
    _word,
)
from smp.core import messages as M
from smp.core.dispatch import Decision

__all__ = ["queue_listing", "format_listing"]


def queue_listing(
    path: str, report: ReplayReport, around: int | None = None, limit: int = 20
) -> list[dict]:
    """The journal's records near ``around`` (a seq; default: the first
    divergence, else the start) with each run's messages and decisions.

    Shows ``limit`` runs, half before ``around``, and the table events and
    state changes recorded among them (at most ``10 * limit`` records in
    all), in seq order, ending with an ``end`` item at ``around`` when it is
    past the journal's last record; each run with its first ``SHOW_MESSAGES`` messages,
    each cut short (``SHOW_CHARS``), so the listing is bounded whatever the
    journal holds."""
    idx = report.index
    if around is None:
        around = report.divergences[0]["seq"] if report.divergences else 0
    at = next((k for k, e in enumerate(idx) if e[1] >= around or e[0] >= around), len(idx))
    lo_k = max(0, at - limit // 2)
    chosen = idx[lo_k : lo_k + max(1, limit)]
    if not chosen:
        return []
    lo = min(min(e[0] for e in chosen), around)
    hi = max(max(e[1] for e in chosen), around)
    # (every run queued in the window, with its decision: those of the
    # runs listed beside the chosen ones were "undecided")
    by_q = {e[0]: e for e in idx if lo <= e[0] <= hi}
    _, records, _ = read_records(path)
    out: list = []
    most = 10 * max(1, limit)
    for rec in records:
        seq, kind = rec[0], rec[1]
        if seq < lo or seq > hi:
            continue
        if len(out) >= most:
            out.append({"seq": seq, "kind": "more", "text": f"... records up to #{hi} not listed"})
            break
        if kind == "q":
            e = by_q.get(seq)
            item = {
                "seq": seq,
                "kind": "q",
                "type": M.TYPE_NAMES.get(rec[2], rec[2]),
                "n": rec[7],
                "messages": [_show(t) for t in _terms(rec, SHOW_MESSAGES)],
            }
            if rec[7] > SHOW_MESSAGES:
                item["messages"].append(f"... and {rec[7] - SHOW_MESSAGES} more")
            if e is not None:
                rec_d, rep_d = Decision(*e[4]), Decision(*e[5])
                item.update(
                    decided_at=e[1],
                    recorded=_word(rec_d),
                    replayed=_word(rep_d),
                    diverges=not _same(rec_d, rep_d),
                    race_window=e[6],
                )
            out.append(item)
        elif kind == "d":
            out.append(
                {
                    "seq": seq,
                    "kind": "d",
                    "type": M.TYPE_NAMES.get(rec[2], rec[2]),
                    "n": rec[3],
                    "text": _word(Decision(rec[4], rec[5], rec[6])),
                }
            )
        elif kind == "s":
            out.append(
                {"seq": seq, "kind": "s", "text": f"v{rec[2].version} " + _brief(_fields(rec[2]))}
            )
        elif kind == "e":
            out.append(
                {
                    "seq": seq,
                    "kind": "e",
                    "text": " ".join(x if type(x) is str else _nil(x) for x in rec[2:]),
                }
            )
        elif kind == "lost":
            out.append(
                {"seq": seq, "kind": "lost", "text": f"scheduler {rec[2]}: {len(rec[3])} processes"}
            )
        elif kind == "end":
            out.append(
                {
                    "seq": seq,
                    "kind": "end",
                    "text": f"the journal's end: the dispatcher queued {rec[2]} messages in all",
                }
            )
    last = max((rec[0] for rec in records), default=None)
    if last is None or around > last:
        # Where the asked-for seq would be, a line saying there is none.
        where = f"its last record is #{last}" if last is not None else "it has no records"
        out.append({"seq": around, "kind": "end", "text": f"past the journal's end: {where}"})
    return out


def format_listing(items: list[dict], around: int | None = None) -> str:
    """The listing as text: each run's messages in dbg's format under its decision."""
    lines = []
    for it in items:
        mark = ">>" if around is not None and it["seq"] == around else "  "
        if it["kind"] == "q":
            head = f"{mark}#{it['seq']:<7} queued {it['type']} x{it['n']}"
            if "recorded" in it:
                head += f"  -> #{it['decided_at']} {it['recorded']}"
                if it["diverges"]:
                    head += f"  DIVERGES: replay says {it['replayed']}"
                elif it["race_window"]:
                    head += "  (seen before a concurrent change)"
            else:
                head += "  (undecided)"
            lines.append(head)
            # (a message printed on several lines, as dbg's ~p breaks a long
            # one, keeps its indentation on each)
            lines += [" " * 11 + m.replace("\n", "\n" + " " * 11) for m in it["messages"]]
        else:
            lines.append(
                f"{mark}#{it['seq']:<7} {it['kind']:<6} "
                + (f"{it['type']} x{it['n']}: {it['text']}" if it["kind"] == "d" else it["text"])
            )
    return "\n".join(lines) + ("\n" if lines else "")
