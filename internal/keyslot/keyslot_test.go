package keyslot_test

import (
	"testing"

	"github.com/stockguard/stockguard/internal/keyslot"
)

// Values from CLUSTER KEYSLOT on a real server.
func TestSlotMatchesRedis(t *testing.T) {
	for tag, want := range map[string]int{"foo": 12182, "bar": 5061, "123456789": 12739, "": 0, "user:1000": 1649} {
		if got := keyslot.Slot(tag); got != want {
			t.Errorf("Slot(%q) = %d, want %d", tag, got, want)
		}
	}
}
