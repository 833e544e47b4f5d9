package main

import (
	"os"
	"testing"
)

// TestSaleOnEachBroker runs the small sale through each broker -queue
// offers: NATS on an in-process server always, and on the servers
// STOCKGUARD_NATS_URL and STOCKGUARD_AMQP_URL name when they are set.
// Each must sell exactly its stock with nothing lost or leaked.
func TestSaleOnEachBroker(t *testing.T) {
	cases := []struct {
		name string
		env  string // "" runs without a server
		args func(v string) []string
	}{
		{"nats-in-process", "", func(string) []string { return []string{"-queue", "nats"} }},
		{"nats", "STOCKGUARD_NATS_URL", func(v string) []string { return []string{"-queue", "nats", "-nats", v} }},
		{"rabbitmq", "STOCKGUARD_AMQP_URL", func(v string) []string { return []string{"-queue", "rabbitmq", "-amqp", v} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := ""
			if c.env != "" {
				if v = os.Getenv(c.env); v == "" {
					t.Skipf("set %s to run the sale on that broker", c.env)
				}
			}
			t.Parallel()
			rep := runSale(t, c.args(v)...)
			for _, k := range []string{"oversold", "drift", "lost_sales", "leaked"} {
				if n := num(t, rep, k); n != 0 {
					t.Errorf("%s = %d, want 0", k, n)
				}
			}
			onSale, sold, held, avail := num(t, rep, "on_sale"), num(t, rep, "sold"), num(t, rep, "held"), num(t, rep, "available")
			if sold+held+avail != onSale {
				t.Errorf("sold %d + held %d + available %d != on sale %d", sold, held, avail, onSale)
			}
			if rep["accounting_exact"] != true {
				t.Errorf("accounting_exact = %v", rep["accounting_exact"])
			}
		})
	}
}
