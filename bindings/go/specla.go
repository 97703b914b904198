// Package specla is the Go binding of SpecLA, an inference runtime for linear-attention language
// models with speculative decoding.
//
// Handles (Model, Session, Drafter) own native memory and must be closed with Close; a model may
// be closed before its sessions and drafters (the native model is released when the last of them
// closes). A Model may be used by any number of goroutines at once; a Session or Drafter by one
// goroutine at a time, and Close must not race with other calls on the same handle.
//
// Every call that can fail returns an error; failures of the library are *Error values carrying
// the library's Status and message, which errors.Is matches against a Status:
//
//	if _, err := specla.LoadModel(dir, nil); errors.Is(err, specla.StatusIO) { ... }
package specla

import "specla/internal/native"

// The version this binding was generated from (the header's SPECLA_VERSION_* macros).
const (
	VersionMajor = native.VERSION_MAJOR
	VersionMinor = native.VERSION_MINOR
	VersionPatch = native.VERSION_PATCH
)

// Version is "major.minor.patch" of the library actually loaded.
func Version() string { return native.Version() }

// HasCUDA reports whether the loaded library contains the CUDA backend (it may still find no GPU).
func HasCUDA() bool { return native.HasCuda() }
