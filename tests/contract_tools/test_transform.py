"""The SDK's transform: ABI, serializers and ``apply`` from the source annotations, built with
the real pinned compiler and run by the node's runtime (real wasmtime)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chain.abi import Field
from chain.core.execution.contracts import name_to_u64
from chain.core.primitives.errors import ContractError
from chain.vm import raw
from contract_tools.build import Built, build
from contract_tools.cli import main
from tests.contract_tools.conftest import require_toolchain
from tests.contract_tools.test_examples_run import Deployed

DEMO = """\
import { Asset, Checksum256, Name, Table, check, firstReceiver, n, print, receiver } from "sdk";

class Point {
  x: i32 = 0;
  y: i32 = 0;
}

@table("notes")
class Note {
  id: u64 = 0;
  @secondary("author", "u64") author: Name = 0;
  text: string = "";
  tags: Array<string> = [];
  at: Point = new Point();
  digest: Checksum256 = new Uint8Array(32);
  @primary get key(): u64 {
    return this.id;
  }
}

@table("seen")
class Seen {
  constructor(public from: Name = 0, public amount: Asset = new Asset()) {}
  @primary get key(): u64 {
    return this.from;
  }
}

@event("noted")
class Noted {
  constructor(public id: u64 = 0, public author: Name = 0) {}
}

function notes(): Table<Note> {
  return new Table<Note>(receiver(), receiver(), n("notes"), n("notes.author"));
}

@contract
class Demo {
  @action("post")
  addNote(id: u64, author: Name, text: string, tags: Array<string>, at: Point): void {
    const note = new Note();
    note.id = id;
    note.author = author;
    note.text = text;
    note.tags = tags;
    note.at = at;
    notes().store(note, receiver());
    new Noted(id, author).emit();
  }

  @action({ readOnly: true })
  textOf(id: u64): string {
    return notes().get(id, "no such note").text;
  }

  @on_notify("token::transfer")
  onTransfer(from: Name, to: Name, quantity: Asset, memo: string): void {
    print("token " + memo);
    new Table<Seen>(receiver(), receiver(), n("seen")).store(new Seen(from, quantity), receiver());
  }

  @on_notify("*::transfer")
  onAnyTransfer(from: Name, to: Name, quantity: Asset, memo: string): void {
    check(firstReceiver() != receiver(), "a notification comes from another contract");
    print("any " + memo);
  }
}
"""


def build_source(tmp_path: Path, name: str, source: str) -> Built:
    require_toolchain()
    directory = tmp_path / name
    directory.mkdir()
    (directory / f"{name}.ts").write_text(source)
    return build(directory)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build_source(tmp_path_factory.mktemp("transform"), "demo", DEMO)


def test_the_abi_comes_from_the_annotations(demo: Built) -> None:
    """Actions (renamed, read-only, with a result), tables with their secondary index and
    its field, events, nested structs and lists, and the notifications listened to are
    all in the generated ABI, with snake_case field names."""
    abi = json.loads(demo.abi.read_text())
    structs = {s["name"]: s["fields"] for s in abi["structs"]}
    assert structs["post"] == [
        {"name": "id", "type": "u64"}, {"name": "author", "type": "name"},
        {"name": "text", "type": "string"}, {"name": "tags", "type": "string[]"},
        {"name": "at", "type": "point"},
    ]  # fmt: skip
    assert structs["point"] == [{"name": "x", "type": "i32"}, {"name": "y", "type": "i32"}]
    assert structs["note"][-1] == {"name": "digest", "type": "checksum256"}
    assert abi["actions"] == [
        {"name": "post", "type": "post"},
        {"name": "textof", "type": "textof", "read_only": True},
    ]
    assert abi["action_results"] == [{"name": "textof", "result_type": "string"}]
    assert abi["tables"] == [
        {"name": "notes", "type": "note", "index_type": "i64", "secondary": [
            {"name": "author", "table": "notes.author", "type": "u64", "field": "author"}]},
        {"name": "seen", "type": "seen", "index_type": "i64", "secondary": []},
    ]  # fmt: skip
    assert abi["events"] == [{"name": "noted", "type": "noted"}]
    assert abi["notify"] == [
        {"contract": "token", "action": "transfer"},
        {"contract": "*", "action": "transfer"},
    ]


def test_generated_serializers_and_dispatch_round_trip(demo: Built) -> None:
    """An action's JSON arguments reach the method decoded, the row it stores reads back as
    the ABI says (through the secondary index too), the event decodes, and a read-only
    action's return value is its result."""
    d = Deployed(demo, "demo", ["alice"])
    args = {"id": 7, "author": "alice", "text": "hi", "tags": ["a", "b"], "at": {"x": -1, "y": 2}}
    trace = d.push("post", args, "demo")
    assert d.events(trace) == [("noted", {"id": 7, "author": "alice"})]
    row = d.row("demo", "notes", 7)
    assert row == {**args, "digest": "00" * 32}
    assert d.read("textof", {"id": 7}) == "hi"


def test_an_unknown_action_aborts_naming_it(demo: Built) -> None:
    """An action the contract does not declare aborts with "unknown action <name>"."""
    d = Deployed(demo, "demo", [])
    d.chain.abis["demo"].actions["nosuch"] = "textof"  # let the test encode it
    with pytest.raises(ContractError, match="unknown action nosuch"):
        d.push("nosuch", {"id": 1}, "demo")


@pytest.fixture
def sent_by(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Run ``apply`` with ``code`` set to another contract, as a notification will be."""
    code: dict[str, str] = {}
    real = raw.call_apply

    def call_apply(ctx: Any, func: Any, receiver: int, _code: int, action: int) -> None:
        value = name_to_u64(code["contract"])
        real(ctx, func, receiver, value - (1 << 64) if value >= 1 << 63 else value, action)

    monkeypatch.setattr(raw, "call_apply", call_apply)
    yield code


def test_a_notification_runs_the_matching_handler(demo: Built, sent_by: dict[str, str]) -> None:
    """With code != receiver, the handler for that contract's action runs (an exact
    contract before "*"), its arguments decoded from the action's data; a notification no
    handler matches is ignored."""
    d = Deployed(demo, "demo", ["alice"])
    abi = d.chain.abis["demo"]
    abi.actions["transfer"] = "transfer"  # token's transfer, as the notified data
    fields = [("from", "name"), ("to", "name"), ("quantity", "asset"), ("memo", "string")]
    abi.structs["transfer"] = tuple(Field(k, t) for k, t in fields)
    data = {"from": "alice", "to": "demo", "quantity": "1.0000 TOK", "memo": "m"}
    sent_by["contract"] = "token"
    assert d.push("transfer", data, "alice").console == "token m"
    assert d.row("demo", "seen", name_to_u64("alice")) == {"from": "alice", "amount": "1.0000 TOK"}
    sent_by["contract"] = "other"
    assert d.push("transfer", data, "alice").console == "any m"
    args = {"id": 1, "author": "alice", "text": "", "tags": [], "at": {"x": 0, "y": 0}}
    assert d.push("post", args, "alice").console == ""  # ignored
    assert d.row("demo", "notes", 1) is None


@pytest.mark.parametrize(
    ("source", "message", "line"),
    [
        ('@table("t")\nclass T {\n  a: u64 = 0;\n}\n', "mark its primary key", 1),
        ('@table("t")\nclass T {\n  @primary s: string = "";\n}\n', "primary key is a u64", 3),
        ("@contract\nclass C {\n  @action\n  doSomethingLong(): void {}\n}\n",
         '"dosomethinglong" is no valid action', 3),
        ("@contract\nclass C {\n  @action\n  a(x: f32): void {}\n}\n",
         "type f32 has no ABI form", 4),
        ('@contract\nclass C {\n  @on_notify("token.transfer")\n  a(): void {}\n}\n',
         'expected "contract::action"', 3),
        ('@table("t")\nclass T {\n  @primary id: u64 = 0;\n}\n', "no @contract class", 1),
        ('@table("t")\nclass T {\n  @primary id: u64 = 0;\n'
         '  @secondary("s", "double") x: u64 = 0;\n}\n',
         "a double index keys a field of type f64, not u64", 4),
    ],
)  # fmt: skip
def test_a_misused_annotation_is_a_compile_error_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, message: str, line: int
) -> None:
    """A misused annotation fails the build with one line naming the problem and the
    file and line where it is."""
    require_toolchain()
    directory = tmp_path / "bad"
    directory.mkdir()
    (directory / "bad.ts").write_text('import { Name } from "sdk";\n' + source)
    assert main(["build", str(directory)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert f"bad.ts({line + 1}," in err, err


def test_annotations_and_an_abi_json_are_refused_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A source that declares its ABI and an abi.json beside it are two sources of one fact:
    the build refuses them, naming the file to remove."""
    require_toolchain()
    directory = tmp_path / "both"
    directory.mkdir()
    (directory / "both.ts").write_text("@contract\nclass C {\n  @action\n  hi(): void {}\n}\n")
    (directory / "abi.json").write_text('{"version": "bor::abi/1"}')
    assert main(["build", str(directory)]) == 1
    assert "declares its ABI (@contract): remove it" in capsys.readouterr().err
