package specla

// The library's log messages through a C trampoline defined here, not through SWIG: the library
// calls a plain C function pointer from any thread, and cgo's //export (log_export.go) is the way
// for C to call Go; a runtime/cgo.Handle names the handler in the callback's user_data, so no Go
// pointer is handed to C. The library returns from specla_set_log_callback only once no call of
// the replaced sink runs (outside a callback), so the replaced handle is deleted right after.

/*
#cgo LDFLAGS: -lspecla
#include <stdint.h>
#include "specla/specla.h"

extern void speclaGoLog(int level, char *message, uintptr_t handler);

static _Thread_local int specla_go_in_log_call = 0;

static void specla_go_log(specla_log_level level, const char *message, void *user_data) {
    const int nested = specla_go_in_log_call;
    specla_go_in_log_call = 1;
    speclaGoLog((int)level, (char *)message, (uintptr_t)user_data);
    specla_go_in_log_call = nested;
}

static void specla_go_set_log_handler(uintptr_t handler, int min_level) {
    specla_set_log_callback(handler ? specla_go_log : NULL, (void *)handler, (specla_log_level)min_level);
}

static int specla_go_in_log(void) { return specla_go_in_log_call; }
*/
import "C"

import (
	"errors"
	"runtime"
	"runtime/cgo"
	"sync"
)

// LogLevel is the severity of a library log message (specla_log_level).
type LogLevel int

const (
	LogDebug LogLevel = 0
	LogInfo  LogLevel = 1
	LogWarn  LogLevel = 2
	LogError LogLevel = 3
)

// LogHandler receives one complete message. It is called from whatever thread logs, also threads
// the library started, so it must be safe for concurrent use.
type LogHandler func(level LogLevel, message string)

var (
	logMutex     sync.Mutex
	logInstalled cgo.Handle // 0: the library's default sink
)

// SetLogHandler sends every message at minLevel or above to handler (nil: back to the default,
// warnings and errors to stderr). When it returns, the replaced handler is not running and will
// not be called again. Calling it from inside a handler is an error: the library cannot give that
// guarantee there.
func SetLogHandler(handler LogHandler, minLevel LogLevel) error {
	runtime.LockOSThread() // the in-callback flag is per OS thread
	defer runtime.UnlockOSThread()
	if C.specla_go_in_log() != 0 {
		return errors.New("specla: the log handler cannot be replaced from inside a log handler")
	}
	logMutex.Lock()
	defer logMutex.Unlock()
	var h cgo.Handle
	if handler != nil {
		h = cgo.NewHandle(handler)
	}
	C.specla_go_set_log_handler(C.uintptr_t(h), C.int(minLevel))
	if logInstalled != 0 {
		logInstalled.Delete()
	}
	logInstalled = h
	return nil
}

// RemoveLogHandler restores the default sink; the removed handler is not called again.
func RemoveLogHandler() error {
	return SetLogHandler(nil, LogWarn)
}
