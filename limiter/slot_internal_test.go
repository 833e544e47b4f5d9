package limiter

import (
	"testing"

	"github.com/stockguard/stockguard/internal/keyslot"
)

// The cross-slot test relies on these two tags having different slots.
func TestCrossSlotTagsDiffer(t *testing.T) {
	if keyslot.Slot("user:alice") == keyslot.Slot("sku:sku-1") {
		t.Fatal("user:alice and sku:sku-1 share a slot")
	}
}
