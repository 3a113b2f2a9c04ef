"""What ``setcode`` demands of an ABI before it stores one, beyond ``parse_abi``.

``parse_abi`` reads any ABI a contract was ever deployed with (they are decoded for the RPC
and the stream long after); an ABI offered now must also make sense for its code: actions,
events and tables name structs, and each secondary index names a field of its row and a
table of its own. Pure and deterministic: ``setcode`` runs it on every node.
"""

from __future__ import annotations

from chain.abi import Abi, parse_abi
from chain.core.primitives.errors import EncodingError

MAX_SECONDARY = 16  # secondary indexes of one table, as Antelope's multi_index


def check_abi(text: str) -> Abi:
    """``parse_abi``, and what ``setcode`` demands beyond it of an ABI it stores: actions,
    events and tables name structs (not bare types), and each secondary index names a field
    of its row struct and a table of its own. ``parse_abi`` stays lenient so that ABIs stored
    before these checks still decode."""
    abi = parse_abi(text)
    for kind, entries in (("actions", abi.actions), ("events", abi.events)):
        for i, (name, type_) in enumerate(entries.items()):
            if type_ not in abi.structs:
                raise EncodingError(f"abi.{kind}[{i}].type", f"{name}: {type_!r} is no struct")
    index_tables = set(abi.tables)
    for i, table in enumerate(abi.tables.values()):
        where = f"abi.tables[{i}]"
        fields = {f.name for f in abi.structs.get(table.type, ())}
        if table.type not in abi.structs:
            raise EncodingError(f"{where}.type", f"{table.name}: {table.type!r} is no struct")
        if len(table.secondary) > MAX_SECONDARY:
            raise EncodingError(f"{where}.secondary", f"more than {MAX_SECONDARY} indexes")
        for j, s in enumerate(table.secondary):
            s_where = f"{where}.secondary[{j}]"
            if s.field and s.field not in fields:
                raise EncodingError(f"{s_where}.field", f"{table.type} has no field {s.field!r}")
            if s.table in index_tables:
                raise EncodingError(f"{s_where}.table", f"{s.table!r} is another table's name")
            index_tables.add(s.table)
    return abi
