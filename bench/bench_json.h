// Machine-readable results of the benchmark drivers: `--json FILE` writes
//
//   {"program": "bench_decode", "commit": "<git describe at configure time>", "date": "<UTC, ISO 8601>",
//    "device": "...", "host_cpu": "...", "command": "bench_decode --json out.json ...",
//    "results": [{"measure": "...", "value": 1.23, "unit": "ms", "note": "..."}, ...]}
//
// next to the human tables, which stay as they are, so that bench/RESULTS.md can be regenerated
// from a run instead of copied by hand. Every driver uses the same writer and the same flag.
#pragma once

#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#ifndef SPECLA_BENCH_COMMIT
#define SPECLA_BENCH_COMMIT "unknown"
#endif

namespace bench {

class JsonReport {
public:
    // `argv[0]`'s file name is the program; the command line is kept as given.
    JsonReport(int argc, char **argv) {
        const std::string a0 = argc > 0 ? argv[0] : "bench";
        program_ = a0.substr(a0.find_last_of('/') == std::string::npos ? 0 : a0.find_last_of('/') + 1);
        command_ = program_;
        for (int i = 1; i < argc; ++i) command_ += std::string(" ") + argv[i];
        for (int i = 1; i + 1 < argc; ++i)
            if (std::string(argv[i]) == "--json") path_ = argv[i + 1];
    }

    // Whether --json was given (its FILE operand is then not another driver argument).
    bool enabled() const { return !path_.empty(); }
    const std::string &path() const { return path_; }

    void set_device(const std::string &d) { device_ = d; }
    void add(const std::string &measure, double value, const std::string &unit, const std::string &note = "") {
        results_.push_back({measure, value, unit, note});
    }

    // Writes the report where --json said (nothing without it); false with a message on failure.
    bool write() const {
        if (!enabled()) return true;
        nlohmann::ordered_json j;
        j["program"] = program_;
        j["commit"] = SPECLA_BENCH_COMMIT;
        j["date"] = utc_now();
        j["device"] = device_;
        j["host_cpu"] = host_cpu();
        j["command"] = command_;
        nlohmann::ordered_json rs = nlohmann::ordered_json::array();
        for (const Result &r : results_) {
            nlohmann::ordered_json o;
            o["measure"] = r.measure;
            o["value"] = r.value;
            o["unit"] = r.unit;
            if (!r.note.empty()) o["note"] = r.note;
            rs.push_back(std::move(o));
        }
        j["results"] = std::move(rs);
        const std::string text = j.dump(2) + "\n";
        std::ofstream f(path_);
        f << text;
        if (!f) {
            std::fprintf(stderr, "%s: cannot write %s\n", program_.c_str(), path_.c_str());
            return false;
        }
        return true;
    }

private:
    struct Result {
        std::string measure;
        double value;
        std::string unit, note;
    };

    static std::string utc_now() {
        const std::time_t t = std::time(nullptr);
        std::tm tm{};
        gmtime_r(&t, &tm);
        char buf[32];
        std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
        return buf;
    }
    static std::string host_cpu() {
        std::ifstream f("/proc/cpuinfo");
        std::string line;
        while (std::getline(f, line))
            if (line.rfind("model name", 0) == 0) {
                const size_t c = line.find(':');
                return c == std::string::npos ? line : line.substr(line.find_first_not_of(' ', c + 1));
            }
        return "unknown";
    }

    std::string program_, command_, path_, device_ = "cpu";
    std::vector<Result> results_;
};

}  // namespace bench
