package runtime

// For glue_test.go (package runtime_test), whose tests need a capability:
// what the runtime keeps, counted. Loop only.

func Closers(rt *Runtime) int { return len(rt.closers) }

func Threads(rt *Runtime) int { return len(rt.threads) }

const MaxSpareThreads = maxSpareThreads
