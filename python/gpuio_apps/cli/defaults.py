"""`gpuio defaults`: every knob of gpuio (gpuio.defaults, the library's table, then gpuio_apps.knobs, the
applications'): the value in force and where it comes from (the default, a GPUIO_<NAME> variable), its default,
range, variable and doc, grouped by owner."""
from __future__ import annotations

import json
import shutil
import textwrap

import typer

from gpuio import defaults
from gpuio_apps import knobs as app_knobs

from . import _check

OWNERS = {**defaults.OWNERS, **app_knobs.OWNERS}  # the library's table, then the applications' own


def defaults_(owner: str = typer.Option("", help=f"only this owner's knobs: {', '.join(OWNERS)}"),
              json_out: bool = typer.Option(False, "--json", help="Print JSON instead of text.")) -> None:
    if owner:
        _check.choice("--owner", owner, tuple(OWNERS))
    rows = ([] if owner in app_knobs.OWNERS else defaults.listing(owner or None)) + \
        ([] if owner in defaults.OWNERS else app_knobs.listing(owner or None))
    if json_out:
        print(json.dumps(rows, indent=1, default=repr))
        return
    width = max(80, min(shutil.get_terminal_size((120, 20)).columns, 160))
    for own in dict.fromkeys(r["owner"] for r in rows):
        print(f"{own}: {OWNERS[own]}")
        for r in (r for r in rows if r["owner"] == own):
            value = repr(r["value"]) + ("" if r["source"] == "default" else f"  (from {r['source']})")
            facts = "; ".join(x for x in (f"default {r['default']!r}" if r["source"] != "default" else "", r["range"],
                                          r["env"] or "", "per file" if r["per_target"] else "") if x)
            print(f"  {r['name']} = {value}" + (f"   ({facts})" if facts else ""))
            print(textwrap.fill(r["doc"], width, initial_indent="      ", subsequent_indent="      "))
