"""The `gpuio` command. Each subcommand lives in its own module of this package and is imported only
when it runs, so `gpuio --help` stays fast and a missing optional dependency only affects its command."""
from __future__ import annotations

import importlib

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="gpuio: GPU storage stack (engine, GPU path, caches, streams, simulator).")


@app.callback()
def _root() -> None:
    """Keeps `gpuio` a command group even when a build registers a single command."""


def _load(module: str, attr: str):
    return getattr(importlib.import_module(module), attr)


def _register() -> None:
    for name, (module, attr, help_text) in _COMMANDS.items():
        try:
            target = _load(module, attr)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            continue  # that layer is not part of this build yet
        if isinstance(target, typer.Typer):
            app.add_typer(target, name=name, help=help_text)
        else:
            app.command(name=name, help=help_text)(target)


def main() -> None:
    _register()
    app()
