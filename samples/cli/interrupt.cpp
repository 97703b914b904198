// Ctrl-C for the `specla` program: a thread that receives SIGINT/SIGTERM and aborts the generation.
#include "interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

#include "cli_common.h"

namespace specla_cli::interrupt {
namespace {

std::atomic<bool> g_requested{false};
std::atomic<bool> g_stopping{false};
std::mutex g_mutex;                    // guards g_watched against the generation being freed
specla_generation *g_watched = nullptr;
std::thread *g_receiver = nullptr;  // never destroyed: exit() may come while it runs
sigset_t g_signals;

bool ignored_at_start(int sig) {
    struct sigaction old{};
    return sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN;
}

void receive() {
    const timespec poll{0, 50 * 1000 * 1000};  // how often stop() is noticed
    while (!g_stopping.load()) {
        const int sig = sigtimedwait(&g_signals, nullptr, &poll);
        if (sig <= 0) continue;
        if (g_requested.exchange(true)) {
            static const char msg[] = "\nspecla: interrupted again, exiting\n";
            (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
            _exit(kExitInterrupted);
        }
        std::lock_guard<std::mutex> lock(g_mutex);
        if (g_watched) specla_generation_abort(g_watched);
    }
}

}  // namespace

void start() {
    sigemptyset(&g_signals);
    for (int sig : {SIGINT, SIGTERM})
        if (!ignored_at_start(sig)) sigaddset(&g_signals, sig);
    pthread_sigmask(SIG_BLOCK, &g_signals, nullptr);
    g_receiver = new std::thread(receive);
}

void stop() {
    if (!g_receiver) return;
    g_stopping = true;
    g_receiver->join();
    delete g_receiver;
    g_receiver = nullptr;
    pthread_sigmask(SIG_UNBLOCK, &g_signals, nullptr);
}

bool requested() { return g_requested.load(); }

WatchGeneration::WatchGeneration(specla_generation *gen) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_watched = gen;
    if (g_requested.load()) specla_generation_abort(gen);
}

WatchGeneration::~WatchGeneration() {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_watched = nullptr;
}

}  // namespace specla_cli::interrupt
