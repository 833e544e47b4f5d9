package memstock_test

import (
	"testing"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

func TestConformance(t *testing.T) {
	stocktest.Run(t, func(t *testing.T, clock stock.Clock) stock.Manager {
		return memstock.New(clock)
	})
}
