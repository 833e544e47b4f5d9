package limiter

import "testing"

// Values from CLUSTER KEYSLOT on a real server.
func TestSlotMatchesRedis(t *testing.T) {
	for tag, want := range map[string]uint16{"foo": 12182, "bar": 5061, "123456789": 12739, "": 0, "user:1000": 1649} {
		if got := slot(tag); got != want {
			t.Errorf("slot(%q) = %d, want %d", tag, got, want)
		}
	}
	// The cross-slot test relies on these two differing.
	if slot("user:alice") == slot("sku:sku-1") {
		t.Fatal("user:alice and sku:sku-1 share a slot")
	}
}
