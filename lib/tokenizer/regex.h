// Regular expressions of tokenizer.json (split patterns of pre-tokenizers, Replace patterns),
// run with PCRE2 in UTF + UCP mode. Patterns are written for the reference implementation's
// engine (Oniguruma); the shorthand classes \s \d \w \p{L} \p{N} are rewritten so that they
// accept exactly the code points the reference accepts, whatever Unicode version the system
// PCRE2 was built with.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specla::tok {

using Span = std::pair<size_t, size_t>;  // [first, second) byte offsets

// Which PCRE2 engine matches: the JIT wherever PCRE2 has one for this system (the product), or
// the interpreter (tests: what a system without the JIT runs).
enum class RegexEngine { jit_where_available, interpreter };

class Regex {
public:
    // A pattern in the reference's syntax; `where` names it in messages (e.g.
    // "pre_tokenizer.pattern"). Throws SPECLA_ERR_UNSUPPORTED naming the pattern when PCRE2 cannot
    // compile it, and for \C (one byte of a character), which could cut characters apart.
    static Regex pattern(const std::string &pattern, const std::string &where,
                         RegexEngine engine = RegexEngine::jit_where_available);
    // Matches `text` literally (a String pattern of tokenizer.json).
    static Regex literal(const std::string &text);

    Regex(Regex &&other) noexcept;
    Regex &operator=(Regex &&other) noexcept;
    Regex(const Regex &) = delete;
    Regex &operator=(const Regex &) = delete;
    ~Regex();

    // Every match in `s` (valid UTF-8), left to right and non-overlapping. An empty match right
    // where the previous match ended is skipped, as the reference's iterator does. A search that
    // needs more than SPECLA_LIMIT_TOKENIZER_REGEX_STEPS backtracking steps or
    // SPECLA_LIMIT_TOKENIZER_REGEX_STACK_BYTES of backtracking stack (without the JIT: more than
    // the text's share of the steps, see regex.cpp) throws SPECLA_ERR_FORMAT naming the pattern;
    // text that is not UTF-8 throws SPECLA_ERR_INTERNAL (the tokenizer never produces it).
    void find_all(std::string_view s, std::vector<Span> &out) const;

    // The pattern as written (the literal text for literal patterns).
    const std::string &source() const { return source_; }
    bool is_literal() const { return is_literal_; }

private:
    Regex() = default;
    // First match starting at or after `from`; false when there is none.
    bool search(std::string_view s, size_t from, Span *m) const;

    std::string source_;
    std::string where_;
    bool is_literal_ = false;
    bool jit_ = false;  // code_ is JIT-compiled and is matched by the JIT only
    void *code_ = nullptr;  // pcre2_code_8
};

// The pattern as PCRE2 source (exposed for tests).
std::string translate_pattern(const std::string &pattern);

}  // namespace specla::tok
