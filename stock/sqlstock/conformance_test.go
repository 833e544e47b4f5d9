package sqlstock_test

import (
	"testing"

	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

func TestConformance(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st sqlstock.Strategy) {
		stocktest.Run(t, managerFor(b, st))
	})
}
