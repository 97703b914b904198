"""ctypes declarations of the C ABI, one to one with ``include/specla/specla.h``.

Everything the package calls in libspecla is declared here, and nowhere else: each struct mirrors
the header's field order and C types, and each function gets its ``argtypes`` and ``restype``
(ctypes would otherwise pass every integer as a C ``int`` and truncate pointers and sizes).
When the header changes, this file changes with it; ``tests/test_abi.py`` reads the defaults the
library itself returns through these structs, so a field out of place shows up as a wrong value.

The library is found in this order: the path in the environment variable ``SPECLA_LIBRARY``
(a development build, e.g. ``build/libspecla.so.3``), then the copy installed inside this package
by ``pip install``. It is loaded with ``RTLD_LOCAL`` (ctypes' default): its symbols, all C and
all prefixed ``specla_``, are not made visible to other libraries of the process.
"""
from __future__ import annotations

import ctypes
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_bool, c_char, c_char_p, c_double, c_float,
                    c_int, c_int32, c_int64, c_size_t, c_uint64, c_void_p)
from pathlib import Path

# The header's version macros this module was written against.
ABI_VERSION = 3
HEADER_VERSION = (0, 1, 0)

LIBRARY_ENV = "SPECLA_LIBRARY"
_INSTALLED_NAME = f"libspecla.so.{ABI_VERSION}"

# ---- enums (plain ints; C enums are int-sized) ---------------------------------------------

specla_status = c_int
SPECLA_OK = 0
SPECLA_ERR_INVALID_ARGUMENT = 1
SPECLA_ERR_IO = 2
SPECLA_ERR_FORMAT = 3
SPECLA_ERR_UNSUPPORTED = 4
SPECLA_ERR_SHAPE = 5
SPECLA_ERR_TOKEN_OUT_OF_RANGE = 6
SPECLA_ERR_OUT_OF_MEMORY = 7
SPECLA_ERR_BACKEND_UNAVAILABLE = 8
SPECLA_ERR_DEVICE = 9
SPECLA_ERR_ABORTED = 10
SPECLA_ERR_CAPACITY = 11
SPECLA_ERR_STATE = 12
SPECLA_ERR_INTERNAL = 13

SPECLA_BACKEND_CPU = 0
SPECLA_BACKEND_CUDA = 1

SPECLA_LOGITS_NONE = 0
SPECLA_LOGITS_LAST = 1
SPECLA_LOGITS_ALL = 2

SPECLA_DRAFTER_PROMPT_LOOKUP = 0
SPECLA_DRAFTER_EAGLE = 1

SPECLA_TREE_AUTO = 0
SPECLA_TREE_HYBRID = 1
SPECLA_TREE_PARALLEL_WY = 2

SPECLA_TREE_SHAPE_AUTO = 0
SPECLA_TREE_SHAPE_DYNAMIC = 1
SPECLA_TREE_SHAPE_FIXED_WIDTH = 2

SPECLA_SPEC_MAX_DEPTH_STATS = 32

SPECLA_SEED_RANDOM = 2**64 - 1  # UINT64_MAX

SPECLA_SESSION_STATE_VERSION = 1

SPECLA_FINISH_NONE = 0
SPECLA_FINISH_EOS = 1
SPECLA_FINISH_STOP_STRING = 2
SPECLA_FINISH_MAX_TOKENS = 3
SPECLA_FINISH_ABORTED = 4
SPECLA_FINISH_ERROR = 5

# ---- callbacks ------------------------------------------------------------------------------

specla_progress_callback = CFUNCTYPE(c_bool, c_float, c_void_p)
specla_token_callback = CFUNCTYPE(c_bool, c_int32, c_char_p, c_void_p)

# ---- structs (field order and types exactly as in the header) -------------------------------


class _Sized(Structure):
    """A size-prefixed struct: every params and info struct begins with ``struct_size``, which a
    new instance holds already (info structs are then ready for the library to fill; params come
    from :func:`default_params`)."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.struct_size = ctypes.sizeof(self)


class specla_model_params(_Sized):
    _fields_ = [
        ("struct_size", c_size_t),
        ("backend", c_int),
        ("device", c_int32),
        ("n_threads", c_int32),
        ("arena_block_bytes", c_size_t),
        ("progress_callback", specla_progress_callback),
        ("progress_user_data", c_void_p),
        ("load_tokenizer", c_bool),
    ]


class specla_model_info(_Sized):
    _fields_ = [
        ("struct_size", c_size_t),
        ("vocab_size", c_int32),
        ("hidden_size", c_int32),
        ("num_layers", c_int32),
        ("num_heads", c_int32),
        ("num_v_heads", c_int32),
        ("head_k_dim", c_int32),
        ("head_v_dim", c_int32),
        ("conv_size", c_int32),
        ("intermediate_size", c_int32),
        ("bos_token_id", c_int32),
        ("eos_token_id", c_int32),
        ("num_parameters", c_int64),
        ("state_bytes", c_size_t),
        ("backend", c_int),
        ("has_tokenizer", c_bool),
    ]


class specla_memory_stats(_Sized):
    _fields_ = [
        ("struct_size", c_size_t),
        ("weight_bytes", c_size_t),
        ("arena_reserved_bytes", c_size_t),
        ("arena_used_bytes", c_size_t),
        ("arena_peak_bytes", c_size_t),
        ("arena_blocks", c_int32),
        ("live_allocations", c_int32),
    ]


class specla_session_params(_Sized):
    _fields_ = [
        ("struct_size", c_size_t),
        ("max_tree_nodes", c_int32),
        ("max_batch_tokens", c_int32),
    ]


class specla_session_memory(_Sized):
    _fields_ = [
        ("struct_size", c_size_t),
        ("state_bytes", c_size_t),
        ("factor_bytes", c_size_t),
        ("scratch_bytes", c_size_t),
        ("context_bytes", c_size_t),
        ("host_bytes", c_size_t),
        ("device_bytes", c_size_t),
        ("total_bytes", c_size_t),
    ]


class specla_logit_bias(Structure):
    _fields_ = [
        ("token", c_int32),
        ("bias", c_float),
    ]


class specla_sampling_params(_Sized):
    _fields_ = [
        ("struct_size", c_size_t),
        ("temperature", c_float),
        ("top_k", c_int32),
        ("top_p", c_float),
        ("seed", c_uint64),
        ("repetition_penalty", c_float),
        ("presence_penalty", c_float),
        ("frequency_penalty", c_float),
        ("penalty_last_n", c_int32),
        ("min_p", c_float),
        ("logit_bias", POINTER(specla_logit_bias)),
        ("n_logit_bias", c_size_t),
    ]


class specla_generate_params(_Sized):
    _fields_ = [
        ("struct_size", c_size_t),
        ("sampling", POINTER(specla_sampling_params)),  # NULL: the defaults
        ("max_tokens", c_int32),
        ("on_token", specla_token_callback),
        ("user_data", c_void_p),
        ("stop_strings", POINTER(c_char_p)),
        ("n_stop_strings", c_size_t),
        ("stop_at_eos", c_bool),
        ("include_special_tokens", c_bool),
        ("include_stop_string", c_bool),
        ("logprobs", c_bool),
        ("top_logprobs", c_int32),
    ]


class specla_tokenizer_info(_Sized):
    _fields_ = [
        ("struct_size", c_size_t),
        ("vocab_size", c_int32),
        ("bos_token_id", c_int32),
        ("eos_token_id", c_int32),
        ("add_bos_default", c_bool),
    ]


class specla_drafter_params(_Sized):
    _fields_ = [
        ("struct_size", c_size_t),
        ("type", c_int),
        ("min_ngram", c_int32),
        ("max_ngram", c_int32),
        ("max_draft_len", c_int32),
        ("max_branches", c_int32),
        ("path", c_char_p),
    ]


class specla_spec_params(_Sized):
    _fields_ = [
        ("struct_size", c_size_t),
        ("generate", POINTER(specla_generate_params)),  # NULL: the defaults
        ("max_draft_nodes", c_int32),
        ("max_draft_depth", c_int32),
        ("tree_algorithm", c_int),
        ("deferred_commit", c_bool),
        ("tree_top_k", c_int32),
        ("tree_prune_margin", c_float),
        ("tree_size_from_cost", c_bool),
        ("speculation_min_gain", c_double),
        ("tree_shape", c_int),
    ]


class specla_verify_params(_Sized):
    _fields_ = [
        ("struct_size", c_size_t),
        ("sampling", POINTER(specla_sampling_params)),  # NULL: the defaults
        ("deferred_commit", c_bool),
        ("tree_algorithm", c_int),
    ]


class specla_spec_stats(_Sized):
    _fields_ = [
        ("struct_size", c_size_t),
        ("steps", c_int64),
        ("drafted", c_int64),
        ("accepted", c_int64),
        ("generated", c_int64),
        ("mean_accepted_length", c_double),
        ("acceptance_rate", c_double),
        ("drafted_at_depth", c_int64 * SPECLA_SPEC_MAX_DEPTH_STATS),
        ("accepted_at_depth", c_int64 * SPECLA_SPEC_MAX_DEPTH_STATS),
        ("seed", c_uint64),
        ("plain_steps", c_int64),
    ]


class specla_generation_step(_Sized):
    _fields_ = [
        ("struct_size", c_size_t),
        ("tokens", POINTER(c_int32)),
        ("n_tokens", c_size_t),
        ("text", c_void_p),  # text_len bytes (may hold a NUL): read with ctypes.string_at
        ("text_len", c_size_t),
        ("finish_reason", c_int),
        ("stop_index", c_int32),
        ("logprobs", POINTER(c_float)),       # n_tokens, with params' logprobs; else NULL
        ("top_ids", POINTER(c_int32)),        # n_tokens x n_top
        ("top_logprobs", POINTER(c_float)),   # n_tokens x n_top
        ("n_top", c_int32),
    ]


# Opaque handles: only ever passed back to the library.
specla_model_p = c_void_p
specla_session_p = c_void_p
specla_drafter_p = c_void_p
specla_tokenizer_p = c_void_p
specla_stream_decoder_p = c_void_p
specla_generation_p = c_void_p

c_int32_p = POINTER(c_int32)
c_float_p = POINTER(c_float)

# ---- functions: (name, restype, argtypes) in header order ------------------------------------

_FUNCTIONS = [
    # Version
    ("specla_version", c_char_p, []),
    ("specla_version_numbers", None, [POINTER(c_int), POINTER(c_int), POINTER(c_int)]),
    ("specla_abi_version", c_int, []),
    ("specla_has_cuda", c_bool, []),
    # Status codes and errors
    ("specla_status_string", c_char_p, [specla_status]),
    ("specla_last_error", c_char_p, []),
    # Model
    ("specla_model_params_init", specla_status, [POINTER(specla_model_params), c_size_t]),
    ("specla_model_load", specla_status,
     [c_char_p, POINTER(specla_model_params), POINTER(specla_model_p)]),
    ("specla_model_free", None, [specla_model_p]),
    ("specla_model_get_info", specla_status, [specla_model_p, POINTER(specla_model_info)]),
    ("specla_model_memory_stats", specla_status, [specla_model_p, POINTER(specla_memory_stats)]),
    # Session
    ("specla_session_params_init", specla_status, [POINTER(specla_session_params), c_size_t]),
    ("specla_session_create", specla_status,
     [specla_model_p, POINTER(specla_session_params), POINTER(specla_session_p)]),
    ("specla_session_free", None, [specla_session_p]),
    ("specla_session_reset", specla_status, [specla_session_p]),
    ("specla_session_n_past", specla_status, [specla_session_p, POINTER(c_int64)]),
    ("specla_session_eval", specla_status,
     [specla_session_p, c_int32_p, c_size_t, c_int, c_float_p, c_size_t]),
    ("specla_session_get_state", specla_status, [specla_session_p, c_int32, c_float_p, c_size_t]),
    # Session state: save, restore, fork; a session's memory
    ("specla_session_save_state", specla_status,
     [specla_session_p, c_void_p, c_size_t, POINTER(c_size_t)]),
    ("specla_session_load_state", specla_status, [specla_session_p, c_void_p, c_size_t]),
    ("specla_session_save_state_file", specla_status, [specla_session_p, c_char_p]),
    ("specla_session_load_state_file", specla_status, [specla_session_p, c_char_p]),
    ("specla_session_copy_state", specla_status, [specla_session_p, specla_session_p]),
    ("specla_session_get_memory", specla_status,
     [specla_session_p, POINTER(specla_session_memory)]),
    # Sampling and plain generation
    ("specla_sampling_params_init", specla_status, [POINTER(specla_sampling_params), c_size_t]),
    ("specla_generate_params_init", specla_status, [POINTER(specla_generate_params), c_size_t]),
    ("specla_generate", specla_status,
     [specla_session_p, c_int32_p, c_size_t, POINTER(specla_generate_params), c_int32_p, c_size_t,
      POINTER(c_size_t)]),
    # Tokenizer
    ("specla_tokenizer_load", specla_status, [c_char_p, POINTER(specla_tokenizer_p)]),
    ("specla_tokenizer_free", None, [specla_tokenizer_p]),
    ("specla_model_tokenizer", specla_status, [specla_model_p, POINTER(specla_tokenizer_p)]),
    ("specla_tokenizer_get_info", specla_status,
     [specla_tokenizer_p, POINTER(specla_tokenizer_info)]),
    ("specla_tokenize", specla_status,
     [specla_tokenizer_p, POINTER(c_char), c_size_t, c_bool, c_bool, c_int32_p, c_size_t,
      POINTER(c_size_t)]),
    ("specla_detokenize", specla_status,
     [specla_tokenizer_p, c_int32_p, c_size_t, c_bool, POINTER(c_char), c_size_t,
      POINTER(c_size_t)]),
    ("specla_token_to_string", specla_status,
     [specla_tokenizer_p, c_int32, POINTER(c_char), c_size_t, POINTER(c_size_t)]),
    ("specla_token_from_string", specla_status, [specla_tokenizer_p, c_char_p, c_int32_p]),
    ("specla_stream_decoder_create", specla_status,
     [specla_tokenizer_p, c_bool, POINTER(specla_stream_decoder_p)]),
    ("specla_stream_decoder_push", specla_status,
     [specla_stream_decoder_p, c_int32, POINTER(c_char_p)]),
    ("specla_stream_decoder_flush", specla_status, [specla_stream_decoder_p, POINTER(c_char_p)]),
    ("specla_stream_decoder_free", None, [specla_stream_decoder_p]),
    ("specla_generate_text", specla_status,
     [specla_session_p, c_char_p, POINTER(specla_generate_params), POINTER(c_void_p),
      POINTER(c_size_t)]),
    ("specla_string_free", None, [c_void_p]),
    # Speculative decoding
    ("specla_drafter_params_init", specla_status, [POINTER(specla_drafter_params), c_size_t]),
    ("specla_drafter_create", specla_status,
     [specla_model_p, POINTER(specla_drafter_params), POINTER(specla_drafter_p)]),
    ("specla_drafter_free", None, [specla_drafter_p]),
    ("specla_spec_params_init", specla_status, [POINTER(specla_spec_params), c_size_t]),
    ("specla_generate_speculative", specla_status,
     [specla_session_p, specla_drafter_p, c_int32_p, c_size_t, POINTER(specla_spec_params),
      c_int32_p, c_size_t, POINTER(c_size_t), POINTER(specla_spec_stats)]),
    ("specla_generate_speculative_text", specla_status,
     [specla_session_p, specla_drafter_p, c_char_p, POINTER(specla_spec_params), POINTER(c_void_p),
      POINTER(c_size_t), POINTER(specla_spec_stats)]),
    ("specla_verify_params_init", specla_status, [POINTER(specla_verify_params), c_size_t]),
    ("specla_session_verify_tree", specla_status,
     [specla_session_p, c_int32_p, c_int32_p, c_size_t, c_float_p, POINTER(specla_verify_params),
      c_int32_p, POINTER(c_size_t), c_int32_p, c_float_p]),
    # Pull-style generation
    ("specla_finish_reason_string", c_char_p, [c_int]),
    ("specla_generation_begin", specla_status,
     [specla_session_p, specla_drafter_p, c_int32_p, c_size_t, POINTER(specla_spec_params),
      POINTER(specla_generation_p)]),
    ("specla_generation_begin_text", specla_status,
     [specla_session_p, specla_drafter_p, POINTER(c_char), c_size_t, POINTER(specla_spec_params),
      POINTER(specla_generation_p)]),
    ("specla_generation_next", specla_status,
     [specla_generation_p, POINTER(specla_generation_step)]),
    ("specla_generation_abort", specla_status, [specla_generation_p]),
    ("specla_generation_end", specla_status, [specla_generation_p]),
    ("specla_generation_stats", specla_status,
     [specla_generation_p, POINTER(specla_spec_stats)]),
    ("specla_generation_free", None, [specla_generation_p]),
]

# The log callback (specla_set_log_callback) is not declared: a Python log sink would be called
# from the library's threads with the GIL to take, and it is not part of the package's API yet.


def library_path() -> str:
    """The path of the libspecla this process loads (``SPECLA_LIBRARY`` or the packaged copy)."""
    env = os.environ.get(LIBRARY_ENV)
    if env:
        return env
    packaged = Path(__file__).resolve().parent / _INSTALLED_NAME
    if packaged.exists():
        return str(packaged)
    raise ImportError(
        f"specla: no libspecla found: the package has no {_INSTALLED_NAME} (install it with "
        f"`pip install ./bindings/python` from the repository, which builds it) and "
        f"{LIBRARY_ENV} is not set (point it at a built libspecla.so.{ABI_VERSION})")


def _load() -> ctypes.CDLL:
    path = library_path()
    try:
        lib = ctypes.CDLL(path, mode=os.RTLD_LOCAL)
    except OSError as e:
        raise ImportError(f"specla: cannot load libspecla from {path}: {e}") from e
    for name, restype, argtypes in _FUNCTIONS:
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise ImportError(f"specla: {path} lacks {name}: it is older than the ABI "
                              f"version {ABI_VERSION} this package needs") from None
        fn.restype = restype
        fn.argtypes = argtypes
    major, minor = c_int(), c_int()
    lib.specla_version_numbers(ctypes.byref(major), ctypes.byref(minor), None)
    # Struct layouts change only with SPECLA_ABI_VERSION (the SONAME); a newer minor version adds
    # functions, an older one may lack some declared here.
    if major.value != HEADER_VERSION[0] or minor.value < HEADER_VERSION[1]:
        raise ImportError(
            f"specla: {path} is version {major.value}.{minor.value}, this package needs "
            f"{HEADER_VERSION[0]}.{HEADER_VERSION[1]} or a later {HEADER_VERSION[0]}.x")
    abi = lib.specla_abi_version()
    if abi != ABI_VERSION:
        raise ImportError(f"specla: {path} has ABI version {abi}, this package mirrors the "
                          f"structs of ABI version {ABI_VERSION}")
    return lib


lib = _load()


_PARAMS_INIT = {
    specla_model_params: lib.specla_model_params_init,
    specla_session_params: lib.specla_session_params_init,
    specla_sampling_params: lib.specla_sampling_params_init,
    specla_generate_params: lib.specla_generate_params_init,
    specla_drafter_params: lib.specla_drafter_params_init,
    specla_spec_params: lib.specla_spec_params_init,
    specla_verify_params: lib.specla_verify_params_init,
}


def info_values(struct: Structure) -> dict:
    """An info struct's values by field name, struct_size (the ABI's bookkeeping) left out."""
    return {name: getattr(struct, name) for name, _ in struct._fields_ if name != "struct_size"}


def default_params(cls):  # type: ignore[no-untyped-def]
    """A params struct holding the library's defaults (its ``*_params_init``); nested params
    pointers are NULL, which the library reads as their defaults."""
    params = cls()
    status = _PARAMS_INIT[cls](ctypes.byref(params), ctypes.sizeof(params))
    if status != SPECLA_OK:  # only a bug in this module could get here
        raise RuntimeError(f"{cls.__name__}: {lib.specla_last_error().decode('utf-8', 'replace')}")
    return params
