// Package argerr builds the errors the core packages return for invalid
// arguments. The message names the package, the operation and the object
// once ("rank: incr \"daily\": invalid argument: 1e308 + 1e308 overflows"),
// where wrapping the package's sentinel with %w would repeat the package
// ("rank: incr \"daily\": rank: invalid argument: …"), and the error still
// matches that sentinel with errors.Is.
package argerr

import "fmt"

type argError struct {
	msg      string
	sentinel error
}

func (e *argError) Error() string { return e.msg }
func (e *argError) Unwrap() error { return e.sentinel }

// New returns the error of an invalid argument to op on the object name of
// package pkg, matching sentinel (the package's ErrInvalid).
func New(sentinel error, pkg, op, name, detail string) error {
	return &argError{msg: fmt.Sprintf("%s: %s %q: invalid argument: %s", pkg, op, name, detail), sentinel: sentinel}
}

// Detail returns the error of an invalid argument of package pkg that
// names no operation or object of its own: "pkg: invalid argument: detail".
func Detail(sentinel error, pkg, detail string) error {
	return &argError{msg: pkg + ": invalid argument: " + detail, sentinel: sentinel}
}
