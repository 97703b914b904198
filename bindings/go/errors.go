package specla

import (
	"runtime"

	"specla/internal/native"
)

// Status is the library's status code (specla_status in C).
type Status int

// The values of specla_status; TestStatusValues checks them against the library.
const (
	StatusOK                 Status = 0
	StatusInvalidArgument    Status = 1
	StatusIO                 Status = 2
	StatusFormat             Status = 3
	StatusUnsupported        Status = 4
	StatusShape              Status = 5
	StatusTokenOutOfRange    Status = 6
	StatusOutOfMemory        Status = 7
	StatusBackendUnavailable Status = 8
	StatusDevice             Status = 9
	StatusAborted            Status = 10
	StatusCapacity           Status = 11
	StatusState              Status = 12
	StatusInternal           Status = 13
)

// String is the library's name for the status, e.g. "SPECLA_ERR_IO: input/output error".
func (s Status) String() string {
	return native.StatusString(native.Enum_SS_specla_status(s))
}

// Error makes a Status usable as the target of errors.Is.
func (s Status) Error() string { return s.String() }

// Error is a failed call: the library's status and the message it gave (or the binding's, for a
// closed handle).
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string { return e.Status.String() + ": " + e.Message }

// Is reports whether target is this error's Status, so that errors.Is(err, StatusIO) works.
func (e *Error) Is(target error) bool {
	status, ok := target.(Status)
	return ok && status == e.Status
}

// checked runs one native call with the goroutine locked to its OS thread: the status and
// message a call leaves are per thread (in the library and in the binding), and Go may otherwise
// move the goroutine to another thread between the call and the read.
func checked[T any](call func() T) (T, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	result := call()
	return result, lastError()
}

func checkedVoid(call func()) error {
	_, err := checked(func() struct{} { call(); return struct{}{} })
	return err
}

func lastError() error {
	if status := native.LastStatus(); status != native.OK {
		return &Error{Status: Status(status), Message: native.LastMessage()}
	}
	return nil
}
