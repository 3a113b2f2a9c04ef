"""``bor-bps``: topics, ACLs, produce, consume, audit and verify; a broker; a local deployment.

End-to-end encryption: ``enckey`` makes a member's encryption key (a file, mode 0600) and
registers its public half; ``topickey`` (the owner) wraps a new topic key for the topic's
readers; ``produce --encrypt`` seals and ``consume --enc-key-file`` opens.

Every failure is one line on stderr and exit status 1 (2 for a usage error); ``verify`` and
``audit`` exit 3 when what they check does not hold, and ``verify`` 4 while the message is not
anchored in an irreversible block yet.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from bor_client import Client, ClientError, Signer
from bps.client import BpsClient
from bps.directory import CONTRACT, RIGHTS
from bps.errors import BpsError, NotYet, Tampered
from bps.local import DESCRIPTION, Deployment
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.errors import InvalidKey

DEFAULT_NODE = "http://127.0.0.1:8888"


def node_url(args: argparse.Namespace) -> str:
    if args.node:
        return str(args.node)
    if args.dir and (Path(args.dir) / DESCRIPTION).exists():
        return Deployment.load(Path(args.dir)).node_url
    return DEFAULT_NODE


def user_key(args: argparse.Namespace) -> PrivateKey:
    if args.key_file:
        return PrivateKey.from_text(Path(args.key_file).read_text().strip())
    keys_file = args.keys or (Path(args.dir) / "devnet" / "keys.json" if args.dir else None)
    if keys_file and Path(keys_file).exists():
        keys = json.loads(Path(keys_file).read_text())
        if account(args) not in keys:
            raise BpsError(f"{keys_file} has no key for {account(args)}")
        return PrivateKey.from_text(keys[account(args)])
    raise BpsError("give the account's key: --keys FILE (account -> key) or --key-file FILE")


def account(args: argparse.Namespace) -> str:
    if not args.account:
        raise BpsError("say who acts: --account NAME")
    return str(args.account)


def chain(args: argparse.Namespace) -> Client:
    return Client(node_url(args), Signer([user_key(args)]))


def rights_of(text: str) -> int:
    value = 0
    for part in text.split(","):
        if part not in RIGHTS:
            raise BpsError(f"rights: a list of {', '.join(RIGHTS)}, not {part!r}")
        value |= RIGHTS[part]
    return value


def contract_push(args: argparse.Namespace, action: str, data: dict[str, Any]) -> None:
    result = chain(args).contract(CONTRACT).push(action, data, account(args))
    for act in (result.trace or {}).get("actions", ()):
        for event in act.get("events", ()):
            print(event.get("name"), json.dumps(event.get("data", event.get("hex"))))


def cmd_tenant(args: argparse.Namespace) -> None:
    contract_push(args, "addtenant", {"tenant": args.tenant, "owner": args.owner})


def cmd_member(args: argparse.Namespace) -> None:
    contract_push(args, "addmember", {"tenant": args.tenant, "account": args.member, "enckey": ""})


def cmd_topic(args: argparse.Namespace) -> None:
    contract_push(
        args,
        "createtopic",
        {
            "tenant": args.tenant,
            "topic": args.topic,
            "partitions": args.partitions,
            "replicas": args.replicas,
            "retention_s": args.retention_s,
        },
    )


def cmd_grant(args: argparse.Namespace) -> None:
    expires = (time.time_ns() // 1000 + args.expires_in * 1_000_000) if args.expires_in else 0
    contract_push(
        args,
        "grant",
        {
            "tenant": args.tenant,
            "principal": args.principal,
            "pattern": args.pattern,
            "rights": rights_of(args.rights),
            "expires": expires,
        },
    )


def cmd_revoke(args: argparse.Namespace) -> None:
    contract_push(args, "revoke", {"tenant": args.tenant, "id": args.id})


def cmd_acls(args: argparse.Namespace) -> None:
    for row in Client(node_url(args)).contract(CONTRACT).rows("acls", args.tenant):
        print(json.dumps(row))


def enc_key(args: argparse.Namespace) -> PrivateKey | None:
    path = getattr(args, "enc_key_file", None)
    if not path:
        return None
    try:
        return PrivateKey.from_text(Path(path).read_text().strip())
    except InvalidKey as err:
        raise BpsError(f"{path}: {err}") from None


async def _with_client(
    args: argparse.Namespace, work: Callable[[BpsClient], Coroutine[Any, Any, int]]
) -> int:
    client = BpsClient(node_url(args), account(args), user_key(args), enc_key(args))
    async with client:
        return await work(client)


async def _enckey(args: argparse.Namespace, client: BpsClient) -> int:
    """A new encryption key in a new file only the user reads, then its public half on the
    chain as the account's enckey in the tenant."""
    key = PrivateKey.generate()
    try:
        fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise BpsError(f"{args.out} exists: not overwriting a key") from None
    with os.fdopen(fd, "w") as out:
        out.write(key.to_text() + "\n")
    client.enc_key = key
    pushed = await client.set_enckey(args.tenant)
    where = "registered in" if pushed else "kept off the chain: you own"
    print(f"{args.out}: encryption key {where} {args.tenant}")
    return 0


async def _topickey(args: argparse.Namespace, client: BpsClient) -> int:
    version, readers = await client.rotate_topic_key(args.tenant, args.topic)
    print(json.dumps({"topic": f"{args.tenant}/{args.topic}", "version": version,
                      "wrapped_for": readers}))  # fmt: skip
    return 0


async def _produce(args: argparse.Namespace, client: BpsClient) -> int:
    lines = args.message or [line.rstrip("\n") for line in sys.stdin]
    offsets = await client.produce(
        args.tenant,
        args.topic,
        [m.encode() for m in lines],
        args.partition,
        args.key.encode() if args.key else None,
        encrypt=args.encrypt,
    )
    for offset in offsets:
        print(offset)
    return 0


async def _consume(args: argparse.Namespace, client: BpsClient) -> int:
    messages = await client.consume(
        args.tenant, args.topic, args.partition, args.group, args.max, args.wait_ms
    )
    for m in messages:
        print(f"{m.offset}\t{m.payload.decode(errors='replace')}")
    if messages and not args.no_commit:
        await client.commit(
            args.tenant, args.topic, args.partition, args.group, messages[-1].offset
        )
    return 0


async def _audit(args: argparse.Namespace, client: BpsClient) -> int:
    report = await client.audit(args.tenant, args.topic)
    summary = {
        "topic": f"{args.tenant}/{args.topic}",
        "id": report.topic.id,
        "anchors": report.anchors,
        "covered": {str(p): last for p, last in sorted(report.covered.items())},
        "not_irreversible": report.pending,
        "problems": report.problems,
        "ok": report.ok,
    }
    print(json.dumps(summary))
    return 0 if report.ok else 3


async def _verify(args: argparse.Namespace, client: BpsClient) -> int:
    payload = Path(args.payload_file).read_bytes() if args.payload_file else None
    try:
        found = await client.verify(args.tenant, args.topic, args.partition, args.offset, payload)
    except Tampered as err:
        print(f"NOT VERIFIED: {err}", file=sys.stderr)
        return 3
    except NotYet as err:
        print(f"not yet: {err}; ask again in a moment", file=sys.stderr)
        return 4
    print(
        f"verified: offset {args.offset} is in anchor {found['anchor']} "
        f"(offsets {found['first']}-{found['last']}, irreversible block {found['block']})"
    )
    return 0


def cmd_broker(args: argparse.Namespace) -> None:
    from bps.local import run_broker

    run_broker(Path(args.dir), args.name)


def cmd_anchor(args: argparse.Namespace) -> None:
    from bps.local import run_anchorer

    run_anchorer(Path(args.dir), args.name)


def cmd_up(args: argparse.Namespace) -> None:
    from bps.local import up

    up(Path(args.dir), args.brokers, args.first_port, args.rpc_port)


def _async(
    fn: Callable[[argparse.Namespace, BpsClient], Coroutine[Any, Any, int]],
) -> Callable[[argparse.Namespace], int]:
    return lambda args: asyncio.run(_with_client(args, lambda c: fn(args, c)))


Add = Callable[[str, Callable[[argparse.Namespace], Any], str], argparse.ArgumentParser]


def _message_commands(add: Add) -> None:
    """produce and consume, and the encryption keys they use."""
    c = add("produce", _async(_produce), "publish messages (arguments, else stdin lines)")
    c.add_argument("tenant")
    c.add_argument("topic")
    c.add_argument("message", nargs="*")
    c.add_argument("--partition", type=int)
    c.add_argument("--key")
    c.add_argument("--encrypt", action="store_true", help="seal under the topic's newest key")
    c.add_argument("--enc-key-file", help="your encryption key (from enckey), for --encrypt")
    c = add("consume", _async(_consume), "messages after the group's committed offset")
    c.add_argument("tenant")
    c.add_argument("topic")
    c.add_argument("--partition", type=int, default=0)
    c.add_argument("--group", default="default")
    c.add_argument("--max", type=int, default=100)
    c.add_argument("--wait-ms", type=int, default=1000)
    c.add_argument("--no-commit", action="store_true")
    c.add_argument("--enc-key-file", help="your encryption key: sealed messages are opened")
    c = add("enckey", _async(_enckey), "make your encryption key and register it in a tenant")
    c.add_argument("tenant")
    c.add_argument("--out", required=True, help="a new file for the key (mode 0600)")
    c = add("topickey", _async(_topickey), "wrap a new key of a topic for its readers (owner)")
    c.add_argument("tenant")
    c.add_argument("topic")
    c.add_argument("--enc-key-file", required=True, help="your encryption key (from enckey)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bor-bps", description=__doc__.splitlines()[0])
    p.add_argument(
        "--node", help=f"the node's RPC (default: the deployment's, else {DEFAULT_NODE})"
    )
    p.add_argument("--dir", default="bps-data", help="the local deployment's directory")
    p.add_argument("--account", help="who acts")
    p.add_argument(
        "--keys", help="a JSON file of account -> key (default: the deployment's devnet keys)"
    )
    p.add_argument("--key-file", help="a file holding the account's private key")
    sub = p.add_subparsers(dest="command", required=True)

    def add(
        name: str, fn: Callable[[argparse.Namespace], Any], help_: str
    ) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help_)
        c.set_defaults(fn=fn)
        return c

    c = add("up", cmd_up, "a local deployment: a devnet, the contract, and 3 brokers")
    c.add_argument("--brokers", type=int, default=3)
    c.add_argument("--first-port", type=int, default=24200, help="NATS and sidecar ports from")
    c.add_argument(
        "--rpc-port",
        type=int,
        default=8888,
        help="the devnet's RPC port (its admin RPC and p2p: the next two)",
    )
    c = add("broker", cmd_broker, "run one broker of a deployment: its nats-server and sidecar")
    c.add_argument("--name", required=True)
    c = add("anchor", cmd_anchor, "run a broker's anchorer (its broker starts it)")
    c.add_argument("--name", required=True)
    c = add("tenant", cmd_tenant, "add a tenant (governance)")
    c.add_argument("tenant")
    c.add_argument("owner")
    c = add("member", cmd_member, "add a member to a tenant (its owner)")
    c.add_argument("tenant")
    c.add_argument("member")
    c = add("topic", cmd_topic, "create a topic (the tenant's owner)")
    c.add_argument("tenant")
    c.add_argument("topic")
    c.add_argument("--partitions", type=int, default=1)
    c.add_argument("--replicas", type=int, default=3)
    c.add_argument("--retention-s", type=int, default=0)
    c = add("grant", cmd_grant, "grant rights on topics (the tenant's owner)")
    c.add_argument("tenant")
    c.add_argument("principal")
    c.add_argument("pattern", help="a topic, a prefix ending in *, or *")
    c.add_argument("rights", help="produce,consume,admin")
    c.add_argument("--expires-in", type=int, default=0, help="seconds")
    c = add("revoke", cmd_revoke, "revoke an ACL entry by id (the tenant's owner)")
    c.add_argument("tenant")
    c.add_argument("id", type=int)
    c = add("acls", cmd_acls, "a tenant's ACL entries")
    c.add_argument("tenant")
    _message_commands(add)
    c = add("audit", _async(_audit), "every anchor of a topic, checked against the chain")
    c.add_argument("tenant")
    c.add_argument("topic")
    c = add("verify", _async(_verify), "prove a message against its anchor on the chain")
    c.add_argument("tenant")
    c.add_argument("topic")
    c.add_argument("partition", type=int)
    c.add_argument("offset", type=int)
    c.add_argument("--payload-file", help="the message as you hold it (default: the broker's)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code = args.fn(args)
    except (BpsError, ClientError, OSError, ValueError, KeyError) as err:
        print(f"bor-bps: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
