package tiered_test

import (
	"testing"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// The conformance suite over the shipped backends: redisstock as the gate,
// sqlstock as the record (miniredis and SQLite, and the real servers when
// their addresses are set).
func TestConformanceOverTheBackends(t *testing.T) {
	for _, p := range readerPairs() {
		t.Run(p.redis+"+"+p.db, func(t *testing.T) {
			stocktest.Run(t, func(t *testing.T, clock stock.Clock) stock.Manager {
				m, _, _ := readerShop(t, p, clock)
				return m
			})
		})
	}
}
