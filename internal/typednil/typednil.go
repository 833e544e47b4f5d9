// Package typednil tells a nil given as an interface value: nil itself, or
// a nil pointer, map, slice, channel, function or interface held in one (a
// typed nil, which compares unequal to nil and panics when called).
package typednil

import "reflect"

// Is reports whether v is nil or holds a nil pointer, map, slice, channel,
// function or interface.
func Is(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface:
		return r.IsNil()
	}
	return false
}
