// Small RAII wrappers over the public C API for tests (the API itself stays C).
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "specla/specla.h"
#include "support/params.h"

namespace test {

struct ModelHandle {
    specla_model *m = nullptr;
    explicit ModelHandle(const std::string &folder, specla_model_params p = specla_model_default_params()) {
        const specla_status st = specla_model_load(folder.c_str(), &p, &m);
        INFO("load ", folder, ": ", std::string(specla_last_error()));
        REQUIRE(st == SPECLA_OK);
    }
    ~ModelHandle() { specla_model_free(m); }
    ModelHandle(const ModelHandle &) = delete;
    ModelHandle &operator=(const ModelHandle &) = delete;
    specla_model_info info() const { return info_of(m); }
    static specla_model_info info_of(const specla_model *model) {
        specla_model_info i = info_struct<specla_model_info>();
        REQUIRE(specla_model_get_info(model, &i) == SPECLA_OK);
        return i;
    }
};

struct SessionHandle {
    specla_session *s = nullptr;
    explicit SessionHandle(specla_model *m, specla_session_params p = specla_session_default_params()) {
        const specla_status st = specla_session_create(m, &p, &s);
        INFO(std::string(specla_last_error()));
        REQUIRE(st == SPECLA_OK);
    }
    ~SessionHandle() { specla_session_free(s); }
    SessionHandle(const SessionHandle &) = delete;
    SessionHandle &operator=(const SessionHandle &) = delete;

    std::vector<float> eval(const std::vector<int32_t> &tokens, specla_logits_mode mode, int32_t vocab) {
        const size_t rows = mode == SPECLA_LOGITS_ALL ? tokens.size() : mode == SPECLA_LOGITS_LAST ? 1 : 0;
        std::vector<float> logits(rows * size_t(vocab));
        const specla_status st =
            specla_session_eval(s, tokens.data(), tokens.size(), mode, logits.empty() ? nullptr : logits.data(),
                                logits.size());
        INFO(std::string(specla_last_error()));
        REQUIRE(st == SPECLA_OK);
        return logits;
    }
    std::vector<float> state(int32_t layer, size_t floats) {
        std::vector<float> out(floats);
        REQUIRE(specla_session_get_state(s, layer, out.data(), out.size()) == SPECLA_OK);
        return out;
    }
    std::vector<int32_t> generate(const std::vector<int32_t> &prompt, GenerateParams p = GenerateParams()) {
        std::vector<int32_t> out(size_t(p.max_tokens));
        size_t n = 0;
        const specla_status st = specla_generate(s, prompt.data(), prompt.size(), p.get(), out.data(), out.size(), &n);
        INFO(std::string(specla_last_error()));
        REQUIRE(st == SPECLA_OK);
        out.resize(n);
        return out;
    }
};

struct DrafterHandle {
    specla_drafter *d = nullptr;
    explicit DrafterHandle(specla_model *m, specla_drafter_params p = specla_drafter_default_params()) {
        REQUIRE(specla_drafter_create(m, &p, &d) == SPECLA_OK);
    }
    ~DrafterHandle() { specla_drafter_free(d); }
    DrafterHandle(const DrafterHandle &) = delete;
    DrafterHandle &operator=(const DrafterHandle &) = delete;
};

// Text to ids with the model's tokenizer (no BOS, special tokens parsed).
inline std::vector<int32_t> tokenize(specla_model *m, const std::string &text) {
    const specla_tokenizer *tok = nullptr;
    REQUIRE(specla_model_tokenizer(m, &tok) == SPECLA_OK);
    size_t n = 0;
    specla_tokenize(tok, text.data(), text.size(), false, true, nullptr, 0, &n);
    std::vector<int32_t> ids(n);
    REQUIRE(specla_tokenize(tok, text.data(), text.size(), false, true, ids.data(), ids.size(), &n) == SPECLA_OK);
    return ids;
}

// Ids to text with the model's tokenizer; special tokens left out, as generated text leaves them
// out by default (specla_generate_params.include_special_tokens).
inline std::string detokenize(specla_model *m, const std::vector<int32_t> &ids, bool skip_special = true) {
    const specla_tokenizer *tok = nullptr;
    REQUIRE(specla_model_tokenizer(m, &tok) == SPECLA_OK);
    size_t n = 0;
    specla_detokenize(tok, ids.data(), ids.size(), skip_special, nullptr, 0, &n);
    std::string out(n + 1, '\0');
    REQUIRE(specla_detokenize(tok, ids.data(), ids.size(), skip_special, out.data(), out.size(), &n) == SPECLA_OK);
    out.resize(n);
    return out;
}

}  // namespace test
