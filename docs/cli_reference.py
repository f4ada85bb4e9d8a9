"""The command-line reference: `gpuio <command> --help` of every command, rendered from the typer app itself (never
copied by hand), as one Markdown page.

    python docs/cli_reference.py [OUT_FILE]     # default: the page on stdout

For the documentation build this file is a mkdocs hook (`hooks: [docs/cli_reference.py]` in mkdocs.yml):
`on_files` adds the page as reference/cli.md, rendered in a child interpreter (so the help is the one a user's
terminal of WIDTH columns shows, and mkdocs' own process never imports gpuio).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = "reference/cli.md"
WIDTH = 100  # columns of the rendered help (typer reads TERMINAL_WIDTH when it is imported)


class CliReferenceFailed(RuntimeError):
    """A command's --help did not render: the reference would miss it."""


def commands() -> list[tuple[list[str], str]]:
    """(words after `gpuio`, one-line help) of every command and command group, depth first, in the app's order;
    a flag command (`gpuio demo --hetero`) follows the command it is a flag of."""
    import typer

    from gpuio_apps import cli
    cli._register()
    out: list[tuple[list[str], str]] = []

    def walk(command, words: list[str], parent) -> None:
        ctx = command.context_class(command, info_name=words[-1] if words else "gpuio", parent=parent)
        out.append((words, (command.short_help or command.help or "").strip().split("\n")[0]))
        for (name, flag) in cli._FLAG_COMMANDS:  # its summary: the flag's own help in the command it is a flag of
            if words == [name]:
                helps = [p.help for p in command.params if flag in getattr(p, "opts", ())]
                out.append(([name, flag], (helps[0] if helps else "").strip().split("\n")[0]))
        if hasattr(command, "list_commands"):  # a group (typer may carry its own copy of click: no isinstance)
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), words + [name], ctx)

    walk(typer.main.get_command(cli.app), [], None)
    return out


def help_text(words: list[str]) -> str:
    """What `gpuio WORDS --help` prints (trailing blanks stripped)."""
    from typer.testing import CliRunner

    from gpuio_apps import cli
    cli._register()
    routed = cli._routed(words + ["--help"])
    app, args, prog = routed or (cli.app, words + ["--help"], "gpuio")
    r = CliRunner().invoke(app, args, prog_name=prog)
    if r.exit_code != 0 or not r.output.strip():
        raise CliReferenceFailed(f"`gpuio {' '.join(words)} --help` exited {r.exit_code}: {r.output[-2000:]}")
    return "\n".join(line.rstrip() for line in r.output.strip("\n").splitlines())


def render() -> str:
    """The whole page."""
    lines = ["# Command-line reference", "",
             "Generated from the `gpuio` command itself when the documentation is built (`docs/cli_reference.py`): "
             "each section is what `gpuio ... --help` prints. `python -m gpuio` is the same command. Every option is "
             "checked before any work starts: a bad value is refused with one line naming the option and the value "
             "(exit status 2); an error during the work is one line too (exit status 1); `gpuio --debug ...` shows "
             "the traceback instead.", "", "| command | what it does |", "|---|---|"]
    found = commands()
    for words, summary in found:
        if words:
            anchor = "gpuio-" + "-".join(w.strip("-") for w in words)
            lines.append(f"| [`gpuio {' '.join(words)}`](#{anchor}) | {summary.replace('|', '/')} |")
    for words, _ in found:
        name = " ".join(["gpuio", *words])
        anchor = "-".join(["gpuio", *(w.strip("-") for w in words)])
        level = "#" * min(2 + max(len(words) - 1, 0), 4)
        lines += ["", f"{level} `{name}` {{#{anchor}}}", "", "```text", help_text(words), "```"]
    return "\n".join(lines) + "\n"


def _render_in_child() -> str:
    env = dict(os.environ, TERMINAL_WIDTH=str(WIDTH), COLUMNS=str(WIDTH), NO_COLOR="1")
    r = subprocess.run([sys.executable, str(Path(__file__).resolve())], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    if r.returncode != 0:
        raise CliReferenceFailed(f"docs/cli_reference.py failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout


def on_files(files, config, **kwargs):
    """mkdocs hook: the generated page joins the site's files as reference/cli.md."""
    from mkdocs.structure.files import File
    files.append(File.generated(config, PAGE, content=_render_in_child()))
    return files


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or (args and args[0].startswith("-")):
        print("usage: python docs/cli_reference.py [OUT_FILE]", file=sys.stderr)
        return 2
    os.environ.setdefault("TERMINAL_WIDTH", str(WIDTH))
    try:
        page = render()
    except CliReferenceFailed as e:
        print(f"cli-reference: {e}", file=sys.stderr)
        return 1
    if args:
        Path(args[0]).write_text(page)
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
