"""The `gpuio` command (also `python -m gpuio`). Each subcommand lives in its own module of this package and
is imported only when it runs, so `gpuio --help` stays fast and a missing optional dependency only affects
its command.

Errors: a bad input is one line on stderr naming the option and the value, exit status 2, before any work
starts (the checks are in _check.py); an error during the work is one line too, exit status 1. The
traceback is printed only with the global option `gpuio --debug ...`, which keeps the exit status.
"""
from __future__ import annotations

import importlib
import sys
import traceback

import typer

from ._check import click_exceptions, missing_extra_message

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="gpuio: GPU storage stack (engine, GPU path, caches, streams, simulator).")


# command name -> (module, attribute, help). A sub-app attribute (typer.Typer) becomes a command group.
_COMMANDS = {
    "info": ("gpuio_apps.cli.info", "info", "What this platform offers: io_uring features, GPU, data paths."),
    "defaults": ("gpuio_apps.cli.defaults", "defaults_",
                 "Every knob: value in force, default, range, GPUIO_* variable, doc."),
    "demo": ("gpuio_apps.cli.demo", "demo", "Run the main job on a data file in the current directory."),
    "bench": ("gpuio_apps.cli.bench", "bench", "Engine vs raw device benchmark, side by side, ratios."),
    "import": ("gpuio_apps.cli.importer", "import_", "Convert .npy/.pt/raw files to a gpuio TensorFile."),
    "sim": ("gpuio_apps.cli.sim", "app", "Flash simulator: trace replay and ZnG studies."),
    "volume": ("gpuio_apps.cli.volume", "app", "Ceph RBD volumes: create, map, grant access, break a writer's lock."),
    "cluster": ("gpuio_apps.cli.cluster", "app", "A throwaway one-node Ceph cluster: up, down, status."),
}
# `gpuio <command> <flag> ...` runs a command of its own, with its own options and --help, e.g. `gpuio demo --hetero`
# (the flag is also an option of <command>, so that its help names it). (command, flag) -> (module, attribute).
_FLAG_COMMANDS = {("demo", "--hetero"): ("gpuio_apps.cli.hetero", "demo_hetero")}
_state = {"debug": False}


def _flags_show_no_type() -> None:
    """typer's rich help prints a type beside every option, so a flag reads `--force <bool>` though it takes
    no value (its plain help leaves flags bare): the same rule for the rich help."""
    cls = getattr(getattr(typer, "core", None), "TyperOption", None)
    shown = getattr(cls, "display_type_rich", None)
    if shown is None or getattr(shown, "_gpuio_flags_bare", False):
        return

    def display_type_rich(self, ctx):
        return None if self.is_flag or self.count else shown(self, ctx)

    display_type_rich._gpuio_flags_bare = True
    cls.display_type_rich = display_type_rich


_flags_show_no_type()


def _version(value: bool) -> None:
    if value:
        from gpuio import __version__
        typer.echo(f"gpuio {__version__}")
        raise typer.Exit()


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show the full traceback of an error."),
          version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the gpuio version and exit.")) -> None:
    """Keeps `gpuio` a command group even when a build registers a single command."""
    _state["debug"] = debug


def _load(module: str, attr: str):
    return getattr(importlib.import_module(module), attr)


def _register() -> None:
    if _state.get("registered"):
        return
    for name, (module, attr, help_text) in _COMMANDS.items():
        target = _load(module, attr)
        if isinstance(target, typer.Typer):
            target.pretty_exceptions_enable = False
            app.add_typer(target, name=name, help=help_text)
        else:
            app.command(name=name, help=help_text)(target)
    _state["registered"] = True


def _routed(args: list[str]):
    """(typer app, its args, prog name) when `args` name a flag command (`[--debug] demo ... --hetero ...`), else
    None. The flag is taken out of the line; the root's --debug is honoured."""
    i = 0
    while i < len(args) and args[i] == "--debug":
        i += 1
    for (command, flag), (module, attr) in _FLAG_COMMANDS.items():
        if i < len(args) and args[i] == command and flag in args[i + 1:]:
            rest = args[i + 1:]
            rest.remove(flag)
            sub = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
            sub.command()(_load(module, attr))
            _state["debug"] = i > 0
            return sub, rest, f"gpuio {command} {flag}"
    return None


def _say(line: str) -> None:
    sys.stderr.write("gpuio: error: " + " ".join(line.split()) + "\n")  # one line, whatever the message


def _fail(line: str, status: int) -> None:
    """Ends the command: the traceback first with --debug (the status stays what it would be without it: 2 for bad
    input, 1 for a failed work), then the one line."""
    if _state["debug"]:
        traceback.print_exc()
    _say(line)
    sys.exit(status)


def main(argv: list[str] | None = None) -> None:
    """Runs the command line; exits with 0, 1 (the work failed) or 2 (bad input, before any work)."""
    args = sys.argv[1:] if argv is None else list(argv)
    _state["debug"] = False  # set by the root callback from `gpuio --debug ...`
    _register()
    target, args, prog = _routed(args) or (app, args, "gpuio")
    try:
        rv = target(args=args, prog_name=prog, standalone_mode=False)
    except click_exceptions.ClickException as e:  # usage errors: the parser's and _check.InputError
        if type(e).__name__ == "NoArgsIsHelpError":  # `gpuio` or `gpuio sim` alone: the help
            typer.echo(e.ctx.get_help())
            sys.exit(0)
        _fail(e.format_message(), e.exit_code)
    except typer.Abort:
        _fail("aborted", 130)
    except ModuleNotFoundError as e:
        if not e.name:
            raise
        _fail(missing_extra_message(e.name), 2)
    except (OSError, ValueError, TypeError, KeyError, IndexError, RuntimeError) as e:
        _fail(f"{type(e).__name__}: {e}" + ("" if _state["debug"] else " (run `gpuio --debug ...` for the traceback)"),
              1)
    sys.exit(rv if isinstance(rv, int) else 0)
