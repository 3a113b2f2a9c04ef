"""``bor-contract init DIR``: a new contract to start from, one that builds and runs."""

from __future__ import annotations

from pathlib import Path

SOURCE = """\
// A contract counts greetings per account: `hi(user)` by `user`.
import { Datastream, Row, Table, check, emitEvent, n, receiver, requireAuth } from "sdk";

class Greeting extends Row {
  constructor(public user: u64 = 0, public count: u64 = 0) {
    super();
  }
  primaryKey(): u64 {
    return this.user;
  }
  write(ds: Datastream): void {
    ds.writeName(this.user).writeU64(this.count);
  }
  read(ds: Datastream): void {
    this.user = ds.readName();
    this.count = ds.readU64();
  }
}

function hi(user: u64): void {
  requireAuth(user);
  const greetings = new Table<Greeting>(receiver(), receiver(), n("greetings"));
  const row = greetings.find(user);
  if (row === null) {
    greetings.store(new Greeting(user, 1), user);
  } else {
    row.count += 1;
    greetings.update(row);
  }
  emitEvent(n("greeted"), new Datastream().writeName(user).toBytes());
}

export function apply(receiver: u64, code: u64, action: u64): void {
  const ds = Datastream.fromActionData();
  if (action == n("hi")) {
    const user = ds.readName();
    ds.end();
    hi(user);
  } else {
    check(false, "unknown action");
  }
}
"""

ABI = """\
{
  "version": "bor::abi/1",
  "structs": [
    {"name": "hi", "fields": [{"name": "user", "type": "name"}]},
    {"name": "greeting", "fields": [
      {"name": "user", "type": "name"}, {"name": "count", "type": "u64"}]}
  ],
  "actions": [{"name": "hi", "type": "hi"}],
  "tables": [{"name": "greetings", "type": "greeting", "index_type": "i64", "secondary": []}],
  "events": [{"name": "greeted", "type": "hi"}]
}
"""


class InitError(Exception):
    """The template could not be written; ``reason`` is one line for the user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def init(directory: Path) -> list[Path]:
    """Write ``<name>.ts`` and ``abi.json`` into ``directory`` (new or empty)."""
    if directory.exists() and any(directory.iterdir()):
        raise InitError(f"{directory}: exists and is not empty")
    name = directory.resolve().name
    if not name.isidentifier():
        raise InitError(f"{directory}: the directory names the contract: letters, digits, _")
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / f"{name}.ts"
    abi = directory / "abi.json"
    source.write_text(SOURCE, encoding="utf-8")
    abi.write_text(ABI, encoding="utf-8")
    return [source, abi]
