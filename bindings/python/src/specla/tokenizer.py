"""The tokenizer: a checkpoint's tokenizer.json, as libspecla runs it."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional, Sequence, Union

import numpy as np

from . import _capi
from ._handle import Handle
from ._arrays import as_token_array
from .errors import CapacityError, check
from .model import PathLike, encode_path

if TYPE_CHECKING:
    from .model import Model


@dataclass(frozen=True)
class TokenizerInfo:
    """``specla_tokenizer_info``."""
    vocab_size: int       # ids are in [0, vocab_size)
    bos_token_id: int     # -1 when none
    eos_token_id: int     # -1 when none
    add_bos_default: bool  # whether the checkpoint prepends BOS by default


def _no_free(ptr: int) -> None:
    """A model's own tokenizer is freed with the model."""


class Tokenizer:
    """Text to token ids and back. Immutable: any number of threads may use one at once.

    Get one from a model (:attr:`Model.tokenizer`, or :meth:`from_model`) or load one from a
    checkpoint folder (:meth:`load`).
    """

    def __init__(self, ptr: int, free=_capi.lib.specla_tokenizer_free, *,
                 borrowed_from: Optional[Handle] = None) -> None:
        """Internal: use :meth:`load` or :meth:`from_model`."""
        self._handle = Handle(self, "tokenizer", ptr, free, borrowed_from=borrowed_from)
        raw = _capi.specla_tokenizer_info()
        check(_capi.lib.specla_tokenizer_get_info(self._handle.ptr(), ctypes.byref(raw)))
        self.info = TokenizerInfo(raw.vocab_size, raw.bos_token_id, raw.eos_token_id,
                                  bool(raw.add_bos_default))

    @classmethod
    def load(cls, folder: PathLike) -> "Tokenizer":
        """Load tokenizer.json (and its side files) from a folder."""
        out = _capi.specla_tokenizer_p()
        check(_capi.lib.specla_tokenizer_load(encode_path(folder, "folder"), ctypes.byref(out)))
        return cls(out.value)

    @classmethod
    def from_model(cls, model: "Model") -> "Tokenizer":
        """The model's own tokenizer, borrowed from the library's model: usable while that lives
        (StateError after it is freed)."""
        out = _capi.specla_tokenizer_p()
        check(_capi.lib.specla_model_tokenizer(model._handle.live_ptr(), ctypes.byref(out)))
        return cls(out.value, _no_free, borrowed_from=model._handle)

    def close(self) -> None:
        """Release the tokenizer (a model's own: release this reference to the model)."""
        self._handle.close()

    def __enter__(self) -> "Tokenizer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def vocab_size(self) -> int:
        return self.info.vocab_size

    # ---- text <-> ids ----
    def encode(self, text: str, *, add_bos: Optional[bool] = None,
               parse_special: bool = True) -> List[int]:
        """Token ids of ``text``. ``add_bos`` defaults to the checkpoint's own setting;
        ``parse_special`` matches special tokens written in the text."""
        return self.encode_array(text, add_bos=add_bos, parse_special=parse_special).tolist()

    def encode_array(self, text: Union[str, bytes], *, add_bos: Optional[bool] = None,
                     parse_special: bool = True) -> np.ndarray:
        """As :meth:`encode`, as an int32 NumPy array."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        bos = self.info.add_bos_default if add_bos is None else add_bos
        ptr = self._handle.ptr()
        needed = ctypes.c_size_t()
        # A first guess that fits most texts; the library reports the size it needs otherwise.
        out = np.empty(len(data) + 2, dtype=np.int32)
        for _ in range(2):
            st = _capi.lib.specla_tokenize(ptr, data, len(data), bos, parse_special,
                                           out.ctypes.data_as(_capi.c_int32_p), out.size,
                                           ctypes.byref(needed))
            if st == _capi.SPECLA_ERR_CAPACITY:
                out = np.empty(needed.value, dtype=np.int32)
                continue
            check(st)
            return out[:needed.value].copy() if needed.value != out.size else out
        raise CapacityError("specla_tokenize: the needed size changed between calls")

    def decode(self, tokens: Union[Sequence[int], np.ndarray], *,
               skip_special: bool = False) -> str:
        """Text of token ids (invalid UTF-8 from byte tokens becomes U+FFFD)."""
        ids = as_token_array(tokens)
        ptr = self._handle.ptr()
        needed = ctypes.c_size_t()
        buf = ctypes.create_string_buffer(16 * ids.size + 16)
        for _ in range(2):
            st = _capi.lib.specla_detokenize(ptr, ids.ctypes.data_as(_capi.c_int32_p), ids.size,
                                             skip_special, buf, len(buf), ctypes.byref(needed))
            if st == _capi.SPECLA_ERR_CAPACITY:
                buf = ctypes.create_string_buffer(needed.value + 1)
                continue
            check(st)
            return buf.raw[:needed.value].decode("utf-8", "replace")
        raise CapacityError("specla_detokenize: the needed size changed between calls")

    def token_to_piece(self, token: int) -> str:
        """The vocabulary entry of a token, as stored in tokenizer.json."""
        ptr = self._handle.ptr()
        needed = ctypes.c_size_t()
        buf = ctypes.create_string_buffer(64)
        st = _capi.lib.specla_token_to_string(ptr, token, buf, len(buf), ctypes.byref(needed))
        if st == _capi.SPECLA_ERR_CAPACITY:
            buf = ctypes.create_string_buffer(needed.value + 1)
            st = _capi.lib.specla_token_to_string(ptr, token, buf, len(buf), ctypes.byref(needed))
        check(st)
        return buf.raw[:needed.value].decode("utf-8", "replace")

    def piece_to_token(self, piece: str) -> int:
        """The id of a vocabulary entry or added token written exactly as stored."""
        out = ctypes.c_int32()
        check(_capi.lib.specla_token_from_string(self._handle.ptr(), piece.encode("utf-8"),
                                                 ctypes.byref(out)))
        return out.value

    def stream_decoder(self, *, skip_special: bool = False) -> "StreamDecoder":
        """An incremental detokenizer over this tokenizer."""
        return StreamDecoder(self, skip_special=skip_special)


class StreamDecoder:
    """Incremental detokenizer: :meth:`push` returns only final text, never a partial UTF-8
    sequence; the pushed pieces plus :meth:`flush` concatenate to ``decode`` of all tokens."""

    def __init__(self, tokenizer: Tokenizer, *, skip_special: bool = False) -> None:
        out = _capi.specla_stream_decoder_p()
        check(_capi.lib.specla_stream_decoder_create(tokenizer._handle.ptr(), skip_special,
                                                     ctypes.byref(out)))
        self._tokenizer = tokenizer
        # The tokenizer must outlive the decoder: keep its owner (for a model's own tokenizer,
        # the library's model) alive until the decoder is freed.
        owner = tokenizer._handle._borrowed_from or tokenizer._handle
        self._handle = Handle(self, "stream decoder", out.value,
                              _capi.lib.specla_stream_decoder_free, parent=owner,
                              exclusive=True)

    def push(self, token: int) -> str:
        piece = ctypes.c_char_p()
        with self._handle.use() as ptr:
            check(_capi.lib.specla_stream_decoder_push(ptr, token, ctypes.byref(piece)))
            return (piece.value or b"").decode("utf-8")

    def flush(self) -> str:
        piece = ctypes.c_char_p()
        with self._handle.use() as ptr:
            check(_capi.lib.specla_stream_decoder_flush(ptr, ctypes.byref(piece)))
            return (piece.value or b"").decode("utf-8")

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> "StreamDecoder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
