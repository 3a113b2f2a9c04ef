"""config.ini and flags: flags win, repeatable options, errors name the option."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import pytest

from chain.core.primitives.crypto import PrivateKey, public_key_to_text
from node.config.file import add_options, commented_config, load_config, read_ini
from node.config.model import OPTION_SECTIONS, OPTIONS, NodeConfig
from node.errors import ConfigError


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_options(parser)
    return parser.parse_args(list(argv))


def test_file_then_flags(tmp_path: Path) -> None:
    """Options come from config.ini, repeatable ones accumulate, and a command-line flag overrides
    the file."""
    key = PrivateKey.generate()
    provider = f"{public_key_to_text(key.public_key)}=KEY:{key.to_text()}"
    (tmp_path / "config.ini").write_text(
        "# comment\n"
        "http-server-address = 127.0.0.1:9999\n"
        "producer-name = producera\n"
        "producer-name = producerb\n"
        f"signature-provider = {provider}\n"
        "max-mempool-txs = 7\n"
    )
    config = load_config(_parse("--data-dir", str(tmp_path), "--max-mempool-txs", "9"))
    assert config.http.address == ("127.0.0.1", 9999)
    assert config.producer.names == ("producera", "producerb")
    assert config.producer.signing_keys[key.public_key].to_text() == key.to_text()
    assert config.chain.max_mempool_txs == 9
    assert config.genesis_json == tmp_path / "genesis.json"


@pytest.mark.parametrize(
    ("line", "option"),
    [
        ("http-server-address = nowhere", "http-server-address"),
        ("max-mempool-txs = many", "max-mempool-txs"),
        ("producer-name = Bad_Name", "producer-name"),
        ("signature-provider = PUB_K1_00=KEY:PVT_K1_00", "signature-provider"),
        ("no-such-option = 1", "no-such-option"),
        ("log-level = loud", "log-level"),
        ("http-server-address = 127.0.0.1:²", "http-server-address"),
        ("http-server-address = 127.0.0.1:١٢٣", "http-server-address"),
        ("http-server-address = 127.0.0.1:" + "9" * 5000, "http-server-address"),
        ("p2p-listen-endpoint = 127.0.0.1:65536", "p2p-listen-endpoint"),
        ("admin-http-server-address = 0.0.0.0:8889", "admin-http-server-address"),
        ("http-read-timeout-ms = 0", "http-read-timeout-ms"),
        ("p2p-tls = yes", "p2p-tls"),
    ],
)
def test_errors_name_the_option(tmp_path: Path, line: str, option: str) -> None:
    """A bad value or an unknown option in config.ini raises ConfigError naming that option."""
    (tmp_path / "config.ini").write_text(line + "\n")
    with pytest.raises(ConfigError) as info:
        load_config(_parse("--data-dir", str(tmp_path)))
    assert info.value.option == option


def test_mismatched_signature_provider(tmp_path: Path) -> None:
    """A signature provider whose private key does not match its public key is refused."""
    a, b = PrivateKey.generate(), PrivateKey.generate()
    spec = f"{public_key_to_text(a.public_key)}=KEY:{b.to_text()}"
    with pytest.raises(ConfigError, match="does not match"):
        load_config(_parse("--data-dir", str(tmp_path), "--signature-provider", spec))


def test_http_listeners_and_limits(tmp_path: Path) -> None:
    """The admin listener defaults to 127.0.0.1:8889 and '' turns it off; off loopback it is
    accepted with a token; the HTTP limits and the CORS origin are read as given."""
    default = load_config(_parse("--data-dir", str(tmp_path)))
    assert default.http.admin_address == ("127.0.0.1", 8889) and default.http.admin_token == ""
    assert default.http.cors_origin == "" and default.http.max_in_flight == 256
    off = load_config(_parse("--data-dir", str(tmp_path), "--admin-http-server-address", ""))
    assert off.http.admin_address is None
    (tmp_path / "config.ini").write_text(
        "admin-http-server-address = 0.0.0.0:9000\n"
        "admin-token = s3cret\n"
        "http-max-in-flight-requests = 8\n"
        "http-max-response-time-ms = 500\n"
        "http-read-timeout-ms = 2000\n"
        "access-control-allow-origin = *\n"
    )
    config = load_config(_parse("--data-dir", str(tmp_path)))
    assert (config.http.admin_address, config.http.admin_token) == (("0.0.0.0", 9000), "s3cret")
    assert (config.http.max_in_flight, config.http.max_response_ms) == (8, 500)
    assert (config.http.read_timeout_ms, config.http.cors_origin) == (2000, "*")


def test_p2p_limits_have_defaults_and_can_be_set(tmp_path: Path) -> None:
    """The limits before trust default to 32 handshakes, 8 connections per address and 5 s,
    and config.ini sets them; a handshake timeout of 0 is refused."""
    defaults = load_config(_parse("--data-dir", str(tmp_path)))
    assert (defaults.p2p.max_unauthenticated, defaults.p2p.max_per_address) == (32, 8)
    assert defaults.p2p.handshake_timeout_ms == 5000
    (tmp_path / "config.ini").write_text(
        "p2p-max-unauthenticated = 4\np2p-max-per-address = 0\np2p-handshake-timeout-ms = 800\n"
    )
    config = load_config(_parse("--data-dir", str(tmp_path)))
    assert (config.p2p.max_unauthenticated, config.p2p.max_per_address) == (4, 0)
    assert config.p2p.handshake_timeout_ms == 800
    (tmp_path / "config.ini").write_text("p2p-handshake-timeout-ms = 0\n")
    with pytest.raises(ConfigError) as info:
        load_config(_parse("--data-dir", str(tmp_path)))
    assert info.value.option == "p2p-handshake-timeout-ms"


def test_p2p_tls_is_on_unless_turned_off(tmp_path: Path) -> None:
    """TLS between nodes is on by default; ``p2p-tls = off`` turns it off."""
    assert load_config(_parse("--data-dir", str(tmp_path))).p2p.tls is True
    assert load_config(_parse("--data-dir", str(tmp_path), "--p2p-tls", "off")).p2p.tls is False


@pytest.mark.parametrize(
    "address",
    [
        "a" * 64 + ".example:9876",
        "a..b:9876",
        ".a:9876",
        "-a:9876",
        "é.example:9876",
        "a" * 254 + ":1",
    ],
)
def test_a_peer_host_that_no_resolver_takes_is_refused(tmp_path: Path, address: str) -> None:
    """A peer host with a label over 63 characters, an empty label, a bad character or over
    253 characters in all is a ConfigError naming p2p-peer-address, never a dial."""
    with pytest.raises(ConfigError) as err:
        load_config(_parse("--data-dir", str(tmp_path), f"--p2p-peer-address={address}"))
    assert err.value.option == "p2p-peer-address"


def test_well_formed_peer_hosts_pass(tmp_path: Path) -> None:
    """IP literals (v6 in brackets), names with 63-character labels and a trailing dot pass."""
    hosts = ["10.0.0.1:9876", "[::1]:9876", "a" * 63 + ".example.:9876", "node-1.bor_x:1"]
    argv = [arg for host in hosts for arg in ("--p2p-peer-address", host)]
    config = load_config(_parse("--data-dir", str(tmp_path), *argv))
    assert [host for host, _ in config.p2p.peers] == [
        "10.0.0.1",
        "::1",
        "a" * 63 + ".example.",
        "node-1.bor_x",
    ]


def test_http_connection_caps_default_to_derived_and_can_be_set(tmp_path: Path) -> None:
    """The HTTP connection caps are 0 (derived from the fd limit) unless set; the write
    timeout defaults to 10 s."""
    config = load_config(_parse("--data-dir", str(tmp_path)))
    assert (config.http.max_connections, config.http.max_connections_per_address) == (0, 0)
    assert config.http.write_timeout_ms == 10_000
    argv = ["--http-max-connections", "50", "--http-max-connections-per-address", "5"]
    config = load_config(_parse("--data-dir", str(tmp_path), *argv))
    assert (config.http.max_connections, config.http.max_connections_per_address) == (50, 5)


def test_each_option_is_declared_once_and_made_into_a_flag_and_a_config_ini_key(
    tmp_path: Path,
) -> None:
    """Every declared option has one name, one --flag with its help, and is a config.ini key;
    a NodeConfig built from nothing given equals the declared defaults."""
    names = [o.name for o in OPTIONS]
    assert len(names) == len(set(names))
    parser = argparse.ArgumentParser()
    add_options(parser)
    flags = {a.option_strings[0]: a for a in parser._actions if a.option_strings}
    for opt in OPTIONS:
        assert flags["--" + opt.name].help == opt.help_text()
    (tmp_path / "config.ini").write_text("".join(f"{n} = x\n" for n in names))
    assert list(read_ini(tmp_path / "config.ini")) == names
    default = load_config(_parse("--data-dir", str(tmp_path / "empty")))
    declared = NodeConfig(data_dir=tmp_path / "empty")
    # The one value tied to another option: the address peers are told defaults to the listen
    # endpoint as written.
    assert default.p2p.server_address == "0.0.0.0:9876"
    assert default == dataclasses.replace(
        declared, p2p=dataclasses.replace(declared.p2p, server_address="0.0.0.0:9876")
    )


def test_stream_options_have_defaults_and_can_be_set(tmp_path: Path) -> None:
    """The websocket stream's limits default to 1024 streams, 64 per address, 4096 queued
    messages and a 20 s ping, are set by config.ini or flags; a buffer of 0 is refused."""
    stream = load_config(_parse("--data-dir", str(tmp_path))).stream
    assert (stream.max_streams, stream.max_streams_per_address) == (1024, 64)
    assert (stream.buffer, stream.ping_ms) == (4096, 20_000)
    (tmp_path / "config.ini").write_text("http-max-streams = 10\nhttp-stream-buffer = 16\n")
    argv = ["--http-max-streams-per-address", "2", "--http-stream-ping-ms", "1000"]
    stream = load_config(_parse("--data-dir", str(tmp_path), *argv)).stream
    assert (stream.max_streams, stream.max_streams_per_address) == (10, 2)
    assert (stream.buffer, stream.ping_ms) == (16, 1000)
    (tmp_path / "config.ini").write_text("http-stream-buffer = 0\n")
    with pytest.raises(ConfigError, match="must be between 1 and 1048576") as info:
        load_config(_parse("--data-dir", str(tmp_path)))
    assert info.value.option == "http-stream-buffer"


@pytest.mark.parametrize(
    ("option", "value", "reason"),
    [
        ("rdma", "maybe", "'maybe' is not auto, off or required"),
        ("validation-mode", "fast", "'fast' is not full or light"),
        ("state-sync", "yes", "'yes' is not on or off"),
        ("allowed-connection", "friends", "'friends' is not any, producers or specified"),
        ("rdma-max-peers", "0", "must be between 1 and 1024"),
        ("rdma-slot-size", "1024", "must be between 4096 and 8388608"),
        ("state-sync-request-timeout-ms", "999", "must be between 1000 and 600000"),
        ("sync-fetch-span", "0", "must be at least 1"),
        ("max-clients", "-1", "must not be negative"),
        ("state-sync-trusted-block", "abc", "64-hex-digit id"),
        ("peer-key", "PUB_K1_nope", "public key is not hex"),
    ],
)
def test_choices_and_ranges_are_checked_from_the_declaration(
    tmp_path: Path, option: str, value: str, reason: str
) -> None:
    """A value outside an option's declared choices or range is a ConfigError naming the
    option and saying what it accepts."""
    with pytest.raises(ConfigError, match=re.escape(reason)) as info:
        load_config(_parse("--data-dir", str(tmp_path), f"--{option}={value}"))
    assert info.value.option == option


def test_help_shows_choices_defaults_and_ranges() -> None:
    """``--help`` lists an option's choices, its default and its range, from its declaration."""
    parser = argparse.ArgumentParser()
    add_options(parser)
    text = " ".join(parser.format_help().split())
    assert "--rdma {auto,off,required}" in text
    assert "(default: 16, 1 to 1024)" in text  # rdma-max-peers
    assert "(default: 4096, 1 to 1048576)" in text  # http-stream-buffer


def _key_file(path: Path, key: PrivateKey, mode: int) -> Path:
    path.write_text(key.to_text() + "\n")
    path.chmod(mode)
    return path


def test_keys_are_read_from_key_files(tmp_path: Path) -> None:
    """``signature-provider = PUB=KEYFILE:path``, ``finalizer-key = KEYFILE:path`` and
    ``peer-private-key = KEYFILE:path`` read the key from a file only its owner may read."""
    signer, voter, peer = PrivateKey.generate(), PrivateKey.generate(), PrivateKey.generate()
    files = [_key_file(tmp_path / n, k, 0o600) for n, k in [("s", signer), ("v", voter)]]
    peer_file = _key_file(tmp_path / "p", peer, 0o400)
    (tmp_path / "config.ini").write_text(
        "producer-name = producera\n"
        f"signature-provider = {public_key_to_text(signer.public_key)}=KEYFILE:{files[0]}\n"
        f"finalizer-key = KEYFILE:{files[1]}\n"
        f"peer-private-key = KEYFILE:{peer_file}\n"
    )
    config = load_config(_parse("--data-dir", str(tmp_path)))
    assert config.producer.signing_keys[signer.public_key].to_text() == signer.to_text()
    assert list(config.producer.finalizer_keys) == [voter.public_key]
    assert config.p2p.private_key is not None
    assert config.p2p.private_key.to_text() == peer.to_text()


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        (0o644, "is readable by others (mode 0644); chmod 600 it"),
        (0o640, "is readable by others (mode 0640); chmod 600 it"),
        (0o620, "is writable by others (mode 0620); chmod 600 it"),
    ],
)
def test_a_key_file_others_may_open_is_refused(tmp_path: Path, mode: int, reason: str) -> None:
    """A key file that group or others may read or write is refused, as ssh refuses such a
    private key, with the mode found and the fix."""
    key = PrivateKey.generate()
    path = _key_file(tmp_path / "signing.key", key, mode)
    spec = f"{public_key_to_text(key.public_key)}=KEYFILE:{path}"
    with pytest.raises(ConfigError, match=re.escape(reason)) as info:
        load_config(_parse("--data-dir", str(tmp_path), "--signature-provider", spec))
    assert info.value.option == "signature-provider"
    with pytest.raises(ConfigError, match=re.escape(reason)):
        load_config(_parse("--data-dir", str(tmp_path), "--finalizer-key", f"KEYFILE:{path}"))


def test_a_missing_key_file_is_named(tmp_path: Path) -> None:
    """A key file that is not there is named in the error, with the reason."""
    key = PrivateKey.generate()
    spec = f"{public_key_to_text(key.public_key)}=KEYFILE:{tmp_path / 'nope.key'}"
    with pytest.raises(ConfigError, match=r"cannot read key file .*nope\.key: No such file"):
        load_config(_parse("--data-dir", str(tmp_path), "--signature-provider", spec))


def test_a_producer_without_a_key_is_told_how_to_give_one(tmp_path: Path) -> None:
    """``producer-name`` without a signing key names the producer and both ways to give it."""
    with pytest.raises(ConfigError) as info:
        load_config(_parse("--data-dir", str(tmp_path), "--producer-name", "producera"))
    assert info.value.option == "signature-provider"
    assert "producer-name producera needs its signing key" in info.value.reason
    assert "=KEYFILE:path" in info.value.reason and "=KEY:PVT_K1_" in info.value.reason


def test_a_byte_that_is_not_utf8_names_the_file_and_line(tmp_path: Path) -> None:
    """A config.ini byte that is not UTF-8 is a ConfigError naming the file, line and byte."""
    (tmp_path / "config.ini").write_bytes(b"log-level = info\n# caf\xe9\n")
    with pytest.raises(ConfigError, match=r"byte 0xe9 at column 6 is not UTF-8") as info:
        load_config(_parse("--data-dir", str(tmp_path)))
    assert info.value.option == f"{tmp_path / 'config.ini'}:2"


def test_help_shows_each_default_once() -> None:
    """An option's --help shows at most one default, and none for an option unset by default
    (``--genesis-json`` used to show its help's default and then "(default: None)")."""
    for opt in OPTIONS:
        assert opt.help_text().count("default:") <= 1, opt.name
        assert "None" not in opt.help_text(), opt.name
    genesis = next(o for o in OPTIONS if o.name == "genesis-json")
    assert genesis.help_text() == "genesis file (default: <data-dir>/genesis.json)"


def test_run_help_groups_the_options_by_section() -> None:
    """``run --help`` has one argument group per section of the options table, in its order,
    holding that section's options."""
    parser = argparse.ArgumentParser()
    add_options(parser)
    groups = {g.title: g for g in parser._action_groups}
    for title, options in OPTION_SECTIONS:
        flags = [a.option_strings[0] for a in groups[title]._group_actions]
        assert [f for f in flags if f != "--config"] == ["--" + o.name for o in options]
    assert [o for _, section in OPTION_SECTIONS for o in section] == list(OPTIONS)


def test_the_commented_config_lists_every_option_and_reads_as_the_defaults(
    tmp_path: Path,
) -> None:
    """``commented_config()`` holds every option, commented out, under its section's title
    with its help; read as it is it sets nothing, and with every ``# name = value`` line
    uncommented it reads as the declared defaults."""
    text = commented_config()
    for title, options in OPTION_SECTIONS:
        assert f" {title} " in text
        for opt in options:
            assert re.search(rf"^# {re.escape(opt.name)} =", text, re.MULTILINE), opt.name
            assert opt.help.split()[0] in text
    data = tmp_path / "data"
    data.mkdir()
    (data / "config.ini").write_text(text)
    assert read_ini(data / "config.ini") == {}
    default = load_config(_parse("--data-dir", str(data)))
    uncommented = re.sub(r"^# ([a-z0-9-]+ = \S.*)$", r"\1", text, flags=re.MULTILINE)
    (data / "config.ini").write_text(uncommented)
    with_default = [o.name for o in OPTIONS if o.default not in (None, "") and not o.repeatable]
    assert list(read_ini(data / "config.ini")) == with_default
    assert load_config(_parse("--data-dir", str(data))) == default
