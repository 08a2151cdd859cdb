"""The key tables of docs/build-toml.md, rendered from build.toml's JSON Schema
(itself generated from the models), so that the reference says what the loader
does. `kernelnix schema build-toml --markdown` prints them; a test keeps the
doc's copies equal to them (`pytest --update-golden` rewrites the copies).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kernelnix.config.locate import KeyPath
from kernelnix.config.types import VALUE_TYPES

# Table name -> where the table is in a build.toml (an int: an array's entries).
TABLES: dict[str, KeyPath] = {
    "top level": (),
    "general": ("general",),
    "general.hub": ("general", "hub"),
    "general.cuda": ("general", "cuda"),
    "general.neuron, general.xpu": ("general", "neuron"),
    "general.tpu": ("general", "tpu"),
    "kernel dependency": ("general", "kernel-depends", 0),
    "torch": ("torch",),
    "torch-noarch": ("torch-noarch",),
    "tvm-ffi": ("tvm-ffi",),
    "kernel.<name>": ("kernel", "<name>"),
}
EDITIONS = ("5", "v4", "v3")  # as the columns name them; the order of the `then`/`else` roots
Node = dict[str, Any]


def markdown_tables(schema: Node) -> dict[str, str]:
    """`{name: table}`: the value types, then each table of build.toml."""
    roots = [
        _resolve(schema, schema["then"]),
        *(_resolve(schema, r) for r in schema["else"]["anyOf"]),
    ]
    tables = {"value types": _value_types_table()}
    for name, path in TABLES.items():
        found = [_find(schema, root, path) for root in roots]
        tables[name] = _keys_table(schema, found)
    return tables


def _value_types_table() -> str:
    rows = [("type", "rule", "examples")]
    for value_type in VALUE_TYPES:
        choices = value_type.get("enum")
        rule = value_type["description"]
        if choices:
            rule += " One of " + ", ".join(f"`{c}`" for c in choices) + "."
        examples = ", ".join(f"`{json.dumps(e)}`" for e in value_type.get("examples", []))
        rows.append((value_type["title"], rule, examples))
    return _markdown(rows)


def _keys_table(schema: Node, tables: list[Node | None]) -> str:
    """One row per key of edition 5's table: key, type, default, (editions,) description."""
    edition5 = tables[0]
    assert edition5 is not None, "every table exists in edition 5"
    if all("then" in case for case in edition5.get("allOf", [{}])):  # chosen by a tag
        return _union_table(schema, edition5)
    keys = _keys(edition5)
    statuses = {key: [_status(table, key) for table in tables] for key in keys}
    present = [table is not None for table in tables]
    differs = any(
        len({s for s, p in zip(row, present, strict=True) if p}) > 1 for row in statuses.values()
    )
    header = ("key", "type", "default", *(("editions",) if differs else ()), "description")
    rows = [header]
    for key in keys:
        node = edition5["properties"][key]
        editions = (_editions(statuses[key]),) if differs else ()
        rows.append(
            (
                f"`{key}`",
                _type_words(schema, node),
                _default(edition5, key),
                *editions,
                _description(schema, node),
            )
        )
    return _markdown(rows)


def _union_table(schema: Node, union: Node) -> str:
    """A table of many shapes (the kernel tables, by `backend`): a column says which
    has each key."""
    (tag,) = union["required"]
    tags = [case["if"]["properties"][tag]["const"] for case in union["allOf"]]
    members = [_resolve(schema, case["then"]) for case in union["allOf"]]
    keys = list(dict.fromkeys(key for member in members for key in member["properties"]))
    rows = [("key", "type", "default", "for", "description")]
    for key in keys:
        having = [(t, m) for t, m in zip(tags, members, strict=True) if key in m["properties"]]
        member = having[0][1]
        node = member["properties"][key]
        kind = ", ".join(f"`{t}`" for t in tags) if key == tag else _type_words(schema, node)
        where = "all" if len(having) == len(members) else ", ".join(t for t, _ in having)
        rows.append((f"`{key}`", kind, _default(member, key), where, _description(schema, node)))
    return _markdown(rows)


def _keys(table: Node) -> list[str]:
    """The keys of a table; a snake_case spelling of a key is the key's row."""
    keys = table["properties"]
    return [key for key in keys if not ("_" in key and key.replace("_", "-") in keys)]


def _status(table: Node | None, key: str) -> str:
    if table is None or key not in table["properties"]:
        return "absent"
    return "required" if key in table.get("required", ()) else "optional"


def _editions(statuses: list[str]) -> str:
    """`5, v4, v3 (optional)`: the editions with the key, and where it is required or
    optional unlike in edition 5."""
    words = []
    for edition, status in zip(EDITIONS, statuses, strict=True):
        if status != "absent":
            words.append(edition if status == statuses[0] else f"{edition} ({status})")
    return ", ".join(words)


def _default(table: Node, key: str) -> str:
    if key in table.get("required", ()):
        return "required"
    node = table["properties"][key]
    return f"`{json.dumps(node['default'])}`" if "default" in node else "none"


def _type_words(schema: Node, node: Node) -> str:
    """`[CUDA capability]`, `integer ≥ 0`, `table`: a key's type in the doc's words."""
    if "$ref" in node:
        name = node["$ref"].removeprefix("#/$defs/")
        title = schema["$defs"][name].get("title", name)
        return "table" if title == name else str(title)  # a model titled in words
    if node.get("type") == "object":
        return "table"
    if "title" in node:  # a value type (kernelnix.config.types)
        return str(node["title"])
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if node.get("type") == "array":
        return f"[{_type_words(schema, node['items'])}]"
    if node.get("type") == "integer" and node.get("minimum") == 0:
        return "integer ≥ 0"
    return str(node["type"])


def _description(schema: Node, node: Node) -> str:
    if "description" in node:
        return str(node["description"])
    return str(_resolve(schema, node).get("description", ""))


def _resolve(schema: Node, node: Node) -> Node:
    """`node`, or the definition it refers to."""
    ref = node.get("$ref")
    return schema["$defs"][ref.removeprefix("#/$defs/")] if ref else node


def _find(schema: Node, root: Node, path: KeyPath) -> Node | None:
    """The table at `path` from `root`: a key, an array entry (an int), or any
    name of a table of tables. None where this edition has no such table."""
    node: Node | None = root
    for part in path:
        if node is None:
            return None
        node = _resolve(schema, node)
        if isinstance(part, int):
            node = node.get("items")
        elif part in node.get("properties", {}):
            node = node["properties"][part]
        else:
            found = node.get("additionalProperties")
            node = found if isinstance(found, dict) else None
    return None if node is None else _resolve(schema, node)


def _markdown(rows: Sequence[tuple[str, ...]]) -> str:
    header, *body = rows
    lines = [_row(header), "|" + "---|" * len(header)]
    lines += [_row(row) for row in body]
    return "\n".join(lines) + "\n"


def _row(cells: tuple[str, ...]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"
