package specla

// The Go side of the log trampoline in log.go (a file with //export may only declare in its
// preamble, so the C part lives there).

// #include <stdint.h>
import "C"

import "runtime/cgo"

//export speclaGoLog
func speclaGoLog(level C.int, message *C.char, handler C.uintptr_t) {
	defer func() {
		// Nothing may unwind into the library's logging; a panicking handler loses its message.
		_ = recover()
	}()
	cgo.Handle(handler).Value().(LogHandler)(LogLevel(level), C.GoString(message))
}
