package otelstock_test

import (
	"testing"

	"github.com/stockguard/stockguard/otelstock"
	"github.com/stockguard/stockguard/stock/memstock"
)

func TestMemstockScript(t *testing.T) {
	t.Parallel()
	h := newHarness(t, otelstock.Config{})
	clk := newClock()
	m := memstock.New(clk, memstock.WithObserver(h.a.Observer()))
	if _, err := h.a.RegisterLevels(otelstock.Levels{Source: m, Store: "s", SKUs: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	script(t, m, clk)
	checkScript(t, h, "memstock")
}
