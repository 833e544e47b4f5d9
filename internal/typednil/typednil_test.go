package typednil_test

import (
	"testing"

	"github.com/stockguard/stockguard/internal/typednil"
)

type clock struct{}

func (*clock) tick() {}

func TestIs(t *testing.T) {
	var p *clock
	var f func()
	var m map[string]int
	var i interface{ tick() } = p
	for _, v := range []any{nil, p, f, m, i, []int(nil), (chan int)(nil)} {
		if !typednil.Is(v) {
			t.Errorf("Is(%#v) = false, want true", v)
		}
	}
	for _, v := range []any{&clock{}, 0, "", clock{}, func() {}, map[string]int{}} {
		if typednil.Is(v) {
			t.Errorf("Is(%#v) = true, want false", v)
		}
	}
}
