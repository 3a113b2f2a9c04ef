"""TLS 1.3 between nodes, bound to the node key that the signed handshake proves.

Node keys are secp256k1 (``chain.core.primitives.crypto``), which TLS 1.3 does not offer as a
signature algorithm, so they cannot sign a certificate. Each node instead makes a throw-away Ed25519
key and a self-signed certificate when it starts (``TlsIdentity``); the key lives in memory
(on disk only encrypted, for the moment OpenSSL loads it). The listener is the TLS server
and presents that certificate; the dialler is the TLS client and checks no certificate
chain, since who the peer is gets proven by the handshake that follows inside TLS
(``p2p.wire.handshake``). That handshake is bound to the TLS session: each side signs, with its
node key and over the other's nonce, the SHA-256 of the listener's certificate as it saw it,
and refuses a peer whose signed hash differs from its own view (the listener knows its
certificate; the dialler read it with ``getpeercert``). Python 3.11's ``ssl`` exports no
keying material and TLS 1.3 defines no tls-unique, hence the certificate.

Threats, briefly:

- Eavesdropping: frames travel inside TLS 1.3 (AEAD, ephemeral key exchange, so recorded
  traffic stays secret if a key leaks later).
- Tampering, injection, replay on the wire: TLS record authentication ends the connection.
- A relay that terminates TLS at each end with its own certificate (a man in the middle):
  the dialler saw the relay's certificate and signs its hash, the listener expects its own,
  and the other way round, so both refuse it. To pass, the relay would have to present the
  listener's certificate, which takes the listener's TLS key, or forge a node key signature.
- Strangers' TLS handshakes cost us a key exchange and a signature each, inside the same
  handshake timeout and limits on unauthenticated connections as any other connection.
- Downgrade: with ``p2p-tls = on`` a node talks to no peer without TLS; altering the
  plaintext preamble only makes the two ends refuse each other.
- Not covered: cutting connections (anyone on the path can); which keys may connect at all
  (``allowed-connection``); and RDMA, whose data path is not encrypted: only its control
  channel, this TCP connection, is. RDMA is for inside one data-centre fabric.

Before TLS or the first frame, each side sends an 8-byte preamble: ``BoRp2p``, a version and
whether it runs TLS. The dialler writes first; the listener answers after reading it, so
both ends learn of a mismatch in plain words (a ``TLS_MISMATCH`` go_away and a log line at
each end) instead of a TLS error or a hang.
"""

from __future__ import annotations

import asyncio
import datetime
import secrets
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.x509.oid import NameOID

from chain.core.primitives.crypto import sha256
from p2p.errors import HandshakeFailed
from p2p.transport.tcp import TcpChannel
from p2p.wire.messages import GoAwayReason

log = structlog.get_logger("p2p")

MAGIC = b"BoRp2p"
PREAMBLE_VERSION = 1
PREAMBLE_SIZE = len(MAGIC) + 2
# Nobody checks the validity period (the handshake authenticates), but OpenSSL wants one.
_VALID_FOR = datetime.timedelta(days=3650)


@dataclass(frozen=True, slots=True)
class TlsIdentity:
    """This node's TLS certificate (DER) and the contexts that use it."""

    certificate: bytes
    server: ssl.SSLContext
    client: ssl.SSLContext

    @property
    def binding(self) -> bytes:
        """What the handshakes of connections we accept are bound to."""
        return sha256(self.certificate)

    @classmethod
    def generate(cls) -> TlsIdentity:
        """A fresh Ed25519 key and self-signed certificate, and TLS 1.3-only contexts."""
        key = ed25519.Ed25519PrivateKey.generate()
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bor-node")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + _VALID_FOR)
            .sign(key, None)  # Ed25519 takes no separate hash
        )
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.minimum_version = ssl.TLSVersion.TLSv1_3
        # No session tickets: a resumed session would skip the certificate we bind to.
        server.num_tickets = 0
        # ``ssl`` loads keys only from files: the key goes there encrypted under a password
        # that only this process ever holds, and the files are gone right after.
        password = secrets.token_bytes(32)
        with tempfile.TemporaryDirectory(prefix="bor-tls-") as tmp:
            cert_file, key_file = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
            cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
            key_file.write_bytes(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.BestAvailableEncryption(password),
                )
            )
            server.load_cert_chain(cert_file, key_file, password=password)
        client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        client.minimum_version = ssl.TLSVersion.TLSv1_3
        client.check_hostname = False
        client.verify_mode = ssl.CERT_NONE  # the handshake authenticates the peer (above)
        return cls(cert.public_bytes(serialization.Encoding.DER), server, client)


def preamble(tls: bool) -> bytes:
    return MAGIC + bytes([PREAMBLE_VERSION, int(tls)])


def parse_preamble(raw: bytes) -> bool:
    """Whether the peer runs TLS; raises HandshakeFailed for anything but a preamble."""
    if raw[: len(MAGIC)] != MAGIC:
        raise HandshakeFailed(
            GoAwayReason.FATAL_OTHER, "peer did not open with the BoR p2p preamble"
        )
    version, tls = raw[len(MAGIC)], raw[len(MAGIC) + 1]
    if version != PREAMBLE_VERSION:
        raise HandshakeFailed(GoAwayReason.WRONG_VERSION, f"p2p preamble version {version}")
    if tls not in (0, 1):
        raise HandshakeFailed(GoAwayReason.FATAL_OTHER, f"p2p preamble TLS flag {tls}")
    return tls == 1


def check_agree(ours: bool, theirs: bool) -> None:
    """Both ends must run TLS, or neither."""
    if ours != theirs:
        raise HandshakeFailed(
            GoAwayReason.TLS_MISMATCH,
            f"the peer has p2p-tls = {_on_off(theirs)} and this node p2p-tls = {_on_off(ours)};"
            " both ends must agree",
        )


async def negotiate(
    channel: TcpChannel,
    identity: TlsIdentity | None,
    dialed: bool,
    timeout: float,
    *,
    preamble_timeout: float | None = None,
    preamble_read: Callable[[], None] = lambda: None,
) -> bytes:
    """Exchange preambles and, with ``identity``, run TLS 1.3 on ``channel``. Returns the TLS
    binding for the handshake (empty without TLS). Raises HandshakeFailed (preamble or a TLS
    mismatch), ChannelClosed (the connection or TLS failed) or, for a listener whose peer's
    preamble did not come within ``preamble_timeout``, TimeoutError. ``preamble_read`` is
    called once a listener has it (the transport then keeps the connection's slot for it)."""
    ours = identity is not None
    if dialed:
        await channel.send_raw(preamble(ours))
        check_agree(ours, parse_preamble(await channel.recv_raw(PREAMBLE_SIZE)))
        if identity is None:
            return b""
        await channel.start_tls(identity.client, server_side=False, timeout=timeout)
    else:
        async with asyncio.timeout(preamble_timeout):
            raw = await channel.recv_raw(PREAMBLE_SIZE)
        preamble_read()
        theirs = parse_preamble(raw)
        if identity is None or not theirs:
            await channel.send_raw(preamble(ours))  # so that the dialler knows why, too
            check_agree(ours, theirs)
            return b""
        await channel.start_tls(
            identity.server, server_side=True, timeout=timeout, preface=preamble(ours)
        )
    session = channel.tls
    assert session is not None, "start_tls returned, so TLS runs"
    if dialed:
        certificate = session.getpeercert(binary_form=True)
        if not certificate:  # TLS 1.3 without resumption always sends one
            raise HandshakeFailed(GoAwayReason.AUTHENTICATION, "peer presented no certificate")
        binding = sha256(certificate)
    else:
        assert identity is not None
        binding = identity.binding
    cipher = session.cipher()
    log.info(
        "p2p_tls",
        remote=channel.remote,
        version=session.version(),
        cipher=cipher[0] if cipher else None,
        certificate=binding.hex()[:16],
    )
    return binding


def _on_off(flag: bool) -> str:
    return "on" if flag else "off"
