// Tokenizer encode throughput through the public API, single thread.
//
//   bench_tokenizer [--tokenizer DIR] [--file PATH] [--mb N] [--repeats N] [--json FILE]
//
// The text is --file, or by default the 80 held-out prompts of models/gdn-pycode-22m
// (eval_prompts.json) joined by newlines; it is repeated up to --mb megabytes (default 8). Two
// modes are timed, each as the median of --repeats runs (default 5) after one warm-up run, in wall
// time and in process CPU time (the better measure on a busy machine):
// "whole" tokenizes the entire text in one call, "documents" tokenizes it one document (one
// prompt, or one 4 KiB stretch of --file) at a time. bench/bench_tokenizer_reference.py runs the
// same text through Hugging Face `tokenizers` for comparison. --json FILE writes the figures
// machine-readably (bench_json.h).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench_json.h"
#include "specla/specla.h"

#ifndef SPECLA_MODELS_DIR
#define SPECLA_MODELS_DIR "models"
#endif

namespace {

std::string read_file(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        std::fprintf(stderr, "cannot open %s\n", path.c_str());
        std::exit(1);
    }
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void append_utf8(std::string &out, unsigned cp) {
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += char(0xE0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    } else {
        out += char(0xF0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3F));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    }
}

// The strings of the "prompts" array of eval_prompts.json (a small reader for JSON strings).
std::vector<std::string> read_prompts(const std::string &path) {
    const std::string j = read_file(path);
    size_t i = j.find("\"prompts\"");
    if (i == std::string::npos || (i = j.find('[', i)) == std::string::npos) {
        std::fprintf(stderr, "%s: no prompts array\n", path.c_str());
        std::exit(1);
    }
    std::vector<std::string> out;
    ++i;
    while (i < j.size() && j[i] != ']') {
        if (j[i] != '"') {
            ++i;
            continue;
        }
        std::string s;
        for (++i; i < j.size() && j[i] != '"'; ++i) {
            if (j[i] != '\\') {
                s += j[i];
                continue;
            }
            const char e = j[++i];
            switch (e) {
                case 'n': s += '\n'; break;
                case 't': s += '\t'; break;
                case 'r': s += '\r'; break;
                case 'b': s += '\b'; break;
                case 'f': s += '\f'; break;
                case 'u': {
                    unsigned cp = unsigned(std::strtoul(j.substr(i + 1, 4).c_str(), nullptr, 16));
                    i += 4;
                    if (cp >= 0xD800 && cp < 0xDC00 && j.compare(i + 1, 2, "\\u") == 0) {
                        const unsigned lo = unsigned(std::strtoul(j.substr(i + 3, 4).c_str(), nullptr, 16));
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        i += 6;
                    }
                    append_utf8(s, cp);
                    break;
                }
                default: s += e;  // \" \\ \/
            }
        }
        ++i;
        out.push_back(std::move(s));
    }
    return out;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char **argv) {
    std::string folder = std::string(SPECLA_MODELS_DIR) + "/gdn-pycode-22m";
    std::string file;
    double mb = 8;
    int repeats = 5;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--tokenizer" && i + 1 < argc) folder = argv[++i];
        else if (a == "--file" && i + 1 < argc) file = argv[++i];
        else if (a == "--mb" && i + 1 < argc) mb = std::atof(argv[++i]);
        else if (a == "--repeats" && i + 1 < argc) repeats = std::max(1, std::atoi(argv[++i]));
        else if (a == "--json" && i + 1 < argc) ++i;  // read by bench::JsonReport
        else {
            std::fprintf(stderr, "usage: %s [--tokenizer DIR] [--file PATH] [--mb N] [--repeats N] [--json FILE]\n", argv[0]);
            return 2;
        }
    }

    std::vector<std::string> docs;
    if (file.empty()) {
        for (std::string &p : read_prompts(std::string(SPECLA_MODELS_DIR) + "/gdn-pycode-22m/eval_prompts.json"))
            docs.push_back(p + "\n");
    } else {
        const std::string text = read_file(file);
        for (size_t at = 0; at < text.size();) {  // 4 KiB stretches, cut at a character boundary
            size_t end = std::min(text.size(), at + 4096);
            while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
            docs.push_back(text.substr(at, end - at));
            at = end;
        }
    }
    std::vector<std::string> all_docs;
    std::string whole;
    const size_t target = size_t(mb * 1e6);
    while (whole.size() < target) {
        for (const std::string &d : docs) {
            all_docs.push_back(d);
            whole += d;
            if (whole.size() >= target) break;
        }
    }

    specla_tokenizer *tok = nullptr;
    if (specla_tokenizer_load(folder.c_str(), &tok) != SPECLA_OK) {
        std::fprintf(stderr, "load %s: %s\n", folder.c_str(), specla_last_error());
        return 1;
    }
    std::vector<int32_t> ids(whole.size() + 16);
    auto encode = [&](const std::string &text, size_t *n) {
        if (specla_tokenize(tok, text.data(), text.size(), false, true, ids.data(), ids.size(), n) !=
            SPECLA_OK) {
            std::fprintf(stderr, "tokenize: %s\n", specla_last_error());
            std::exit(1);
        }
    };

    size_t n_whole = 0, n_docs = 0;
    std::vector<double> wall_whole, wall_docs, cpu_whole, cpu_docs;
    using clock = std::chrono::steady_clock;
    auto seconds = [](clock::time_point a, clock::time_point b) {
        return std::chrono::duration<double>(b - a).count();
    };
    for (int r = 0; r <= repeats; ++r) {  // run 0 warms up
        const auto t0 = clock::now();
        const std::clock_t c0 = std::clock();
        encode(whole, &n_whole);
        const auto t1 = clock::now();
        const std::clock_t c1 = std::clock();
        n_docs = 0;
        for (const std::string &d : all_docs) {
            size_t n = 0;
            encode(d, &n);
            n_docs += n;
        }
        const auto t2 = clock::now();
        const std::clock_t c2 = std::clock();
        if (r > 0) {
            wall_whole.push_back(seconds(t0, t1));
            wall_docs.push_back(seconds(t1, t2));
            cpu_whole.push_back(double(c1 - c0) / CLOCKS_PER_SEC);
            cpu_docs.push_back(double(c2 - c1) / CLOCKS_PER_SEC);
        }
    }
    const double mbytes = double(whole.size()) / 1e6;
    std::printf("tokenizer: %s\n", folder.c_str());
    std::printf("text: %.2f MB, %zu documents, %zu tokens (%.2f bytes/token)\n", mbytes,
                all_docs.size(), n_whole, double(whole.size()) / double(n_whole));
    std::printf("whole:     %8.2f MB/s wall  %8.2f MB/s cpu  (median of %d)\n",
                mbytes / median(wall_whole), mbytes / median(cpu_whole), repeats);
    std::printf("documents: %8.2f MB/s wall  %8.2f MB/s cpu  (median of %d, %zu tokens)\n",
                mbytes / median(wall_docs), mbytes / median(cpu_docs), repeats, n_docs);
    specla_tokenizer_free(tok);
    bench::JsonReport json(argc, argv);
    json.set_device("cpu, 1 thread");
    const std::string text = std::to_string(mbytes).substr(0, 5) + " MB, " + std::to_string(all_docs.size()) + " documents";
    json.add("tokenizer encode, whole text, wall", mbytes / median(wall_whole), "MB/s", text);
    json.add("tokenizer encode, whole text, cpu", mbytes / median(cpu_whole), "MB/s", text);
    json.add("tokenizer encode, per document, wall", mbytes / median(wall_docs), "MB/s", text);
    json.add("tokenizer encode, per document, cpu", mbytes / median(cpu_docs), "MB/s", text);
    json.add("tokenizer bytes per token", double(whole.size()) / double(n_whole), "bytes/token");
    return json.write() ? 0 : 1;
}
