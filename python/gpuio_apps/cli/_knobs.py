"""Command-line options for gpuio's knobs, made from gpuio.defaults (the one table): a command that takes a knob
offers it by the knob's CLI name (block_size: --block-size), with the table's default and doc, and checks a given
value with the knob's own check, reported as one line naming the option (exit status 2, before any work)."""
from __future__ import annotations

import dataclasses
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
# (command, knob name) -> the smallest value a command takes where it is above the table's, and why. The option's help
# and its refusal state the one narrowed range.
OWN_MINIMUMS: dict[tuple[str, str], tuple[Any, str]] = {
    ("bench", "workers"): (1, "bench compares fixed counts; 0 lets the engine choose"),
}
# (command line, option) named like an engine knob that sets something else.
NOT_KNOBS: dict[tuple[str, str], str] = {
    ("sim replay", "queue_depth"): "the simulated SSD's host queues, not the engine's rings",
    ("sim synth", "queue_depth"): "the simulated SSD's host queues, not the engine's rings",
    ("bench", "backend"): "the engine backends to compare (a list), not one engine's backend",
}


def _knob(command: str | None, name: str):
    """The table's row for `name`, its minimum raised to the command's own (OWN_MINIMUMS)."""
    k = defaults.knob(name)
    own = OWN_MINIMUMS.get((command, name))
    return dataclasses.replace(k, min=own[0]) if own else k


def option(command: str, name: str, *decls: str, help: str | None = None, **kw: Any) -> Any:  # noqa: A002
    """typer.Option for knob `name` in `command`: the knob's CLI name (or decls), its default (or the command's
    own, from OWN_DEFAULTS) and help (help= or the knob's doc, then its range: the command's, OWN_MINIMUMS). The
    range is checked by check(), after parsing, so that every refusal states the same range once."""
    k = _knob(command, name)
    own = OWN_DEFAULTS.get((command, name))
    default = own[0] if own else k.default
    text = help or k.doc
    if k.range_text():
        text += f" ({k.range_text()})"
    return typer.Option(default, *(decls or (k.cli,)), help=text, **kw)


def check(option_name: str, name: str, value: Any, command: str | None = None) -> Any:
    """value, or InputError naming option_name when the knob's check, or the command's own minimum
    (OWN_MINIMUMS), refuses it: one range, the command's, whichever end the value misses."""
    own = OWN_MINIMUMS.get((command, name))
    k = _knob(command, name)
    if own and isinstance(value, int) and not isinstance(value, bool) and \
            (value < k.min or (k.max is not None and value > k.max)):
        _check.fail(option_name, value, f"must lie in {k.range_text()} (the knob {name}; {own[1]})")
    try:
        defaults.check(name, value)
    except (TypeError, ValueError) as e:  # "NAME=VALUE must ...": the option names itself, the knob follows
        _check.fail(option_name, value, f"{str(e).removeprefix(f'{name}={value} ')} (the knob {name})")
    return value
