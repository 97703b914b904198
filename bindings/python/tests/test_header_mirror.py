"""The ctypes mirror against the header itself: every struct of include/specla/specla.h has its
class in _capi with the same fields in the same order and C types, every enum value its
constant, and every function its declaration. Reading defaults back (test_abi.py) cannot see a
field that was appended into what used to be padding; this can."""
from __future__ import annotations

import ctypes
import re
from typing import Dict, List, Tuple

import pytest

from specla import _capi

from conftest import REPO

HEADER = REPO / "include" / "specla" / "specla.h"

_SCALARS = {
    "int32_t": ctypes.c_int32, "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64,
    "size_t": ctypes.c_size_t, "bool": ctypes.c_bool, "float": ctypes.c_float,
    "double": ctypes.c_double, "int": ctypes.c_int,
}


def _header() -> str:
    if not HEADER.exists():
        pytest.skip(f"no header at {HEADER} (not a repository checkout)")
    text = HEADER.read_text()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _structs(text: str) -> Dict[str, List[Tuple[str, str]]]:
    out = {}
    for m in re.finditer(r"typedef struct (\w+) \{(.*?)\} (\w+);", text, flags=re.S):
        fields = []
        for decl in m.group(2).split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            fm = re.match(r"(.*?)(\w+)\s*(\[\w+\])?$", decl)
            assert fm, decl
            fields.append((fm.group(2), (fm.group(1) + (fm.group(3) or "")).strip()))
        out[m.group(1)] = fields
    return out


def _expected_ctype(ctype: str, enums: set, structs: set):  # type: ignore[no-untyped-def]
    """What a C declaration's type must be mirrored as: a ctypes type, or "pointer"."""
    array = re.search(r"\[(\w+)\]$", ctype)
    base = re.sub(r"\[\w+\]$", "", ctype).replace("const", " ").split()
    if "*" in "".join(base) or base[-1].endswith("_callback"):
        kind = "pointer"
    elif base[-1] in _SCALARS:
        kind = _SCALARS[base[-1]]
    elif base[-1] in enums:
        kind = ctypes.c_int
    elif base[-1] in structs:
        kind = getattr(_capi, base[-1])
    else:
        raise AssertionError(f"unknown C type {ctype!r}")
    if array:
        count = getattr(_capi, array.group(1)) if not array.group(1).isdigit() else int(array.group(1))
        return (kind, count)
    return kind


def _is_pointer(t) -> bool:  # type: ignore[no-untyped-def]
    return (t in (ctypes.c_void_p, ctypes.c_char_p) or issubclass(t, ctypes._Pointer)
            or issubclass(t, ctypes._CFuncPtr))


def test_every_struct_is_mirrored_field_for_field() -> None:
    text = _header()
    enums = set(re.findall(r"typedef enum (\w+)", text))
    structs = _structs(text)
    assert len(structs) >= 12
    for name, fields in structs.items():
        cls = getattr(_capi, name, None)
        assert cls is not None, f"_capi lacks struct {name}"
        mirrored = [(f[0], f[1]) for f in cls._fields_]
        assert [f for f, _ in mirrored] == [f for f, _ in fields], f"{name}: fields differ"
        for (field, ctype), (_, mtype) in zip(fields, mirrored):
            want = _expected_ctype(ctype, enums, set(structs))
            where = f"{name}.{field} ({ctype})"
            if isinstance(want, tuple):
                assert issubclass(mtype, ctypes.Array), where
                kind, count = want
                assert mtype._length_ == count, where
                assert kind == "pointer" and _is_pointer(mtype._type_) or mtype._type_ is kind, where
            elif want == "pointer":
                assert _is_pointer(mtype), where
            else:
                assert mtype is want, where


def test_every_enum_value_is_mirrored() -> None:
    text = _header()
    for body in re.findall(r"typedef enum \w+ \{(.*?)\}", text, flags=re.S):
        for name, value in re.findall(r"(SPECLA_\w+)\s*=\s*(\d+)", body):
            if name.startswith("SPECLA_LOG_"):
                continue  # no log sink in the package (see _capi)
            assert getattr(_capi, name, None) == int(value), name


def test_every_function_is_declared() -> None:
    text = _header()
    declared = {f[0] for f in _capi._FUNCTIONS}
    in_header = set(re.findall(r"SPECLA_API[^;]*?\b(specla_\w+)\s*\(", text))
    # The log sink is left out on purpose (see _capi).
    assert in_header - declared == {"specla_set_log_callback"}
    assert declared <= in_header


def test_defines_are_mirrored() -> None:
    text = _header()
    for name in ("SPECLA_ABI_VERSION", "SPECLA_SPEC_MAX_DEPTH_STATS",
                 "SPECLA_SESSION_STATE_VERSION"):
        value = re.search(rf"#define {name} (\d+)", text)
        assert value and getattr(_capi, name.replace("SPECLA_ABI_VERSION", "ABI_VERSION"), None) \
            == int(value.group(1)), name
    assert _capi.lib.specla_abi_version() == _capi.ABI_VERSION
