"""Python values to hierarchy-file TOML, for :func:`hsched.from_dict`.

The dict mirrors the file: ``{"machine": {"cpus": 2}, "scheduler": [...],
"thread": [...]}``. Top-level dicts become ``[sections]``, top-level lists
of dicts ``[[arrays of tables]]``; inside a table, a list of dicts becomes
a nested array of tables (``[[machine.stolen]]``) and a dict an inline
table (``params = { priority = 1 }``). The file is then parsed and
validated by hsched itself, so errors name keys as they do for files.
"""

from __future__ import annotations

import datetime
import math
from typing import Any, List, Mapping


def _key(k: object, where: str) -> str:
    if not isinstance(k, str):
        raise TypeError(f"{where}: keys must be str, got {type(k).__name__}")
    if k and all(c.isalnum() or c in "-_" for c in k) and k.isascii():
        return k
    return _string(k)


def _string(s: str) -> str:
    out = ['"']
    for c in s:
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def _value(v: Any, where: str) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"{where}: {v} is not a finite number")
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, datetime.timedelta):
        ns = (v.days * 86_400 + v.seconds) * 1_000_000_000 + v.microseconds * 1_000
        return _string(f"{ns}ns")
    if isinstance(v, Mapping):
        items = ", ".join(f"{_key(k, where)} = {_value(x, f'{where}.{k}')}" for k, x in v.items())
        return "{ " + items + " }" if items else "{}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x, f"{where}[{i}]") for i, x in enumerate(v)) + "]"
    raise TypeError(f"{where}: cannot write a {type(v).__name__} in a hierarchy file")


def _is_table_list(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and len(v) > 0 and all(isinstance(x, Mapping) for x in v)


def _table(prefix: str, d: Mapping[str, Any], lines: List[str]) -> None:
    nested = []
    for k, v in d.items():
        if _is_table_list(v):
            nested.append((k, v))
        else:
            lines.append(f"{_key(k, prefix)} = {_value(v, f'{prefix}.{k}')}")
    for k, v in nested:
        for x in v:
            lines.append("")
            lines.append(f"[[{prefix}.{_key(k, prefix)}]]")
            _table(f"{prefix}.{k}", x, lines)


def dumps(doc: Mapping[str, Any]) -> str:
    """``doc`` as hierarchy-file TOML."""
    if not isinstance(doc, Mapping):
        raise TypeError(f"hierarchy: expected a dict, got {type(doc).__name__}")
    lines: List[str] = []
    plain = {k: v for k, v in doc.items() if not isinstance(v, Mapping) and not _is_table_list(v)}
    for k, v in plain.items():
        lines.append(f"{_key(k, 'hierarchy')} = {_value(v, k)}")
    for k, v in doc.items():
        if isinstance(v, Mapping):
            lines.append("")
            lines.append(f"[{_key(k, 'hierarchy')}]")
            _table(k, v, lines)
        elif _is_table_list(v):
            for x in v:
                lines.append("")
                lines.append(f"[[{_key(k, 'hierarchy')}]]")
                _table(k, x, lines)
    return "\n".join(lines).lstrip("\n") + "\n"
