"""The `gpuio` command. Each subcommand lives in its own module of this package and is imported only
when it runs, so `gpuio --help` stays fast and a missing optional dependency only affects its command."""
from __future__ import annotations

import importlib

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="gpuio: GPU storage stack (engine, GPU path, caches, streams, simulator).")


# command name -> (module, attribute, help). A sub-app attribute (typer.Typer) becomes a command group.
_COMMANDS = {
    "info": ("gpuio.cli.info", "info", "What this platform offers: io_uring features, GPU, data paths."),
    "demo": ("gpuio.cli.demo", "demo", "Run the main job on a data file in the current directory."),
    "bench": ("gpuio.cli.bench", "bench", "Engine vs raw device benchmark, side by side, ratios."),
    "import": ("gpuio.cli.importer", "import_", "Convert .npy/.pt/raw files to a gpuio TensorFile."),
    "sim": ("gpuio.cli.sim", "app", "Flash simulator: trace replay and ZnG studies."),
    "volume": ("gpuio.cli.volume", "app", "Ceph RBD volumes: create, map, grant access, break a writer's lock."),
    "cluster": ("gpuio.cli.cluster", "app", "A throwaway one-node Ceph cluster: up, down, status."),
}


@app.callback()
def _root() -> None:
    """Keeps `gpuio` a command group even when a build registers a single command."""


def _load(module: str, attr: str):
    return getattr(importlib.import_module(module), attr)


def _register() -> None:
    for name, (module, attr, help_text) in _COMMANDS.items():
        target = _load(module, attr)
        if isinstance(target, typer.Typer):
            app.add_typer(target, name=name, help=help_text)
        else:
            app.command(name=name, help=help_text)(target)


def main() -> None:
    _register()
    app()
