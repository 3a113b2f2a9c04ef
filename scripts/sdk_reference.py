"""Write the SDK reference in docs/contracts.md, every signature ``import ... from "sdk"``
gives a contract, from the SDK's sources (contracts/sdk/assembly), so that the reference
cannot drift from what compiles.

    .venv/bin/python scripts/sdk_reference.py           # rewrite the reference
    .venv/bin/python scripts/sdk_reference.py --check   # exit 1 if it is out of date

What is listed: what ``assembly/index.ts`` exports, as declared: functions, constants, types,
and each exported class with its public constructor, methods, getters and fields (private
ones and the ``__bor_`` internals of the generated code are left out).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASSEMBLY = ROOT / "contracts" / "sdk" / "assembly"
DOC = ROOT / "docs" / "contracts.md"
BEGIN, END = "<!-- sdk-reference: begin -->", "<!-- sdk-reference: end -->"

_EXPORTED = re.compile(r'export \{([^}]*)\} from "\./(\w+)"', re.S)
_TOP = re.compile(
    r"^export (?:abstract )?(function|class|const|type) (\w+)(.*?)(?=\{\n|;\n| \{\}\n|\{$)",
    re.M | re.S,
)
_MEMBER = re.compile(
    r"^  (?:@operator\(\"(.+?)\"\) )?((?:static |get |abstract |public )*)"
    r"(\w+)(\(.*?\))(?:: ([^{;]+?))?\s*[{;]",
    re.M | re.S,
)


def _one_line(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text.replace("( ", "(").replace(", )", ")").replace(",)", ")")


def _class_body(source: str, start: int) -> str:
    """The text of the class whose opening brace is the first at or after ``start``."""
    depth, i = 0, source.index("{", start)
    for j in range(i, len(source)):
        depth += {"{": 1, "}": -1}.get(source[j], 0)
        if depth == 0:
            return source[i + 1 : j]
    raise ValueError("unbalanced class")


def _members(cls: str, body: str) -> list[str]:
    lines = []
    for m in _MEMBER.finditer(body):
        operator, flags, name, params, ret = m.groups()
        if name.startswith("__") or name in ("if", "for", "while", "return", "switch"):
            continue
        if "private" in params and name != "constructor":
            continue
        params = _one_line(re.sub(r"private \w+: [^,)]+,?\s*", "", params))
        where = f"{cls}." if "static" in flags else ""
        kind = "get " if "get " in flags else ""
        shown = "new " + cls + params if name == "constructor" else f"{kind}{where}{name}{params}"
        shown += f": {_one_line(ret)}" if ret else ""
        lines.append(f"  {shown}" + (f"   // operator {operator}" if operator else ""))
    for m in re.finditer(r"^  (?:public )?(\w+): ([^=;]+?)(?: = [^;]+)?;$", body, re.M):
        lines.append(f"  {m.group(1)}: {m.group(2)}")
    return lines


def reference() -> str:
    """The reference, one declaration a line, by module in index.ts's order."""
    index = (ASSEMBLY / "index.ts").read_text()
    out = []
    for names, module in _EXPORTED.findall(index):
        wanted = {
            n.strip() for n in names.split(",") if n.strip() and not n.strip().startswith("__")
        }
        source = (ASSEMBLY / f"{module}.ts").read_text()
        out.append(f"// {module}.ts")
        for m in _TOP.finditer(source):
            kind, name, rest = m.groups()
            if name not in wanted:
                continue
            rest = re.sub(r"\s+", " ", rest).rstrip()
            if kind == "class":
                out.append(f"class {name}{rest}")
                out.extend(_members(name, _class_body(source, m.start())))
            elif kind == "function":
                out.append(f"function {name}{_one_line(rest)}")
            elif kind == "const":
                out.append(f"const {name}{rest.split(' = ')[0]}")
            else:
                out.append(f"type {name}{rest}")
    return "\n".join(out)


def rendered(doc: str) -> str:
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n```ts\n{reference()}\n```\n{END}{tail}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the doc is out of date")
    args = parser.parse_args()
    doc = DOC.read_text()
    if args.check:
        if rendered(doc) != doc:
            print(f"{DOC} is out of date: run scripts/sdk_reference.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(rendered(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
