"""Options, each declared once: one field holds its name, default, help, choices or range,
and the parser of its text.

An option is declared where the part that reads it takes its value: as a field of a frozen
section of ``node.config.model.NodeConfig``, made by one of the helpers here (``number``, ``text``,
``choice``, ``on_off``, ``parsed``, ``repeated``) from an ``Option``. The flags, the
``config.ini`` reader, ``--help``, the commented ``config.ini`` and docs/config.md are all made
from those declarations, so that none of them can drift from what the node reads, and each
value is checked once, with errors that name the option. The parsers below turn an option's
text into its field's value: endpoints, keys, account names, block ids.

Private keys need not be written into the config: ``signature-provider``, ``finalizer-key``
and ``peer-private-key`` take ``KEYFILE:path``, a file that only its owner may read (checked
as ssh checks a private key), so that no key shows in ``ps`` or in a config file's copies.
"""

from __future__ import annotations

import ipaddress
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

from chain.core.primitives.crypto import PrivateKey, public_key_from_text
from chain.core.primitives.errors import ChainError
from chain.core.primitives.types import BlockId, PublicKey, is_valid_name
from node.errors import ConfigError

T = TypeVar("T")
OPTION_KEY = "option"  # the key of a field's metadata that holds its Option


@dataclass(frozen=True, slots=True)
class Option:
    """One option: its flag and config.ini name, and how its text is checked and read."""

    name: str
    help: str
    default: str | int | None  # as config.ini would say it (None: not set)
    kind: type = str  # int: the text is a non-negative integer
    choices: tuple[str, ...] = ()
    low: int | None = None
    high: int | None = None
    repeatable: bool = False
    # From the checked value (a str, an int, or a tuple of str if repeatable, or None if
    # not set) to the field's; a ValueError becomes a ConfigError naming the option.
    convert: Callable[[Any], Any] = lambda value: value

    def read(self, value: Any) -> Any:
        """The field's value for ``value`` (text, or a tuple of texts if repeatable)."""
        if self.kind is int and isinstance(value, str):
            value = self._integer(value)
        for text in value if self.repeatable else (value,):
            if self.choices and text is not None and text not in self.choices:
                raise ConfigError(self.name, f"{text!r} is not {_either(self.choices)}")
        try:
            return self.convert(value)
        except ValueError as err:
            raise ConfigError(self.name, str(err)) from err

    def _integer(self, text: str) -> int:
        try:
            value = int(text)
        except ValueError as err:
            raise ConfigError(self.name, f"expected an integer, got {text!r}") from err
        if value < 0:
            raise ConfigError(self.name, "must not be negative")
        if self.high is not None and not (self.low or 0) <= value <= self.high:
            raise ConfigError(self.name, f"must be between {self.low or 0} and {self.high}")
        if self.low is not None and value < self.low:
            raise ConfigError(self.name, f"must be at least {self.low}")
        return value

    def help_text(self) -> str:
        """The help, then what the declaration adds: its default (unless the help says it),
        its range; or that it repeats."""
        if self.repeatable:
            return f"{self.help} (repeatable)"
        # An option unset by default says in its help what then happens, if anything.
        facts = [] if self.default is None else [f"default: {self.default_text}"]
        if self.high is not None:
            facts.append(f"{self.low or 0} to {self.high}")
        elif self.low:
            facts.append(f"at least {self.low}")
        return f"{self.help} ({', '.join(facts)})" if facts else self.help

    @property
    def default_text(self) -> str:
        """The default as config.ini would say it; '' shown as such, not as nothing."""
        return "''" if self.default == "" else str(self.default)


def _either(choices: tuple[str, ...]) -> str:
    return ", ".join(choices[:-1]) + " or " + choices[-1]


def _field(option: Option) -> Any:
    """A dataclass field declared by ``option``; its default is the option's default, read."""
    default = () if option.repeatable else option.default
    return field(default_factory=lambda: option.convert(default), metadata={OPTION_KEY: option})


def number(
    name: str,
    default: int,
    help: str,
    *,
    low: int | None = None,
    high: int | None = None,
    convert: Callable[[int], int] = lambda value: value,
) -> int:
    """A non-negative integer option, within [low, high] where given."""
    return cast(int, _field(Option(name, help, default, int, low=low, high=high, convert=convert)))


def text(name: str, default: str, help: str) -> str:
    return cast(str, _field(Option(name, help, default)))


def choice(name: str, default: str, choices: tuple[str, ...], help: str) -> str:
    return cast(str, _field(Option(name, help, default, choices=choices)))


def on_off(name: str, default: bool, help: str) -> bool:
    option = Option(
        name, help, "on" if default else "off", choices=("on", "off"), convert=lambda v: v == "on"
    )
    return cast(bool, _field(option))


def parsed(name: str, default: str | None, help: str, convert: Callable[[str | None], T]) -> T:
    """An option whose text ``convert`` reads (None when it is not set)."""
    return cast(T, _field(Option(name, help, default, convert=convert)))


def repeated(
    name: str, help: str, convert: Callable[[tuple[str, ...]], T], choices: tuple[str, ...] = ()
) -> T:
    """An option that may be given many times; ``convert`` reads all its values at once."""
    return cast(
        T, _field(Option(name, help, None, repeatable=True, choices=choices, convert=convert))
    )


# --- how option texts become values ---------------------------------------------------------

# One DNS label: letters, digits, '-' inside, '_' (SRV-style names); 1 to 63 characters.
_LABEL = re.compile("[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")


def host_problem(host: str) -> str | None:
    """Why ``host`` is neither an IP literal nor a well-formed DNS name; None if it is one.
    The resolver's idna codec raises UnicodeError on a label over 63 characters or an empty
    one (``a..b``), so such a name is refused here rather than in a dial."""
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    name = host.removesuffix(".")
    if not name:
        return "the host is empty"
    if len(name) > 253:
        return "a host name has at most 253 characters"
    for label in name.split("."):
        if not label:
            return f"host {host!r} has an empty label"
        if len(label) > 63:
            return f"host {host!r} has a label over 63 characters"
        if _LABEL.fullmatch(label) is None:
            return f"host {host!r} is not an IP address or a DNS name (letters, digits, '-')"
    return None


def parse_endpoint(option: str, text: str, default_host: str = "0.0.0.0") -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    # ASCII digits only: str.isdigit takes "²" and "١٢٣", and int() refuses 4,300 digits.
    if not sep or re.fullmatch("[0-9]{1,5}", port) is None or int(port) > 65535:
        raise ConfigError(option, f"expected host:port, got {text!r}")
    host = host.strip("[]") or default_host
    problem = host_problem(host)
    if problem is not None:
        raise ConfigError(option, problem)
    return host, int(port)


def endpoint(
    option: str, default_host: str = "0.0.0.0"
) -> Callable[[str | None], tuple[str, int] | None]:
    """``host:port``, or None for '' (the listener is off)."""
    return lambda text: parse_endpoint(option, text, default_host) if text else None


def optional_path(text: str | None) -> Path | None:
    return Path(text) if text else None


def some(value: T | None) -> T:
    assert value is not None  # declared with a default, so never unset
    return value


KEYFILE = "KEYFILE:"  # the prefix of a key given as the path of a file that holds it


def read_key_file(path: Path) -> str:
    """The private key text in ``path``, refused (ValueError) unless only its owner, this
    user, may read or write it: a key others can read is a key they have (ssh refuses such a
    private key for the same reason)."""
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"key file {path} is not a file")
        if st.st_uid != os.geteuid():
            raise ValueError(f"key file {path} belongs to uid {st.st_uid}, not to this user")
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o077:
            who = "readable" if mode & 0o044 else "writable"
            raise ValueError(f"key file {path} is {who} by others (mode {mode:04o}); chmod 600 it")
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"cannot read key file {path}: {getattr(err, 'strerror', err)}") from err
    return text


def _key_text(text: str) -> str:
    """A private key's text: as given, or read from the file ``KEYFILE:path`` names."""
    return read_key_file(Path(text.removeprefix(KEYFILE))) if text.startswith(KEYFILE) else text


def _signature_provider(spec: str) -> tuple[PublicKey, PrivateKey]:
    try:
        pub_text, rest = spec.split("=", 1)
        kind, priv_text = rest.split(":", 1)
    except ValueError as err:
        raise ValueError("expected PUB_K1_...=KEYFILE:path or PUB_K1_...=KEY:PVT_K1_...") from err
    if kind not in ("KEY", "KEYFILE"):
        raise ValueError(f"unsupported provider {kind!r} (KEYFILE or KEY)")
    if kind == "KEYFILE":
        priv_text = read_key_file(Path(priv_text))
    try:
        pub = public_key_from_text(pub_text)
        key = PrivateKey.from_text(priv_text)
    except ChainError as err:
        raise ValueError(str(err)) from err
    if key.public_key != pub:
        raise ValueError("the private key does not match the public key")
    return pub, key


def signature_providers(specs: tuple[str, ...]) -> dict[PublicKey, PrivateKey]:
    return dict(_signature_provider(s) for s in specs)


def private_keys(texts: tuple[str, ...]) -> dict[PublicKey, PrivateKey]:
    try:
        keys = [PrivateKey.from_text(_key_text(k)) for k in texts]
    except ChainError as err:
        raise ValueError(str(err)) from err
    return {k.public_key: k for k in keys}


def optional_private_key(text: str | None) -> PrivateKey | None:
    try:
        return PrivateKey.from_text(_key_text(text)) if text else None
    except ChainError as err:
        raise ValueError(str(err)) from err


def public_keys(texts: tuple[str, ...]) -> frozenset[bytes]:
    try:
        return frozenset(public_key_from_text(k) for k in texts)
    except ChainError as err:
        raise ValueError(str(err)) from err


def account_names(names: tuple[str, ...]) -> tuple[str, ...]:
    for name in names:
        if not is_valid_name(name):
            raise ValueError(f"{name!r} is not an account name")
    return names


def block_id(text: str | None) -> BlockId | None:
    if not text:
        return None
    if re.fullmatch("[0-9a-fA-F]{64}", text) is None:
        raise ValueError("must be the 64-hex-digit id of a block you trust")
    return BlockId(bytes.fromhex(text))


def peer_endpoints(texts: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    return tuple(parse_endpoint("p2p-peer-address", a) for a in texts)
