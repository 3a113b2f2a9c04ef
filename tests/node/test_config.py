"""config.ini and flags: flags win, repeatable options, errors name the option."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from chain.crypto import PrivateKey, public_key_to_text
from node.config import add_options, load_config
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
    assert (config.http_host, config.http_port) == ("127.0.0.1", 9999)
    assert config.producers == ("producera", "producerb")
    assert config.signing_keys[key.public_key].to_text() == key.to_text()
    assert config.max_mempool_txs == 9
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


def test_p2p_tls_is_on_unless_turned_off(tmp_path: Path) -> None:
    """TLS between nodes is on by default; ``p2p-tls = off`` turns it off."""
    assert load_config(_parse("--data-dir", str(tmp_path))).p2p_tls is True
    assert load_config(_parse("--data-dir", str(tmp_path), "--p2p-tls", "off")).p2p_tls is False
