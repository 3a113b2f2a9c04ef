"""``config.ini`` and the flags: reading them into a NodeConfig, and writing the commented file.

``config.ini`` holds ``key = value`` lines (``#`` starts a comment); options marked
repeatable may appear many times. Command-line flags override the file. Everything is
validated once, by ``load_config``, and errors name the option. ``commented_config()`` writes
the whole table as a commented ``config.ini`` (what ``bor-node init`` writes). All of it is
made from the table of ``node.config.model``, ``OPTION_SECTIONS``.
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path
from typing import Any

from node.config.model import (
    OPTION_SECTIONS,
    OPTIONS,
    NodeConfig,
    check_together,
    declared,
    sections,
)
from node.errors import ConfigError


def add_options(parser: argparse.ArgumentParser) -> None:
    """Every option as a --flag, in one argument group per section (as in config.ini)."""
    for number, (title, options) in enumerate(OPTION_SECTIONS):
        group = parser.add_argument_group(title)
        if number == 0:
            group.add_argument(
                "--config", help="config.ini to read (default: <data-dir>/config.ini)"
            )
        for opt in options:
            metavar = "{" + ",".join(opt.choices) + "}" if opt.choices else None
            action = "append" if opt.repeatable else "store"
            group.add_argument(
                "--" + opt.name, action=action, metavar=metavar, help=opt.help_text()
            )


def _commented(text: str) -> list[str]:
    return textwrap.wrap(text, width=92, initial_indent="# ", subsequent_indent="# ")


def commented_config() -> str:
    """A config.ini with every option commented out, section by section: its help, its
    default, choices and range, then ``# name = default`` to uncomment. What ``bor-node
    init`` writes, so that the options an operator can set are in front of them."""
    lines = [
        "# bor-node configuration: 'key = value' lines; '#' starts a comment.",
        "# Every option is also a --flag of `bor-node run`, which overrides this file;",
        "# an option marked repeatable may be given on many lines.",
    ]
    for title, options in OPTION_SECTIONS:
        lines += ["", "", "# " + "=" * 8 + f" {title} " + "=" * 8]
        for opt in options:
            facts = []
            if opt.repeatable:
                facts.append("repeatable")
            elif opt.default is not None:
                facts.append(f"default: {opt.default_text}")
            if opt.choices:
                facts.append("one of: " + ", ".join(opt.choices))
            if opt.high is not None:
                facts.append(f"range: {opt.low or 0} to {opt.high}")
            elif opt.low:
                facts.append(f"at least {opt.low}")
            value = "" if opt.default is None or opt.repeatable else str(opt.default)
            lines += ["", *_commented(opt.help)]
            lines += [f"# ({'; '.join(facts)})"] if facts else []
            lines.append(f"# {opt.name} = {value}".rstrip())
    return "\n".join(lines) + "\n"


def read_ini(path: Path) -> dict[str, list[str]]:
    """Parse ``key = value`` lines; a key may repeat."""
    values: dict[str, list[str]] = {}
    known = {o.name for o in OPTIONS}
    for lineno, line in enumerate(_ini_lines(path), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if "=" not in line:
            raise ConfigError(f"{path.name}:{lineno}", "expected 'key = value'")
        key, value = (part.strip() for part in line.split("=", 1))
        if key not in known:
            raise ConfigError(key, f"unknown option in {path.name}:{lineno}")
        values.setdefault(key, []).append(value)
    return values


def _ini_lines(path: Path) -> list[str]:
    """The file's lines; one that is not UTF-8 is named, by file and line, not by offset."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError as err:
        lineno = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise ConfigError(
            f"{path}:{lineno}",
            f"byte 0x{data[err.start]:02x} at column {column} is not UTF-8: save the file as UTF-8",
        ) from err


def load_config(args: argparse.Namespace) -> NodeConfig:
    """Merge config.ini and flags into a validated NodeConfig."""
    flags = {o.name: getattr(args, o.name.replace("-", "_"), None) for o in OPTIONS}
    data_dir = Path(flags["data-dir"] or "data")
    config_path = Path(args.config) if getattr(args, "config", None) else data_dir / "config.ini"
    in_file: dict[str, list[str]] = {}
    if config_path.exists():
        in_file = read_ini(config_path)
    elif getattr(args, "config", None):
        raise ConfigError("config", f"{config_path} does not exist")
    given: dict[str, Any] = {}  # option name -> its text (tuple of texts if repeatable)
    for opt in OPTIONS:
        flag = flags[opt.name]
        if opt.repeatable:
            given[opt.name] = tuple(flag or in_file.get(opt.name, []))
        elif flag is not None:
            given[opt.name] = flag
        elif opt.name in in_file:
            given[opt.name] = in_file[opt.name][-1]
        else:
            given[opt.name] = opt.default
    values: dict[str | None, dict[str, Any]] = {section: {} for section, _ in sections()}
    for section, name, opt in declared():
        values[section][name] = opt.read(given[opt.name])
    p2p, producer = values["p2p"], values["producer"]
    p2p["server_address"] = p2p["server_address"] or given["p2p-listen-endpoint"] or ""
    producer["finalizer_keys"] = producer["finalizer_keys"] or dict(producer["signing_keys"])
    parts = {name: cls(**values[name]) for name, cls in sections() if name is not None}
    config = NodeConfig(**values[None], **parts)
    check_together(config)
    return config
