// Ctrl-C for the `specla` program: SIGINT and SIGTERM stop a running generation cleanly (the text
// so far and the statistics are still printed); a second one exits at once.
//
// The signals are not handled in a signal handler (almost nothing of the library is
// async-signal-safe) but received by a thread of the program's own with sigtimedwait, which then
// calls specla_generation_abort. For that, every thread must have the signals blocked: start()
// runs first thing in main, before the library creates any thread, and they inherit the mask.
#pragma once

#include "specla/specla.h"

namespace specla_cli::interrupt {

// Blocks SIGINT and SIGTERM and starts the receiving thread. A signal the program was started
// with ignored (`nohup`, a background job of a non-interactive shell) stays ignored.
void start();
// Stops the receiving thread and unblocks the signals.
void stop();
// Whether a signal arrived.
bool requested();

// While alive, a signal aborts `gen`; an abort requested before construction applies at once.
// Ends before the generation is freed, so an abort never meets specla_generation_free.
class WatchGeneration {
public:
    explicit WatchGeneration(specla_generation *gen);
    ~WatchGeneration();
    WatchGeneration(const WatchGeneration &) = delete;
    WatchGeneration &operator=(const WatchGeneration &) = delete;
};

}  // namespace specla_cli::interrupt
