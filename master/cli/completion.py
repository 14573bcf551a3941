"""``bats-master completion bash|zsh``: a completion script for the three commands, made by walking
their argparse parsers, so it always lists the options the commands accept.

What it completes: the subcommands of ``bats-master`` after the command name; the options of the
command (or subcommand) after ``-``; an option's choices (``--policy``, ``--format``, ...) and the
common values of ``--schedule`` (``cheapest``, ``fastest``, ``budget:``); a folder after an option
whose value is a ``DIR``; file names otherwise (``complete -o default``). zsh runs the same script
through its bash-completion layer (``bashcompinit``).
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterable

FUNCTION = "_bats_complete"
# options whose values are free text with a few common words (an option id or an amount also works)
VALUE_WORDS = {"--schedule": ("cheapest", "fastest", "budget:")}


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every parser, by the words that reach it: ``bats-master``, ``bats-master results``, ...,
    ``bats-sim`` and ``bats-worker``."""
    from bats.worker.main import build_parser as worker_parser

    from . import parsers
    from .sim import build_parser as sim_parser

    found = {"bats-master": parsers.run_parser()}
    found.update({f"bats-master {name}": parser for name, parser in parsers.subcommand_parsers().items()})
    found["bats-sim"] = sim_parser()
    found["bats-worker"] = worker_parser()
    return found


def visible_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's actions a user may type (a hidden option, ``help=SUPPRESS``, is left out)."""
    return [action for action in parser._actions if action.help != argparse.SUPPRESS]


def options_of(parser: argparse.ArgumentParser) -> list[str]:
    return [option for action in visible_actions(parser) for option in action.option_strings]


def _words(items: Iterable[object]) -> str:
    return shlex.quote(" ".join(str(item) for item in items))


def bash_script() -> str:
    """The completion script; ``source <(bats-master completion bash)`` in ~/.bashrc loads it."""
    from . import parsers

    found = command_parsers()
    option_cases: list[str] = []
    value_cases: list[str] = []
    positional_cases: list[str] = []
    for key, parser in found.items():
        option_cases.append(f"        {shlex.quote(key)}) opts={_words(options_of(parser))} ;;")
        for action in visible_actions(parser):
            if not action.option_strings:
                if action.choices:
                    positional_cases.append(f"        {shlex.quote(key)}) words={_words(action.choices)} ;;")
                continue
            if action.nargs == 0:
                continue
            patterns = "|".join(shlex.quote(f"{key}:{option}") for option in action.option_strings)
            words = action.choices or next((VALUE_WORDS[o] for o in action.option_strings if o in VALUE_WORDS), None)
            if words:
                value_cases.append(f"        {patterns}) COMPREPLY=($(compgen -W {_words(words)} "
                                   '-- "$cur")); return ;;')
            elif action.metavar == "DIR":
                value_cases.append(f'        {patterns}) COMPREPLY=($(compgen -d -- "$cur")); return ;;')
            else:  # a file, a number, a duration: file names, or nothing to propose
                value_cases.append(f"        {patterns}) return ;;")
    subcommands = " ".join(parsers.SUBCOMMANDS)
    return "\n".join([
        "# bash completion for bats-master, bats-sim and bats-worker",
        "# generated from their options by 'bats-master completion bash'; load it with",
        "#     source <(bats-master completion bash)",
        f"{FUNCTION}() {{",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
        '    local key="${COMP_WORDS[0]##*/}" opts="" words=""',
        '    if [ "$key" = bats-master ] && [ "$COMP_CWORD" -gt 1 ]; then',
        '        case "${COMP_WORDS[1]}" in',
        f"            {'|'.join(parsers.SUBCOMMANDS)}) key=\"$key ${{COMP_WORDS[1]}}\" ;;",
        "        esac",
        "    fi",
        '    case "$key:$prev" in',
        *value_cases,
        "    esac",
        '    case "$key" in',
        *option_cases,
        "    esac",
        '    case "$key" in',
        *positional_cases,
        "    esac",
        '    if [ "$key" = bats-master ] && [ "$COMP_CWORD" -eq 1 ] && [ "${cur#-}" = "$cur" ]; then',
        f'        words="{subcommands}"',
        "    fi",
        '    if [ "${cur#-}" != "$cur" ]; then',
        '        COMPREPLY=($(compgen -W "$opts" -- "$cur"))',
        '    elif [ -n "$words" ]; then',
        '        COMPREPLY=($(compgen -W "$words" -- "$cur"))',
        "    fi",
        "}",
        f"complete -o default -F {FUNCTION} bats-master bats-sim bats-worker",
        "",
    ])


def zsh_script() -> str:
    """The same completion for zsh (its ``bashcompinit`` runs bash completion functions);
    ``source <(bats-master completion zsh)`` in ~/.zshrc loads it."""
    return "\n".join([
        "# zsh completion for bats-master, bats-sim and bats-worker (the bash script, through bashcompinit);",
        "# load it with: source <(bats-master completion zsh)",
        "autoload -U +X compinit && compinit -u",
        "autoload -U +X bashcompinit && bashcompinit",
        bash_script(),
    ])
