"""docs/contracts.md's SDK reference is what scripts/sdk_reference.py makes from the SDK's
sources now, and it gives the signatures users were misled by before."""

from __future__ import annotations

from scripts.sdk_reference import DOC, reference, rendered


def test_the_sdk_reference_is_generated_from_the_sources() -> None:
    """A signature changed in contracts/sdk/assembly without regenerating the reference fails
    here; run scripts/sdk_reference.py to update it."""
    doc = DOC.read_text()
    assert rendered(doc) == doc, "run: .venv/bin/python scripts/sdk_reference.py"


def test_the_reference_holds_every_export_with_its_signature() -> None:
    """Functions, classes with their methods, constants and types are listed as declared:
    erase takes the id, writeVarUint32 is spelled so, the operators are named."""
    text = reference()
    for line in [
        "  erase(id: u64): void",
        "  writeVarUint32(v: u32): Datastream",
        "function check(condition: bool, message: string): void",
        "class Table<T extends Row>",
        "  Asset.add(a: Asset, b: Asset): Asset   // operator +",
        "type Name = u64",
        "const MAX_AMOUNT: i64",
        "function firstReceiver(): Name",
    ]:
        assert line in text.splitlines(), line
    assert "__bor_enter" not in text
