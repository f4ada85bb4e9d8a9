"""Command-line options for gpuio's knobs, made from gpuio.defaults (the one table): a command that takes a knob
offers it by the knob's CLI name (block_size: --block-size), with the table's default and doc, and checks a given
value with the knob's own check, reported as one line naming the option (exit status 2, before any work)."""
from __future__ import annotations

from typing import Any

import typer

from gpuio import defaults

from . import _check

_TABLE = object()
# (command, knob name) -> the default a command states for itself instead of the table's, and why; the test of the
# CLI (tests/python/project/test_defaults.py) accepts a knob option whose default differs from the table only when
# listed.
OWN_DEFAULTS: dict[tuple[str, str], tuple[Any, str]] = {
    ("bench", "workers"): (2, "the benchmark compares fixed worker counts with the raw device's threads"),
}
# (command line, option) named like an engine knob that sets something else.
NOT_KNOBS: dict[tuple[str, str], str] = {
    ("sim replay", "queue_depth"): "the simulated SSD's host queues, not the engine's rings",
    ("sim synth", "queue_depth"): "the simulated SSD's host queues, not the engine's rings",
    ("bench", "backend"): "the engine backends to compare (a list), not one engine's backend",
}


def option(command: str, name: str, *decls: str, help: str | None = None, **kw: Any) -> Any:  # noqa: A002
    """typer.Option for knob `name` in `command`: the knob's CLI name (or decls), its default (or the command's
    own, from OWN_DEFAULTS) and help (help= or the knob's doc, then its range unless min=/max= narrow it)."""
    k = defaults.knob(name)
    own = OWN_DEFAULTS.get((command, name))
    default = own[0] if own else k.default
    text = help or k.doc
    if k.range_text() and "min" not in kw and "max" not in kw:
        text += f" ({k.range_text()})"
    return typer.Option(default, *(decls or (k.cli,)), help=text, **kw)


def check(option_name: str, name: str, value: Any) -> Any:
    """value, or InputError naming option_name when the knob's check refuses it."""
    try:
        defaults.check(name, value)
    except (TypeError, ValueError) as e:  # "NAME=VALUE must ...": the option names itself, the knob follows
        _check.fail(option_name, value, f"{str(e).removeprefix(f'{name}={value} ')} (the knob {name})")
    return value
