#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdio>
#include <new>

#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace specla::tok {
namespace {

void append_range(std::string &out, uint32_t lo, uint32_t hi) {
    char buf[40];
    if (lo == hi)
        std::snprintf(buf, sizeof buf, "\\x{%X}", unsigned(lo));
    else
        std::snprintf(buf, sizeof buf, "\\x{%X}-\\x{%X}", unsigned(lo), unsigned(hi));
    out += buf;
}

std::string ranges_to_class_body(const CodePointRange *r, size_t n) {
    std::string out;
    for (size_t i = 0; i < n; ++i) append_range(out, r[i].lo, r[i].hi);
    return out;
}

// Code points of a reference table that the system PCRE2's property does not accept: they are
// added next to the property in rewritten patterns (PCRE2's Unicode data may be older).
std::string missing_from_pcre2(const char *property, const CodePointRange *r, size_t n) {
    std::string all;
    std::vector<uint32_t> cps;
    for (size_t i = 0; i < n; ++i)
        for (uint32_t c = r[i].lo; c <= r[i].hi; ++c) {
            utf8_append(all, c);
            cps.push_back(c);
        }
    std::string pat = std::string("\\P{") + property + "}";
    int err = 0;
    PCRE2_SIZE erroff = 0;
    pcre2_code *code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.c_str()), pat.size(),
                                     PCRE2_UTF | PCRE2_UCP, &err, &erroff, nullptr);
    if (!code) return ranges_to_class_body(r, n);
    pcre2_match_data *md = pcre2_match_data_create(1, nullptr);
    std::vector<uint32_t> missing;
    size_t pos = 0, index = 0, byte = 0;
    // Walk the matches; map byte offsets back to table entries.
    while (pos < all.size()) {
        int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(all.data()), all.size(), pos,
                             PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc < 0) break;
        const size_t s = pcre2_get_ovector_pointer(md)[0];
        while (byte < s) {
            byte += utf8_len(static_cast<unsigned char>(all[byte]));
            ++index;
        }
        missing.push_back(cps[index]);
        pos = s + utf8_len(static_cast<unsigned char>(all[s]));
    }
    pcre2_match_data_free(md);
    pcre2_code_free(code);
    std::string out;
    for (size_t i = 0; i < missing.size();) {
        size_t j = i;
        while (j + 1 < missing.size() && missing[j + 1] == missing[j] + 1) ++j;
        append_range(out, missing[i], missing[j]);
        i = j + 1;
    }
    return out;
}

struct ClassBodies {
    std::string letter, number, digit, space, word;
};

const ClassBodies &class_bodies() {
    static const ClassBodies bodies = [] {
        ClassBodies b;
        b.letter = "\\p{L}" + missing_from_pcre2("L", tables::kLetter, tables::kLetter_count);
        b.number = "\\p{N}" + missing_from_pcre2("N", tables::kNumber, tables::kNumber_count);
        b.digit = "\\p{Nd}" + missing_from_pcre2("Nd", tables::kDecimalNumber,
                                                 tables::kDecimalNumber_count);
        b.space = ranges_to_class_body(tables::kWhiteSpace, tables::kWhiteSpace_count);
        b.word = ranges_to_class_body(tables::kOnigWord, tables::kOnigWord_count);
        return b;
    }();
    return bodies;
}

// Maps the name of a \p{...} property to one of the rewritten classes, or nullptr.
const std::string *property_body(const std::string &name) {
    const ClassBodies &b = class_bodies();
    if (name == "L" || name == "Letter") return &b.letter;
    if (name == "N" || name == "Number") return &b.number;
    if (name == "Nd" || name == "Decimal_Number") return &b.digit;
    return nullptr;
}

struct MatchData {
    pcre2_match_data *md = pcre2_match_data_create(1, nullptr);
    ~MatchData() { pcre2_match_data_free(md); }
};

pcre2_match_data *thread_match_data() {
    thread_local MatchData data;
    if (!data.md) throw std::bad_alloc();
    return data.md;
}

// The JIT's backtracking stack, one per thread (a JIT stack serves one match at a time, and one
// tokenizer is used from several threads at once). Without one the JIT has 32 KiB of the machine
// stack, which a group repeated over a few thousand characters exhausts. Its memory is reserved
// up to the limit and committed as the match goes deeper.
struct JitStack {
    pcre2_jit_stack *stack =
        pcre2_jit_stack_create(32 * 1024, SPECLA_LIMIT_TOKENIZER_REGEX_STACK_BYTES, nullptr);
    ~JitStack() {
        if (stack) pcre2_jit_stack_free(stack);
    }
};

pcre2_jit_stack *thread_jit_stack() {
    thread_local JitStack s;
    if (!s.stack) throw std::bad_alloc();
    return s.stack;
}

// pcre2_match calls this at the start of every JIT match, on the matching thread (search made
// the stack already; nothing may be thrown through PCRE2, and null means its 32 KiB default).
pcre2_jit_stack *jit_stack_of_this_thread(void *) noexcept {
    try {
        return thread_jit_stack();
    } catch (...) {
        return nullptr;
    }
}

// Bounds on one match: backtracking steps (the JIT counts them over the whole call, the
// interpreter per start position), and the interpreter's backtracking depth and memory. Without
// them a pattern with nested repeats takes exponential time on a short text.
constexpr uint32_t kHeapLimitKib = 64 * 1024;

pcre2_match_context *new_match_context() {
    pcre2_match_context *c = pcre2_match_context_create(nullptr);
    if (!c) throw std::bad_alloc();
    pcre2_set_match_limit(c, SPECLA_LIMIT_TOKENIZER_REGEX_STEPS);
    pcre2_set_depth_limit(c, SPECLA_LIMIT_TOKENIZER_REGEX_STEPS);
    pcre2_set_heap_limit(c, kHeapLimitKib);
    pcre2_jit_stack_assign(c, &jit_stack_of_this_thread, nullptr);
    return c;
}

// For JIT matches: shared by all threads; never changed once made (pcre2_match only reads it).
// The JIT's steps are groups entered and start positions tried, not the characters a repeat
// scans: a pattern that scans the rest of the text at each position (a lookahead over a
// repeated group) stays within the limit and is quadratic in the text's length (10k characters:
// 0.1 to 0.5 s), as it is in the reference's engine.
pcre2_match_context *jit_match_context() {
    static pcre2_match_context *const context = new_match_context();
    return context;
}

// Where the JIT is unavailable (a PCRE2 built without it, a system that forbids executable
// memory) the interpreter matches, and its step limit counts per start position: one search may
// try every position of the text, so the limit per position is the text's share of the budget.
// Over one find_all the searches try each position at most twice (once more after an empty
// match), so the interpreter's work on a text is at most 2 x SPECLA_LIMIT_TOKENIZER_REGEX_STEPS
// steps, or 2 x kInterpreterStepsPerPosition per position where that is more: linear in the text.
// The floor is what ordinary patterns need at one position: about one step per character of a
// run they scan (the Llama 3 pattern at a run of spaces), so runs up to this long always pass.
constexpr uint32_t kInterpreterStepsPerPosition = 10000;

uint32_t interpreter_steps_per_position(size_t text_bytes) {
    const size_t share = SPECLA_LIMIT_TOKENIZER_REGEX_STEPS / (text_bytes + 1);
    return uint32_t(std::max<size_t>(share, kInterpreterStepsPerPosition));
}

// Per thread, since its limit is set for each text.
pcre2_match_context *interpreter_match_context(size_t text_bytes) {
    struct Context {
        pcre2_match_context *c = new_match_context();
        ~Context() { pcre2_match_context_free(c); }
    };
    thread_local Context context;
    pcre2_set_match_limit(context.c, interpreter_steps_per_position(text_bytes));
    return context.c;
}

}  // namespace

std::string translate_pattern(const std::string &p) {
    std::string out;
    out.reserve(p.size() + 64);
    bool in_class = false;
    size_t class_start = 0;  // index in p just after '[' or '[^'
    for (size_t i = 0; i < p.size(); ++i) {
        const char c = p[i];
        if (c == '\\' && i + 1 < p.size()) {
            const char e = p[i + 1];
            const ClassBodies *b = nullptr;
            const std::string *body = nullptr;
            bool negated = false;
            if (e == 's' || e == 'S') {
                b = &class_bodies();
                body = &b->space;
                negated = e == 'S';
            } else if (e == 'd' || e == 'D') {
                b = &class_bodies();
                body = &b->digit;
                negated = e == 'D';
            } else if (e == 'w' || e == 'W') {
                b = &class_bodies();
                body = &b->word;
                negated = e == 'W';
            } else if (e == 'p' || e == 'P') {
                std::string name;
                size_t end = i + 2;
                if (end < p.size() && p[end] == '{') {
                    const size_t close = p.find('}', end);
                    if (close != std::string::npos) {
                        name = p.substr(end + 1, close - end - 1);
                        end = close + 1;
                    }
                } else if (end < p.size()) {
                    name = p.substr(end, 1);
                    end += 1;
                }
                bool neg = e == 'P';
                if (!name.empty() && name[0] == '^') {
                    neg = !neg;
                    name.erase(0, 1);
                }
                body = property_body(name);
                if (body) {
                    negated = neg;
                    if (!in_class) {
                        out += negated ? "[^" : "[";
                        out += *body;
                        out += "]";
                        i = end - 1;
                        continue;
                    }
                    if (!negated) {
                        out += *body;
                        i = end - 1;
                        continue;
                    }
                    body = nullptr;  // a negated property inside a class stays as written
                }
            }
            if (body) {
                if (!in_class) {
                    out += negated ? "[^" : "[";
                    out += *body;
                    out += "]";
                    ++i;
                    continue;
                }
                if (!negated) {
                    out += *body;
                    ++i;
                    continue;
                }
            }
            if (e == 'Q') {  // \Q...\E quotes literally
                const size_t end = p.find("\\E", i + 2);
                const size_t stop = end == std::string::npos ? p.size() : end + 2;
                out.append(p, i, stop - i);
                i = stop - 1;
                continue;
            }
            out += c;
            out += e;
            ++i;
            continue;
        }
        if (in_class) {
            if (c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // [:alpha:]
                const size_t close = p.find(":]", i + 2);
                if (close != std::string::npos) {
                    out.append(p, i, close + 2 - i);
                    i = close + 1;
                    continue;
                }
            }
            if (c == ']' && i != class_start) in_class = false;
            out += c;
            continue;
        }
        if (c == '[') {
            in_class = true;
            out += c;
            class_start = i + 1;
            if (i + 1 < p.size() && p[i + 1] == '^') {
                out += '^';
                ++i;
                class_start = i + 1;
            }
            continue;
        }
        out += c;
    }
    return out;
}

Regex Regex::pattern(const std::string &pattern, const std::string &where, RegexEngine engine) {
    Regex r;
    r.source_ = pattern;
    r.where_ = where;
    const std::string translated = translate_pattern(pattern);
    int err = 0;
    PCRE2_SIZE erroff = 0;
    // \C matches one byte even inside a character: its matches could end mid-character, and
    // every later stage reads whole characters, so it is refused.
    pcre2_code *code = pcre2_compile(
        reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
        PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_NEVER_BACKSLASH_C, &err, &erroff, nullptr);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        fail(SPECLA_ERR_UNSUPPORTED, "tokenizer.json: ", where, " regex \"", pattern,
             "\" is not supported: ", reinterpret_cast<const char *>(msg));
    }
    r.code_ = code;
    // Where the JIT is unavailable the interpreter matches, with a budget per text (above).
    r.jit_ = engine == RegexEngine::jit_where_available &&
             pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    return r;
}

Regex Regex::literal(const std::string &text) {
    Regex r;
    r.source_ = text;
    r.is_literal_ = true;
    return r;
}

Regex::Regex(Regex &&o) noexcept
    : source_(std::move(o.source_)),
      where_(std::move(o.where_)),
      is_literal_(o.is_literal_),
      jit_(o.jit_),
      code_(o.code_) {
    o.code_ = nullptr;
}

Regex &Regex::operator=(Regex &&o) noexcept {
    if (this != &o) {
        if (code_) pcre2_code_free(static_cast<pcre2_code *>(code_));
        source_ = std::move(o.source_);
        where_ = std::move(o.where_);
        is_literal_ = o.is_literal_;
        jit_ = o.jit_;
        code_ = o.code_;
        o.code_ = nullptr;
    }
    return *this;
}

Regex::~Regex() {
    if (code_) pcre2_code_free(static_cast<pcre2_code *>(code_));
}

bool Regex::search(std::string_view s, size_t from, Span *m) const {
    if (is_literal_) {
        const size_t at = s.find(source_, from);
        if (at == std::string_view::npos) return false;
        *m = {at, at + source_.size()};
        return true;
    }
    auto *code = static_cast<pcre2_code *>(code_);
    pcre2_match_data *md = thread_match_data();
    if (jit_) thread_jit_stack();  // made here, so that a refused stack is out of memory
    pcre2_match_context *context =
        jit_ ? jit_match_context() : interpreter_match_context(s.size());
    // No fallback from the JIT to the interpreter: the interpreter's limit counts per start
    // position, and one search on a long text would take that many times longer.
    const uint32_t options = PCRE2_NO_UTF_CHECK | (jit_ ? 0u : uint32_t(PCRE2_NO_JIT));
    const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), from,
                               options, md, context);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
        rc == PCRE2_ERROR_HEAPLIMIT) {
        if (jit_)
            fail(SPECLA_ERR_FORMAT, "tokenizer.json: ", where_, " regex \"", source_,
                 "\" exceeded the match limit on this text (SPECLA_LIMIT_TOKENIZER_REGEX_STEPS = ",
                 SPECLA_LIMIT_TOKENIZER_REGEX_STEPS, " backtracking steps): the pattern backtracks "
                 "without bound");
        fail(SPECLA_ERR_FORMAT, "tokenizer.json: ", where_, " regex \"", source_,
             "\" exceeded the match limit on this text of ", s.size(),
             " bytes (SPECLA_LIMIT_TOKENIZER_REGEX_STEPS = ", SPECLA_LIMIT_TOKENIZER_REGEX_STEPS,
             " backtracking steps per text, at least ", kInterpreterStepsPerPosition,
             " per start position, ", kHeapLimitKib / 1024, " MiB; PCRE2's JIT is unavailable here): "
             "the pattern backtracks without bound");
    }
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        fail(SPECLA_ERR_FORMAT, "tokenizer.json: ", where_, " regex \"", source_,
             "\" exceeded the match limit on this text (SPECLA_LIMIT_TOKENIZER_REGEX_STACK_BYTES = ",
             SPECLA_LIMIT_TOKENIZER_REGEX_STACK_BYTES, " bytes of backtracking stack): the "
             "pattern backtracks without bound");
    if (rc == PCRE2_ERROR_NOMEMORY)
        fail(SPECLA_ERR_OUT_OF_MEMORY, "tokenizer.json: ", where_, " regex \"", source_,
             "\": out of memory");
    if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        fail(SPECLA_ERR_INTERNAL, "tokenizer regex \"", source_, "\" failed: ",
             reinterpret_cast<const char *>(msg));
    }
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    *m = {ov[0], ov[1]};
    return true;
}

void Regex::find_all(std::string_view s, std::vector<Span> &out) const {
    // PCRE2 is told the text is valid UTF-8 (checking it on every call from `from` would make a
    // search quadratic), so it is checked once here: on anything else PCRE2 could read past it.
    // (Literal search reads bytes and is safe on any text.)
    const size_t bad = is_literal_ ? s.size() : utf8_first_invalid(s);
    if (bad != s.size())
        fail(SPECLA_ERR_INTERNAL, "tokenizer regex \"", source_,
             "\" was given text that is not valid UTF-8 (at byte ", bad, ")");
    size_t last_end = 0;
    bool have_last = false;
    size_t last_match_end = 0;
    Span m;
    while (last_end <= s.size() && search(s, last_end, &m)) {
        if (m.first == m.second && have_last && last_match_end == m.second) {
            // An empty match where the previous one ended: step over one character.
            last_end += last_end < s.size() ? utf8_char_len(s, last_end) : 1;
            continue;
        }
        out.push_back(m);
        last_end = m.second;
        last_match_end = m.second;
        have_last = true;
    }
}

}  // namespace specla::tok
