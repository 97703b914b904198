"""The ctypes declarations against the library: every struct read back through the defaults the
library fills in and through values it reports, so a field out of place shows up as a wrong
value (the header's documented defaults)."""
from __future__ import annotations

import ctypes

import specla
from specla import _capi

from conftest import PYCODE


def test_version_matches_header() -> None:
    major, minor, patch = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    _capi.lib.specla_version_numbers(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch))
    assert (major.value, minor.value) >= _capi.HEADER_VERSION[:2]
    assert specla.library_version() == f"{major.value}.{minor.value}.{patch.value}"
    assert _capi.library_path().endswith(f".so.{_capi.ABI_VERSION}") or "libspecla" in _capi.library_path()


def test_default_params_read_through_the_structs() -> None:
    mp = _capi.default_params(_capi.specla_model_params)
    assert mp.struct_size == ctypes.sizeof(_capi.specla_model_params)
    assert (mp.backend, mp.device, mp.n_threads, mp.arena_block_bytes) == (0, 0, 0, 0)
    assert not mp.progress_callback and mp.progress_user_data is None
    assert mp.load_tokenizer is True

    sp = _capi.default_params(_capi.specla_session_params)
    assert (sp.max_tree_nodes, sp.max_batch_tokens) == (64, 512)

    sa = _capi.default_params(_capi.specla_sampling_params)
    assert (sa.temperature, sa.top_k, sa.top_p, sa.seed) == (0.0, 0, 1.0, 0)
    assert (sa.repetition_penalty, sa.penalty_last_n, sa.min_p, sa.n_logit_bias) == \
        (1.0, 64, 0.0, 0)

    gp = _capi.default_params(_capi.specla_generate_params)
    assert gp.max_tokens == 128 and gp.stop_at_eos is True
    assert not gp.sampling and gp.n_stop_strings == 0  # NULL: the sampling defaults
    assert not gp.on_token and gp.user_data is None and not gp.stop_strings
    assert (gp.include_special_tokens, gp.include_stop_string) == (False, False)

    dp = _capi.default_params(_capi.specla_drafter_params)
    assert (dp.type, dp.min_ngram, dp.max_ngram, dp.max_draft_len, dp.max_branches) == \
        (_capi.SPECLA_DRAFTER_PROMPT_LOOKUP, 2, 4, 8, 2)
    assert dp.path is None

    spec = _capi.default_params(_capi.specla_spec_params)
    assert not spec.generate  # NULL: the generation defaults
    assert (spec.max_draft_nodes, spec.max_draft_depth) == (4, 8)
    assert spec.tree_algorithm == _capi.SPECLA_TREE_AUTO
    assert spec.deferred_commit is True
    assert (spec.tree_top_k, spec.tree_prune_margin, spec.tree_size_from_cost) == (4, 8.0, True)
    assert spec.speculation_min_gain == 1.0
    assert spec.tree_shape == _capi.SPECLA_TREE_SHAPE_AUTO

    vp = _capi.default_params(_capi.specla_verify_params)
    assert not vp.sampling and vp.deferred_commit is True
    assert vp.tree_algorithm == _capi.SPECLA_TREE_AUTO


def test_every_struct_starts_with_its_size() -> None:
    for name in dir(_capi):
        cls = getattr(_capi, name)
        if (isinstance(cls, type) and issubclass(cls, ctypes.Structure)
                and name.startswith("specla_")
                and name != "specla_logit_bias"):  # an array element: fixed for good
            assert cls._fields_[0] == ("struct_size", ctypes.c_size_t), name
            assert cls().struct_size == ctypes.sizeof(cls), name


def test_a_struct_size_of_zero_is_refused(model: specla.Model) -> None:
    info = _capi.specla_model_info()
    info.struct_size = 0
    assert _capi.lib.specla_model_get_info(model._handle.ptr(), ctypes.byref(info)) == \
        _capi.SPECLA_ERR_INVALID_ARGUMENT
    assert b"specla_model_info" in _capi.lib.specla_last_error()
    assert info.vocab_size == 0  # nothing written


def test_abi_version_of_the_loaded_library() -> None:
    assert _capi.lib.specla_abi_version() == _capi.ABI_VERSION == 3


def test_info_structs_match_the_checkpoint(model: specla.Model) -> None:
    info = model.info  # values of tests/api/test_pycode.cpp
    assert (info.vocab_size, info.hidden_size, info.num_layers) == (8192, 384, 8)
    assert (info.num_heads, info.num_v_heads, info.head_k_dim, info.head_v_dim) == (2, 2, 128, 256)
    assert (info.conv_size, info.intermediate_size) == (4, 1024)
    assert (info.bos_token_id, info.eos_token_id) == (0, 0)
    assert info.num_parameters == 22073760
    per_layer = 2 * 128 * 256 + 3 * (2 * 2 * 128 + 2 * 256)
    assert info.state_bytes == 8 * per_layer * 4
    assert info.backend == "cpu" and info.has_tokenizer is True

    ms = model.memory_stats()
    assert 2 * 22000000 <= ms.weight_bytes < 4 * 22073760
    assert (ms.arena_reserved_bytes, ms.arena_used_bytes, ms.arena_blocks) == (0, 0, 0)

    tok = model.tokenizer.info
    assert tok.vocab_size == 8192 and tok.eos_token_id == 0


def test_spec_stats_struct_is_consistent(session: specla.Session, model: specla.Model) -> None:
    with specla.Drafter.prompt_lookup(model) as d:
        r = specla.generate(session, "x = [1, 2, 3]\ny = [1, 2, 3]\nz = [1, 2,", max_tokens=24,
                            drafter=d, stop_at_eos=False)
    st = r.spec_stats
    assert st is not None
    assert st.generated == len(r.tokens) == 24
    assert st.steps > 0 and st.mean_accepted_length == (st.generated - st.plain_steps) / st.steps
    assert st.accepted <= st.drafted
    assert st.acceptance_rate == (st.accepted / st.drafted if st.drafted else 0.0)
    assert sum(st.drafted_at_depth) == st.drafted
    assert st.generated <= st.accepted + st.steps


def test_loaded_library_exports_only_c_symbols() -> None:
    # What makes the package safe next to torch: nothing but specla_* leaves libspecla.
    import subprocess
    out = subprocess.run(["nm", "-D", "--defined-only", _capi.library_path()],
                         capture_output=True, text=True)
    if out.returncode != 0:
        import pytest
        pytest.skip("nm not available")
    names = [line.split()[-1] for line in out.stdout.splitlines() if line.strip()]
    exported = [n for n in names if not n.startswith("SPECLA")]  # version nodes
    assert exported and all(n.startswith("specla_") for n in exported), exported[:5]
