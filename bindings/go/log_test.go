package specla

import (
	"strings"
	"sync"
	"testing"

	"specla/internal/native"
)

type logRecorder struct {
	mu       sync.Mutex
	messages []string
}

func (r *logRecorder) record(level LogLevel, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if level >= LogWarn {
		r.messages = append(r.messages, message)
	}
}

func (r *logRecorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.messages...)
}

func warnsAboutThreads(messages []string) bool {
	for _, m := range messages {
		if strings.Contains(m, "n_threads") {
			return true
		}
	}
	return false
}

func TestLogHandler(t *testing.T) {
	// More threads than this machine has CPUs: accepted, with a warning through the log.
	loadWithManyThreads := func() {
		m, err := LoadModel(requireModelDir(t), &ModelOptions{Threads: int32(native.LIMIT_THREADS)})
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
	}
	var first logRecorder
	var nestedErr error
	err := SetLogHandler(func(level LogLevel, message string) {
		first.record(level, message)
		if err := RemoveLogHandler(); err != nil {
			nestedErr = err
		}
	}, LogInfo)
	if err != nil {
		t.Fatal(err)
	}
	defer RemoveLogHandler()
	loadWithManyThreads()
	if got := first.snapshot(); !warnsAboutThreads(got) {
		t.Errorf("no n_threads warning among %q", got)
	}
	if nestedErr == nil {
		t.Errorf("replacing the handler from inside it was not refused")
	}

	var second logRecorder
	if err := SetLogHandler(second.record, LogWarn); err != nil {
		t.Fatal(err)
	}
	before := len(first.snapshot())
	loadWithManyThreads()
	if err := RemoveLogHandler(); err != nil {
		t.Fatal(err)
	}
	if len(first.snapshot()) != before {
		t.Errorf("the replaced handler was called")
	}
	if !warnsAboutThreads(second.snapshot()) {
		t.Errorf("the second handler got %q", second.snapshot())
	}
	kept := len(second.snapshot())
	loadWithManyThreads()
	if len(second.snapshot()) != kept {
		t.Errorf("the removed handler was called")
	}
}

// Goroutines log while the handler is replaced over and over: every message reaches exactly one
// of the installed handlers, and nothing breaks.
func TestLogHandlerAcrossGoroutines(t *testing.T) {
	const loaders, loads = 3, 4
	dir := requireModelDir(t)
	var done sync.WaitGroup
	var mu sync.Mutex
	count := 0
	handler := func(level LogLevel, message string) {
		if strings.Contains(message, "n_threads") {
			mu.Lock()
			count++
			mu.Unlock()
		}
	}
	if err := SetLogHandler(handler, LogWarn); err != nil {
		t.Fatal(err)
	}
	defer RemoveLogHandler()
	errs := make(chan error, loaders*loads)
	for l := 0; l < loaders; l++ {
		done.Add(1)
		go func() {
			defer done.Done()
			for i := 0; i < loads; i++ {
				m, err := LoadModel(dir, &ModelOptions{Threads: int32(native.LIMIT_THREADS)})
				if err != nil {
					errs <- err
					continue
				}
				m.Close()
			}
		}()
	}
	for i := 0; i < 50; i++ {
		if err := SetLogHandler(handler, LogWarn); err != nil {
			t.Fatal(err)
		}
	}
	done.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a loading goroutine failed: %v", err)
	}
	if count != loaders*loads {
		t.Errorf("heard %d of %d warnings", count, loaders*loads)
	}
}
