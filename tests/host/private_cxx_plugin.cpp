// A stand-in for a C++ extension module that a host loaded privately (dlopen RTLD_LOCAL, as
// Python does) before libspecla: it brings libstdc++ into the process ahead of libspecla.
#include <string>
#include <vector>

extern "C" __attribute__((visibility("default"))) int private_plugin_work(int n) {
    std::vector<std::string> words;
    for (int i = 0; i < n; ++i) words.push_back(std::string(40, char('a' + i % 26)));
    size_t total = 0;
    for (const auto &w : words) total += w.size();
    return int(total);
}
