"""Drafters: what proposes candidate tokens for speculative decoding."""
from __future__ import annotations

import ctypes
import os
from typing import TYPE_CHECKING, Literal, Optional

from . import _capi
from ._handle import Handle
from .errors import check
from .model import PathLike, encode_path

if TYPE_CHECKING:
    from .model import Model

DrafterKind = Literal["prompt_lookup", "eagle"]


class Drafter:
    """Proposes a chain or tree of candidates after a session's context; the model verifies them
    in one pass, and the output stays exactly what plain decoding gives.

    A drafter keeps per-sequence bookkeeping: use one drafter per session, one thread at a time.
    Create with :meth:`prompt_lookup` or :meth:`eagle`.
    """

    def __init__(self, model: "Model", params: "_capi.specla_drafter_params",
                 kind: DrafterKind, path: Optional[str] = None) -> None:
        """Internal: use :meth:`prompt_lookup` or :meth:`eagle`."""
        out = _capi.specla_drafter_p()
        check(_capi.lib.specla_drafter_create(model._handle.ptr(), ctypes.byref(params),
                                            ctypes.byref(out)))
        self.model = model
        self.kind: DrafterKind = kind
        self.path = path
        self._handle = Handle(self, "drafter", out.value, _capi.lib.specla_drafter_free,
                              parent=model._handle, exclusive=True)

    @classmethod
    def prompt_lookup(cls, model: "Model", *, min_ngram: Optional[int] = None,
                      max_ngram: Optional[int] = None, max_draft_len: Optional[int] = None,
                      max_branches: Optional[int] = None) -> "Drafter":
        """N-gram match against the session's own context (no training; strong on code and
        repeating text). Unset arguments keep the library's defaults (2, 4, 8, 2)."""
        p = _capi.default_params(_capi.specla_drafter_params)
        p.type = _capi.SPECLA_DRAFTER_PROMPT_LOOKUP
        for name, value in (("min_ngram", min_ngram), ("max_ngram", max_ngram),
                            ("max_draft_len", max_draft_len), ("max_branches", max_branches)):
            if value is not None:
                setattr(p, name, value)
        return cls(model, p, "prompt_lookup")

    @classmethod
    def eagle(cls, model: "Model", path: PathLike) -> "Drafter":
        """A learned EAGLE-style drafter from its folder (config.json with a specla_drafter
        block, model.safetensors), trained for this model; CPU models only for now."""
        p = _capi.default_params(_capi.specla_drafter_params)
        p.type = _capi.SPECLA_DRAFTER_EAGLE
        encoded = encode_path(path, "path")
        p.path = encoded  # read during specla_drafter_create only
        return cls(model, p, "eagle", os.fspath(path))

    def close(self) -> None:
        """Free the drafter."""
        self._handle.close()

    @property
    def closed(self) -> bool:
        return self._handle.closed

    def __enter__(self) -> "Drafter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<specla.Drafter {self.kind}{' ' + repr(self.path) if self.path else ''}>"
