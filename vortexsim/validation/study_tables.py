"""The output of :mod:`vortexsim.validation.resolution_study`: its JSON document (written
atomically), the Markdown tables of each case (rows coarse, medium, fine, default and the
spread between the two finest) and the printed plan."""
from __future__ import annotations

import json
import os

from vortexsim.validation.records import jsonable

#: rows of the tables, in this order
LEVELS = ("coarse", "medium", "fine", "default")
#: approach times: h falls to these fractions of the initial radius
APPROACH = (0.5, 0.25)
#: oblique_collision: the bridge circulation (fraction of Γ) whose first times are reported
BRIDGE_LEVELS = (0.1, 0.5)


def write_json(path, doc):
    """Write ``doc`` to ``path`` atomically (a temporary file, then rename)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1, default=jsonable)
    os.replace(tmp, path)


def fmt(v, spec=".4g"):
    return "–" if v is None else format(v, spec)


def _sp(s, spec=".2g"):
    if not s:
        return "–"
    rel = "" if s["rel"] is None else f" ({100 * s['rel']:.2g} %)"
    return f"{format(s['abs'], spec)}{rel}"


def columns(case, names):
    """[(header, cell(quantities), spread cell(spread))] of a case's table."""
    if case == "leapfrog":
        def passes_spread(s):
            text = ", ".join(_sp(x) for x in s.get("pass_times", [])) or "–"
            count = s.get("pass_times_count")
            if count:
                text += f" (passes: fine {count['fine']}, medium {count['medium']})"
            return text
        cols = [("pass times", lambda q: ", ".join(f"{p:.3f}" for p in q["pass_times"]) or "none",
                 passes_spread)]
        for name in names:
            cols.append((f"{name} R min–max",
                         lambda q, n=name: (f"{q[n + '_radius_min']:.4f}–"
                                            f"{q[n + '_radius_max']:.4f}"),
                         lambda s, n=name: f"{_sp(s.get(n + '_radius_min'))}; "
                                           f"{_sp(s.get(n + '_radius_max'))}"))
        return cols
    if case == "oblique_collision":
        cols = [(f"t(bridge = {level:g} Γ)", lambda q, k=f"t_bridge{level:g}": fmt(q[k], ".3f"),
                 lambda s, k=f"t_bridge{level:g}": _sp(s.get(k))) for level in BRIDGE_LEVELS]
        cols.append(("bridge(t_end)/Γ", lambda q: f"{q['bridge_final']:.4f}",
                     lambda s: _sp(s.get("bridge_final"))))
        return cols
    cols = [("closest approach t (h_min)",
             lambda q: (f"{q['t_min']:.3f} ({q['h_min']:.4f})" if q["reached"]
                        else f"not reached (h(t_end) = {q['h_min']:.4f})"),
             lambda s: f"{_sp(s.get('t_min'))} ({_sp(s.get('h_min'))})")]
    for frac in APPROACH:
        key = f"t_h{frac:g}"
        cols.append((f"t(h = {frac:g} R₀)", lambda q, k=key: fmt(q[k], ".3f"),
                     lambda s, k=key: _sp(s.get(k))))
    cols.append(("R(t_end)", lambda q: f"{q['radius_final']:.4f}",
                 lambda s: _sp(s.get("radius_final"))))
    return cols


def _elements(r):
    """The element count of a run: at the start, and at the end where remeshing changed it."""
    start, end = r.get("n_elements_start", r["n_elements"]), r.get("n_elements_end")
    return f"{start} → {end}" if end is not None and end != start else str(start)


def markdown(case, entry):
    """One Markdown table of a case: rows coarse, medium, fine, default, spread."""
    runs = entry["runs"]
    if not runs:
        return ""
    first = next(iter(runs.values()))
    cols = columns(case, first["series"]["ring_names"])
    head = ["level", "elements", "σ", "σ_eff", *[c[0] for c in cols], "steps, wall"]
    lines = [f"### {case} (t_end = {first['t_end']:g}, dt = {first['dt']:g}, "
             f"{first['integrator']})", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for level in LEVELS:
        r = runs.get(level)
        if r is None:
            continue
        q = r["quantities"]
        note = "" if r["complete"] else f" (incomplete: t = {r['t_reached']:.4g})"
        lines.append("| " + " | ".join([
            f"{level}{note}", _elements(r), f"{r['sigma']:.4g}", f"{r['sigma_eff']:.4g}",
            *[c[1](q) for c in cols],
            f"{r['steps']}, {r['wall_s']:.1f} s ({r['method']}, "
            f"{fmt(r['step_ms'], '.1f')} ms/step)"])
            + " |")
    if entry.get("spread_fine_medium"):
        s = entry["spread_fine_medium"]
        lines.append("| " + " | ".join(["spread fine–medium", "", "", "",
                                        *[c[2](s) for c in cols], ""]) + " |")
    return "\n".join(lines) + "\n"


def write_markdown(path, doc):
    text = [f"# Resolution study ({doc['date']}, {doc['device']})", "",
            f"{doc['levels_note']}.  {doc['tracers_note'].capitalize()}.", ""]
    text += [markdown(case, entry) for case, entry in doc["cases"].items()]
    with open(path, "w") as fh:
        fh.write("\n".join(text))


def print_plan(runs):
    print("| case | level | n_phi | layers | Δ/σ_c | σ | σ_eff | σ_eff,repr | elements | "
          "method | steps |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        i = r["info"]
        print(f"| {r['case']} | {r['level']} | {i['n_phi']} | {i['layers']} | "
              f"{i['layer_spacing']:.4g} | {i['sigma']:.4g} | {i['sigma_eff']:.4g} | "
              f"{i['sigma_eff_represented']:.4g} | {i['n_elements'] or 'lattice'} | "
              f"{i['method']} | "
              f"{i['steps']} |", flush=True)
