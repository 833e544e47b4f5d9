package limiter

import (
	"errors"
	"unicode"
	"unicode/utf8"
)

var (
	// ErrInvalid: a key, n, limit or configuration was refused before any
	// work. The error wrapping it says what was wrong (see *InvalidError).
	ErrInvalid = errors.New("limiter: invalid input")
	// ErrCrossSlot: a Composite call's keys hash to different Redis Cluster
	// slots and the configuration does not allow that, or the server
	// answered CROSSSLOT (AllowCrossSlot on a Cluster). Nothing was counted.
	// It is the caller's error, never a Redis failure: the Policy does not
	// decide the call.
	ErrCrossSlot = errors.New("limiter: keys of one call span Redis Cluster slots; set Request.Tag or CompositeConfig.AllowCrossSlot")
	// ErrUnavailable: Redis failed recently and the limiter is not calling
	// it until its backoff ends; returned only under the ReturnError mode
	// with no Fallback.
	ErrUnavailable = errors.New("limiter: redis unavailable")
)

// InvalidError says which input was refused and why. It matches ErrInvalid.
type InvalidError struct {
	Field  string
	Reason string
}

func (e *InvalidError) Error() string { return "limiter: invalid " + e.Field + ": " + e.Reason }

// Is reports whether target is ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, reason string) error { return &InvalidError{Field: field, Reason: reason} }

// RedisError is a Redis failure (network, timeout, server error, malformed
// reply): an infrastructure failure, never a rate decision. It matches
// ErrUnavailable and unwraps to the client's error.
type RedisError struct {
	Err error
}

func (e *RedisError) Error() string { return "limiter: redis: " + e.Err.Error() }

// Unwrap returns the client's error.
func (e *RedisError) Unwrap() error { return e.Err }

// Is reports whether target is ErrUnavailable.
func (e *RedisError) Is(target error) bool { return target == ErrUnavailable }

// ValidateKey checks a key for a Redis-backed limiter (also a Composite
// value, tag or dimension name): non-empty, at most MaxKeyLen bytes of
// valid UTF-8, no control characters, and no '{' or '}' (which would break
// Redis Cluster hash tags). field names the input in the error.
func ValidateKey(field, key string) error {
	if key == "" {
		return invalid(field, "empty")
	}
	if len(key) > MaxKeyLen {
		return invalid(field, "longer than 256 bytes")
	}
	if !utf8.ValidString(key) {
		return invalid(field, "not valid UTF-8")
	}
	for _, r := range key {
		if r == '{' || r == '}' {
			return invalid(field, "contains '{' or '}'")
		}
		if unicode.IsControl(r) {
			return invalid(field, "contains a control character")
		}
	}
	return nil
}
