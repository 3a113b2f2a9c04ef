"""``bor-contract init DIR``: a new contract to start from, one that builds, runs and has a
test, and the commands that take it from here."""

from __future__ import annotations

from pathlib import Path

SOURCE = """\
// A contract counts greetings per account: `hi(user)` by `user`. The annotations declare
// the ABI; `bor-contract build` generates it with the serializers and the dispatcher.
import { Name, Table, n, receiver, requireAuth } from "sdk";

@table("greetings")
class Greeting {
  constructor(public user: Name = 0, public count: u64 = 0) {}

  @primary get key(): u64 {
    return this.user;
  }
}

@event("greeted")
class Greeted {
  constructor(public user: Name = 0, public count: u64 = 0) {}
}

@contract
class NAME_CLASS {
  @action
  hi(user: Name): void {
    requireAuth(user);
    const greetings = new Table<Greeting>(receiver(), receiver(), n("greetings"));
    const row = greetings.find(user);
    let count: u64 = 1;
    if (row === null) {
      greetings.store(new Greeting(user, 1), user);
    } else {
      count = row.count + 1;
      row.count = count;
      greetings.update(row);
    }
    new Greeted(user, count).emit();
  }

  @readonly
  greetings(user: Name): u64 {
    const row = new Table<Greeting>(receiver(), receiver(), n("greetings")).find(user);
    return row === null ? 0 : row.count;
  }
}
"""

TEST = '''\
"""NAME: `hi` counts greetings (run: pytest DIR)."""

from pathlib import Path

from contract_tools.testing import LocalChain


def test_hi_counts_greetings(contract_chain: LocalChain) -> None:
    contract_chain.deploy("ACCOUNT", Path(__file__).parent)  # builds it first
    result = contract_chain.push("ACCOUNT", "hi", {"user": "alice"}, auth="alice")
    assert result.events == [("greeted", {"user": "alice", "count": 1})]
    contract_chain.push("ACCOUNT", "hi", {"user": "alice"}, auth="alice")
    assert contract_chain.rows("ACCOUNT", "ACCOUNT", "greetings") == [{"user": "alice", "count": 2}]
    assert contract_chain.call("ACCOUNT", "greetings", {"user": "alice"}) == 2
'''

NEXT = """\
next:
  bor-contract build {d}
  bor-wallet newaccount bor.gov {a} "$(bor-wallet create --label {a})"
  bor-wallet set code {a} {d}/build/{n}.wasm --abi {d}/build/{n}.abi.json
  bor-wallet push action {a} hi '{{"user":"alice"}}' --auth alice
  bor-wallet call {a} greetings '{{"user":"alice"}}'
  pytest {d}    # test_{n}.py: the contract on a local chain (contract_tools.testing)"""


class InitError(Exception):
    """The template could not be written; ``reason`` is one line for the user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def account_for(name: str) -> str:
    """The account the next commands deploy to: the contract's name as an account name."""
    account = "".join(c for c in name.lower() if c in "abcdefghijklmnopqrstuvwxyz12345.")[:12]
    return account.rstrip(".") or "mycontract"


def init(directory: Path) -> list[Path]:
    """Write ``<name>.ts`` and ``test_<name>.py`` into ``directory`` (new or empty)."""
    if directory.exists() and any(directory.iterdir()):
        raise InitError(f"{directory}: exists and is not empty")
    name = directory.resolve().name
    if not name.isidentifier():
        raise InitError(f"{directory}: the directory names the contract: letters, digits, _")
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / f"{name}.ts"
    test = directory / f"test_{name}.py"
    class_name = name[:1].upper() + name[1:]
    source.write_text(SOURCE.replace("NAME_CLASS", class_name), encoding="utf-8")
    text = TEST.replace("ACCOUNT", account_for(name)).replace("NAME", name)
    test.write_text(text.replace("DIR", str(directory)), encoding="utf-8")
    return [source, test]


def next_steps(directory: Path) -> str:
    """What to run after ``init``: build, deploy with bor-wallet, push, call, test."""
    name = directory.resolve().name
    return NEXT.format(d=directory, a=account_for(name), n=name)
