// Reading tokenizer.json and the checkpoint's side files into a specla::Tokenizer.
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"
#include "util/file_read.h"

namespace specla {

using nlohmann::json;

namespace {

json parse_json(std::string_view text, const std::string &what) {
    // The parser itself does not recurse, but nothing in these files nests deeply, and a bound
    // here keeps every later walk over the values shallow.
    const json::parser_callback_t bound_depth = [&what](int depth, json::parse_event_t event,
                                                        json &) {
        if ((event == json::parse_event_t::object_start ||
             event == json::parse_event_t::array_start) &&
            depth >= SPECLA_LIMIT_TOKENIZER_JSON_DEPTH)
            fail(SPECLA_ERR_FORMAT, what, ": arrays and objects nest deeper than SPECLA_LIMIT_TOKENIZER_JSON_DEPTH (",
                 SPECLA_LIMIT_TOKENIZER_JSON_DEPTH, ")");
        return true;
    };
    try {
        return json::parse(text.begin(), text.end(), bound_depth);
    } catch (const json::exception &e) {
        fail(SPECLA_ERR_FORMAT, what, " is not valid JSON: ", e.what());
    }
}

// Field access with messages that name the place in the file.
const json *find(const json &j, const char *key) {
    if (!j.is_object()) return nullptr;
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string get_string(const json &j, const char *key, const std::string &where,
                       const char *fallback = nullptr) {
    const json *v = find(j, key);
    if (!v) {
        if (fallback) return fallback;
        fail(SPECLA_ERR_FORMAT, "tokenizer.json: ", where, " has no \"", key, "\"");
    }
    if (!v->is_string())
        fail(SPECLA_ERR_FORMAT, "tokenizer.json: ", where, ".", key, " must be a string");
    return v->get<std::string>();
}

bool get_bool(const json &j, const char *key, bool fallback, const std::string &where) {
    const json *v = find(j, key);
    if (!v) return fallback;
    if (!v->is_boolean())
        fail(SPECLA_ERR_FORMAT, "tokenizer.json: ", where, ".", key, " must be true or false");
    return v->get<bool>();
}

size_t get_size(const json &j, const char *key, size_t fallback, const std::string &where) {
    const json *v = find(j, key);
    if (!v) return fallback;
    if (!v->is_number_unsigned() && !(v->is_number_integer() && v->get<int64_t>() >= 0))
        fail(SPECLA_ERR_FORMAT, "tokenizer.json: ", where, ".", key,
             " must be a non-negative integer");
    return v->get<size_t>();
}

const json &get_array(const json &j, const char *key, const std::string &where) {
    const json *v = find(j, key);
    if (!v || !v->is_array())
        fail(SPECLA_ERR_FORMAT, "tokenizer.json: ", where, ".", key, " must be an array");
    return *v;
}

std::string type_of(const json &j, const std::string &where) {
    if (!j.is_object()) fail(SPECLA_ERR_FORMAT, "tokenizer.json: ", where, " must be an object");
    return get_string(j, "type", where);
}

// {"String": "..."} or {"Regex": "..."}.
tok::Regex get_pattern(const json &j, const std::string &where) {
    const json *p = find(j, "pattern");
    if (!p || !p->is_object())
        fail(SPECLA_ERR_FORMAT, "tokenizer.json: ", where, ".pattern must be an object");
    if (const json *s = find(*p, "String")) {
        if (!s->is_string())
            fail(SPECLA_ERR_FORMAT, "tokenizer.json: ", where, ".pattern.String must be a string");
        return tok::Regex::literal(s->get<std::string>());
    }
    if (const json *r = find(*p, "Regex")) {
        if (!r->is_string())
            fail(SPECLA_ERR_FORMAT, "tokenizer.json: ", where, ".pattern.Regex must be a string");
        return tok::Regex::pattern(r->get<std::string>(), where + ".pattern");
    }
    fail(SPECLA_ERR_FORMAT, "tokenizer.json: ", where, ".pattern needs \"String\" or \"Regex\"");
}

tok::PrependScheme get_prepend_scheme(const json &j, const std::string &where) {
    if (const json *s = find(j, "prepend_scheme")) {
        const std::string v = s->is_string() ? s->get<std::string>() : "";
        if (v == "first") return tok::PrependScheme::First;
        if (v == "always") return tok::PrependScheme::Always;
        if (v == "never") return tok::PrependScheme::Never;
        fail(SPECLA_ERR_FORMAT, "tokenizer.json: ", where, ".prepend_scheme \"", v,
             "\" is not first, always or never");
    }
    // Older files: add_prefix_space.
    return get_bool(j, "add_prefix_space", true, where) ? tok::PrependScheme::Always
                                                         : tok::PrependScheme::Never;
}

std::string get_one_char(const json &j, const char *key, const std::string &where,
                         const char *fallback) {
    std::string s = get_string(j, key, where, fallback);
    if (s.empty() || tok::utf8_len(static_cast<unsigned char>(s[0])) != s.size())
        fail(SPECLA_ERR_FORMAT, "tokenizer.json: ", where, ".", key, " must be one character");
    return s;
}

[[noreturn]] void unsupported(const char *what, const std::string &type) {
    fail(SPECLA_ERR_UNSUPPORTED, "tokenizer.json: ", what, " type \"", type,
         "\" is not supported");
}

// Sequences hold Sequences; the parts are built by recursion, so their depth is bounded (a file
// of a few dozen kilobytes could otherwise exhaust a thread's stack).
void check_nesting(int depth, const std::string &where) {
    if (depth >= SPECLA_LIMIT_TOKENIZER_NESTING)
        fail(SPECLA_ERR_FORMAT, "tokenizer.json: ", where,
             ": Sequences nest deeper than SPECLA_LIMIT_TOKENIZER_NESTING (",
             SPECLA_LIMIT_TOKENIZER_NESTING, ")");
}

// A token id of tokenizer.json: an integer in [0, SPECLA_LIMIT_TOKENIZER_VOCAB).
int32_t get_token_id(const json &v, const std::string &what) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() >= SPECLA_LIMIT_TOKENIZER_VOCAB)
        fail(SPECLA_ERR_FORMAT, "tokenizer.json: ", what,
             " must be a token id, an integer in [0, SPECLA_LIMIT_TOKENIZER_VOCAB = ",
             SPECLA_LIMIT_TOKENIZER_VOCAB, ")");
    return int32_t(v.get<int64_t>());
}

// An id read from a side file or post-processor, where anything else means "none" (-1).
int32_t id_or_none(const json &v) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() >= SPECLA_LIMIT_TOKENIZER_VOCAB)
        return -1;
    return int32_t(v.get<int64_t>());
}

std::unique_ptr<tok::Normalizer> make_normalizer(const json &j, const std::string &where,
                                                 int depth = 0) {
    const std::string type = type_of(j, where);
    if (type == "Sequence") {
        check_nesting(depth, where);
        const json &list = get_array(j, "normalizers", where);
        std::vector<std::unique_ptr<tok::Normalizer>> steps;
        for (size_t i = 0; i < list.size(); ++i)
            steps.push_back(make_normalizer(
                list[i], where + ".normalizers[" + std::to_string(i) + "]", depth + 1));
        return std::make_unique<tok::SequenceNormalizer>(std::move(steps));
    }
    if (type == "Prepend")
        return std::make_unique<tok::AffixNormalizer>(get_string(j, "prepend", where), true);
    if (type == "Append")
        return std::make_unique<tok::AffixNormalizer>(get_string(j, "append", where), false);
    if (type == "Replace") {
        return std::make_unique<tok::ReplaceNormalizer>(get_pattern(j, where),
                                                        get_string(j, "content", where));
    }
    if (type == "Strip")
        return std::make_unique<tok::StripNormalizer>(get_bool(j, "strip_left", true, where),
                                                      get_bool(j, "strip_right", true, where));
    if (type == "ByteLevel") return std::make_unique<tok::ByteLevelNormalizer>();
    unsupported("normalizer", type);
}

tok::SplitBehavior get_behavior(const json &j, const std::string &where) {
    const std::string b = get_string(j, "behavior", where);
    if (b == "Removed") return tok::SplitBehavior::Removed;
    if (b == "Isolated") return tok::SplitBehavior::Isolated;
    if (b == "MergedWithPrevious") return tok::SplitBehavior::MergedWithPrevious;
    if (b == "MergedWithNext") return tok::SplitBehavior::MergedWithNext;
    if (b == "Contiguous") return tok::SplitBehavior::Contiguous;
    fail(SPECLA_ERR_FORMAT, "tokenizer.json: ", where, ".behavior \"", b, "\" is unknown");
}

std::unique_ptr<tok::PreTokenizer> make_pre_tokenizer(const json &j, const std::string &where,
                                                      int depth = 0) {
    const std::string type = type_of(j, where);
    if (type == "Sequence") {
        check_nesting(depth, where);
        const json &list = get_array(j, "pretokenizers", where);
        std::vector<std::unique_ptr<tok::PreTokenizer>> steps;
        for (size_t i = 0; i < list.size(); ++i)
            steps.push_back(make_pre_tokenizer(
                list[i], where + ".pretokenizers[" + std::to_string(i) + "]", depth + 1));
        return std::make_unique<tok::SequencePreTokenizer>(std::move(steps));
    }
    if (type == "ByteLevel")
        return std::make_unique<tok::ByteLevelPreTokenizer>(
            get_bool(j, "add_prefix_space", true, where), get_bool(j, "use_regex", true, where));
    if (type == "Split") {
        return std::make_unique<tok::SplitPreTokenizer>(
            get_pattern(j, where), get_behavior(j, where), get_bool(j, "invert", false, where));
    }
    if (type == "Metaspace")
        return std::make_unique<tok::MetaspacePreTokenizer>(
            get_one_char(j, "replacement", where, "\xE2\x96\x81"), get_prepend_scheme(j, where),
            get_bool(j, "split", true, where));
    if (type == "Digits")
        return std::make_unique<tok::DigitsPreTokenizer>(
            get_bool(j, "individual_digits", false, where));
    if (type == "Whitespace") return std::make_unique<tok::WhitespacePreTokenizer>(true);
    if (type == "WhitespaceSplit") return std::make_unique<tok::WhitespacePreTokenizer>(false);
    if (type == "CharDelimiterSplit")
        return std::make_unique<tok::SplitPreTokenizer>(
            tok::Regex::literal(get_one_char(j, "delimiter", where, nullptr)),
            tok::SplitBehavior::Removed, false);
    unsupported("pre-tokenizer", type);
}

void add_decoder(const json &j, const std::string &where, std::vector<tok::DecoderStep> &steps,
                 int depth = 0) {
    const std::string type = type_of(j, where);
    tok::DecoderStep s;
    if (type == "Sequence") {
        check_nesting(depth, where);
        const json &list = get_array(j, "decoders", where);
        for (size_t i = 0; i < list.size(); ++i)
            add_decoder(list[i], where + ".decoders[" + std::to_string(i) + "]", steps, depth + 1);
        return;
    }
    if (type == "ByteLevel") {
        s.kind = tok::DecoderKind::ByteLevel;
    } else if (type == "ByteFallback") {
        s.kind = tok::DecoderKind::ByteFallback;
    } else if (type == "Fuse") {
        s.kind = tok::DecoderKind::Fuse;
    } else if (type == "Replace") {
        s.kind = tok::DecoderKind::Replace;
        s.pattern = std::make_shared<const tok::Regex>(get_pattern(j, where));
        s.content = get_string(j, "content", where);
    } else if (type == "Strip") {
        s.kind = tok::DecoderKind::Strip;
        s.content = get_one_char(j, "content", where, " ");
        s.start = get_size(j, "start", 0, where);
        s.stop = get_size(j, "stop", 0, where);
    } else if (type == "Metaspace") {
        s.kind = tok::DecoderKind::Metaspace;
        s.replacement = get_one_char(j, "replacement", where, "\xE2\x96\x81");
        s.scheme = get_prepend_scheme(j, where);
    } else {
        unsupported("decoder", type);
    }
    steps.push_back(std::move(s));
}

tok::BpeConfig make_bpe(const json &m) {
    std::string type;
    if (const json *t = find(m, "type")) {
        if (!t->is_string()) fail(SPECLA_ERR_FORMAT, "tokenizer.json: model.type must be a string");
        type = t->get<std::string>();
    } else if (find(m, "merges")) {
        type = "BPE";
    } else if (find(m, "max_input_chars_per_word")) {
        type = "WordPiece";
    } else if (const json *v = find(m, "vocab"); v && v->is_array()) {
        type = "Unigram";
    } else {
        type = "WordLevel";
    }
    if (type != "BPE")
        fail(SPECLA_ERR_UNSUPPORTED, "tokenizer.json: model type \"", type,
             "\" is not supported (only BPE models are)");
    if (const json *d = find(m, "dropout")) {
        if (!d->is_number()) fail(SPECLA_ERR_FORMAT, "tokenizer.json: model.dropout must be a number");
        if (d->get<double>() > 0.0)
            fail(SPECLA_ERR_UNSUPPORTED,
                 "tokenizer.json: BPE dropout is not supported (it makes tokenization random)");
    }
    tok::BpeConfig c;
    const json *vocab = find(m, "vocab");
    if (!vocab || !vocab->is_object())
        fail(SPECLA_ERR_FORMAT, "tokenizer.json: model.vocab must be an object");
    if (vocab->size() > SPECLA_LIMIT_TOKENIZER_VOCAB)
        fail(SPECLA_ERR_FORMAT, "tokenizer.json: model.vocab has ", vocab->size(),
             " entries, more than SPECLA_LIMIT_TOKENIZER_VOCAB (", SPECLA_LIMIT_TOKENIZER_VOCAB, ")");
    c.vocab.reserve(vocab->size());
    for (auto it = vocab->begin(); it != vocab->end(); ++it)
        c.vocab.emplace_back(it.key(), get_token_id(it.value(), "model.vocab[\"" + it.key() + "\"]"));
    const json &merges = get_array(m, "merges", "model");
    if (merges.size() > SPECLA_LIMIT_TOKENIZER_MERGES)
        fail(SPECLA_ERR_FORMAT, "tokenizer.json: model.merges has ", merges.size(),
             " entries, more than SPECLA_LIMIT_TOKENIZER_MERGES (", SPECLA_LIMIT_TOKENIZER_MERGES, ")");
    c.merges.reserve(merges.size());
    for (const json &e : merges) {
        if (e.is_string()) {
            const std::string s = e.get<std::string>();
            const size_t sp = s.find(' ');
            if (sp == std::string::npos)
                fail(SPECLA_ERR_FORMAT, "tokenizer.json: merge \"", s, "\" is not \"a b\"");
            c.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
        } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
            c.merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
        } else {
            fail(SPECLA_ERR_FORMAT, "tokenizer.json: a merge must be \"a b\" or [\"a\", \"b\"]");
        }
    }
    if (const json *u = find(m, "unk_token")) {
        if (!u->is_string()) fail(SPECLA_ERR_FORMAT, "tokenizer.json: model.unk_token must be a string");
        c.has_unk = true;
        c.unk_token = u->get<std::string>();
    }
    c.continuing_subword_prefix = get_string(m, "continuing_subword_prefix", "model", "");
    c.end_of_word_suffix = get_string(m, "end_of_word_suffix", "model", "");
    c.fuse_unk = get_bool(m, "fuse_unk", false, "model");
    c.byte_fallback = get_bool(m, "byte_fallback", false, "model");
    c.ignore_merges = get_bool(m, "ignore_merges", false, "model");
    return c;
}

// A special token written as "<s>" or {"content": "<s>", ...}; "" when absent.
std::string token_text(const json &j, const char *key) {
    const json *v = find(j, key);
    if (!v) return "";
    if (v->is_string()) return v->get<std::string>();
    if (const json *c = find(*v, "content"); c && c->is_string()) return c->get<std::string>();
    return "";
}

// An id written as 2 or [2, 3] (the first counts); -1 when absent.
int32_t token_id(const json &j, const char *key) {
    const json *v = find(j, key);
    if (v && v->is_array() && !v->empty()) v = &(*v)[0];
    return v ? id_or_none(*v) : -1;
}

// The special token a post-processor puts in front of a single sequence (-1 when none).
int32_t template_bos(const json &p, const std::string &where = "post_processor", int depth = 0) {
    if (!p.is_object()) return -1;
    const std::string type = p.value("type", "");
    if (type == "Sequence") {
        check_nesting(depth, where);
        if (const json *list = find(p, "processors"); list && list->is_array())
            for (size_t i = 0; i < list->size(); ++i)
                if (int32_t id = template_bos(
                        (*list)[i], where + ".processors[" + std::to_string(i) + "]", depth + 1);
                    id >= 0)
                    return id;
        return -1;
    }
    if (type == "RobertaProcessing" || type == "BertProcessing") {
        const json *cls = find(p, "cls");
        if (cls && cls->is_array() && cls->size() == 2) return id_or_none((*cls)[1]);
        return -1;
    }
    if (type != "TemplateProcessing") return -1;
    const json *single = find(p, "single");
    if (!single || !single->is_array() || single->empty()) return -1;
    const json *special = find((*single)[0], "SpecialToken");
    if (!special) return -1;
    const std::string name = special->value("id", "");
    const json *table = find(p, "special_tokens");
    const json *entry = table ? find(*table, name.c_str()) : nullptr;
    const json *ids = entry ? find(*entry, "ids") : nullptr;
    if (ids && ids->is_array() && !ids->empty()) return id_or_none((*ids)[0]);
    return -1;
}

}  // namespace

struct Tokenizer::Loader {
    static void parse(Tokenizer &t, const json &j) {
        if (!j.is_object()) fail(SPECLA_ERR_FORMAT, "tokenizer.json: the top level must be an object");
        const json *model = find(j, "model");
        if (!model || !model->is_object())
            fail(SPECLA_ERR_FORMAT, "tokenizer.json: \"model\" is missing");
        t.model_ = std::make_unique<tok::BpeModel>(make_bpe(*model));
        if (const json *n = find(j, "normalizer")) t.normalizer_ = make_normalizer(*n, "normalizer");
        if (const json *p = find(j, "pre_tokenizer"))
            t.pre_tokenizer_ = make_pre_tokenizer(*p, "pre_tokenizer");
        if (const json *d = find(j, "decoder")) {
            add_decoder(*d, "decoder", t.decoder_);
        } else {
            tok::DecoderStep join;
            join.kind = tok::DecoderKind::JoinWithSpaces;
            t.decoder_.push_back(std::move(join));
        }
        if (const json *added = find(j, "added_tokens")) {
            if (!added->is_array())
                fail(SPECLA_ERR_FORMAT, "tokenizer.json: added_tokens must be an array");
            if (added->size() > SPECLA_LIMIT_TOKENIZER_VOCAB)
                fail(SPECLA_ERR_FORMAT, "tokenizer.json: added_tokens has ", added->size(),
                     " entries, more than SPECLA_LIMIT_TOKENIZER_VOCAB (",
                     SPECLA_LIMIT_TOKENIZER_VOCAB, ")");
            for (size_t i = 0; i < added->size(); ++i) {
                const json &a = (*added)[i];
                const std::string where = "added_tokens[" + std::to_string(i) + "]";
                tok::AddedToken tk;
                tk.content = get_string(a, "content", where);
                const json *id = find(a, "id");
                if (!id) fail(SPECLA_ERR_FORMAT, "tokenizer.json: ", where, " has no \"id\"");
                tk.id = get_token_id(*id, where + ".id");
                tk.special = get_bool(a, "special", false, where);
                tk.single_word = get_bool(a, "single_word", false, where);
                tk.lstrip = get_bool(a, "lstrip", false, where);
                tk.rstrip = get_bool(a, "rstrip", false, where);
                tk.normalized = get_bool(a, "normalized", !tk.special, where);
                t.added_.push_back(std::move(tk));
            }
        }
        t.finalize();
        if (const json *p = find(j, "post_processor")) {
            const int32_t bos = template_bos(*p);
            if (bos >= 0 && bos < t.vocab_size()) {
                t.bos_id_ = bos;
                t.add_bos_default_ = true;
            }
        }
    }

    // BOS/EOS and BOS prepending from the checkpoint's side files, most specific first.
    static void read_side_files(Tokenizer &t, const std::string &folder) {
        auto load = [&](const char *name) -> json {
            const std::string path = folder + "/" + name;
            if (!path_exists(path)) return json();
            return parse_json(read_json_file(path), path);
        };
        const json tc = load("tokenizer_config.json");
        const json sm = load("special_tokens_map.json");
        const json gc = load("generation_config.json");
        const json mc = load("config.json");
        // The tokenizer's own files name the token; the post-processor's template comes next;
        // generation_config.json and config.json (which describe the model) come last.
        auto resolve = [&](const char *token_key, const char *id_key, int32_t from_template) {
            for (const json *src : {&tc, &sm}) {
                const std::string text = token_text(*src, token_key);
                if (text.empty()) continue;
                const int32_t id = t.token_from_string(text);
                if (id >= 0) return id;
            }
            if (from_template >= 0) return from_template;
            for (const json *src : {&gc, &mc}) {
                const int32_t id = token_id(*src, id_key);
                if (id >= 0 && id < t.vocab_size()) return id;
            }
            return int32_t(-1);
        };
        t.bos_id_ = resolve("bos_token", "bos_token_id", t.bos_id_);
        t.eos_id_ = resolve("eos_token", "eos_token_id", t.eos_id_);
        if (const json *a = find(tc, "add_bos_token"); a && a->is_boolean())
            t.add_bos_default_ = a->get<bool>();
        if (t.bos_id_ < 0) t.add_bos_default_ = false;
    }
};

std::unique_ptr<Tokenizer> Tokenizer::from_json(std::string_view text) {
    const json j = parse_json(text, "tokenizer.json");
    std::unique_ptr<Tokenizer> t(new Tokenizer());
    try {
        Loader::parse(*t, j);
    } catch (const json::exception &e) {
        fail(SPECLA_ERR_FORMAT, "tokenizer.json: unexpected content: ", e.what());
    }
    return t;
}

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string &folder) {
    const std::string path = folder + "/tokenizer.json";
    if (!path_exists(path)) fail(SPECLA_ERR_IO, "no tokenizer.json in ", folder);
    std::unique_ptr<Tokenizer> t = from_json(read_json_file(path));
    try {
        Loader::read_side_files(*t, folder);
    } catch (const json::exception &e) {
        fail(SPECLA_ERR_FORMAT, "tokenizer side file of ", folder, ": unexpected content: ",
             e.what());
    }
    return t;
}

}  // namespace specla
