package limiter_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/limiter"
)

func newComposite(t testing.TB, rdb redis.Scripter, cfg limiter.CompositeConfig) *limiter.Composite {
	t.Helper()
	if cfg.Prefix == "" {
		cfg.Prefix = prefix(t)
	}
	c, err := limiter.NewComposite(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// userSKU limits a user to 3 events an hour and a SKU to 1; tag is the sale.
func userSKU(alg limiter.Algorithm) limiter.CompositeConfig {
	return limiter.CompositeConfig{
		Algorithm: alg,
		Dimensions: []limiter.Dimension{
			{Name: "user", Limit: limiter.Limit{Rate: 3, Period: time.Hour}},
			{Name: "sku", Limit: limiter.Limit{Rate: 1, Period: time.Hour}},
		},
	}
}

// A call one dimension refuses counts nothing in the others.
func TestCompositeAllOrNothing(t *testing.T) {
	for _, b := range backends(t) {
		for _, alg := range algorithms {
			t.Run(b.name+"/"+alg.String(), func(t *testing.T) {
				c := newComposite(t, b.client(t), userSKU(alg))
				call := func(user, sku string) limiter.Decision {
					t.Helper()
					d, err := c.Allow(bg, limiter.Request{Tag: "sale", Values: []string{user, sku}})
					if err != nil {
						t.Fatal(err)
					}
					return d
				}
				if d := call("u1", "s1"); !d.Allowed || d.Remaining != 0 {
					t.Fatalf("first call = %+v, want allowed with 0 remaining (the SKU's)", d)
				}
				for range 5 {
					if d := call("u1", "s1"); d.Allowed || d.DeniedBy != "sku" || d.RetryAfter <= 0 {
						t.Fatalf("second call on s1 = %+v, want denied by sku", d)
					}
				}
				// The five refusals took nothing from u1: two more SKUs pass.
				if d := call("u1", "s2"); !d.Allowed {
					t.Fatalf("u1 on s2 = %+v, want allowed", d)
				}
				if d := call("u1", "s3"); !d.Allowed {
					t.Fatalf("u1 on s3 = %+v, want allowed", d)
				}
				// u1 is spent; the refusal leaves s4 untouched for u2.
				if d := call("u1", "s4"); d.Allowed || d.DeniedBy != "user" {
					t.Fatalf("u1 on s4 = %+v, want denied by user", d)
				}
				if d := call("u2", "s4"); !d.Allowed {
					t.Fatalf("u2 on s4 = %+v, want allowed (u1's refusal took nothing from s4)", d)
				}
				// A dimension left empty is not counted.
				if d, err := c.Allow(bg, limiter.Request{Tag: "sale", Values: []string{"u3", ""}}); err != nil || !d.Allowed || d.Remaining != 2 {
					t.Fatalf("user only = %+v, %v; want allowed with 2 remaining", d, err)
				}
			})
		}
	}
}

// Many users racing for one SKU limit: exactly the SKU's limit passes, and
// no user passes more than its own.
func TestCompositeConcurrentExact(t *testing.T) {
	for _, b := range backends(t) {
		for _, alg := range algorithms {
			t.Run(b.name+"/"+alg.String(), func(t *testing.T) {
				c := newComposite(t, b.client(t), limiter.CompositeConfig{
					Algorithm: alg,
					Dimensions: []limiter.Dimension{
						{Name: "user", Limit: limiter.Limit{Rate: 4, Period: time.Hour}},
						{Name: "sku", Limit: limiter.Limit{Rate: 25, Period: time.Hour}},
						{Name: "ip", Limit: limiter.Limit{Rate: 1000, Period: time.Hour}},
					},
				})
				got := countAllowed(t, 200, func(i int) (bool, error) {
					user := "u" + strconv.Itoa(i%10) // 10 users x 4 = 40 > 25
					d, err := c.Allow(bg, limiter.Request{Tag: "sale", Values: []string{user, "hot", "10.0.0.1"}})
					return d.Allowed, err
				})
				if got != 25 {
					t.Fatalf("allowed %d, want exactly the SKU limit 25", got)
				}
				// The IP dimension counted exactly the admitted calls.
				d, err := c.Allow(bg, limiter.Request{Tag: "sale", Values: []string{"", "", "10.0.0.1"}})
				if err != nil || !d.Allowed || d.Remaining != 1000-26 {
					t.Fatalf("IP after the race = %+v, %v; want allowed with %d remaining", d, err, 1000-26)
				}
			})
		}
	}
}

func TestCompositeCrossSlot(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			c := newComposite(t, b.client(t), userSKU(limiter.GCRA))
			req := limiter.Request{Values: []string{"alice", "sku-1"}} // no tag: two slots
			if _, err := c.Allow(bg, req); !errors.Is(err, limiter.ErrCrossSlot) {
				t.Fatalf("untagged call over two slots: error = %v, want ErrCrossSlot", err)
			}
			// One dimension is one slot: legal everywhere.
			if d, err := c.Allow(bg, limiter.Request{Values: []string{"alice", ""}}); err != nil || !d.Allowed {
				t.Fatalf("untagged single-dimension call = %+v, %v; want allowed", d, err)
			}
		})
	}
	_, rdb := newMini(t)
	cfg := userSKU(limiter.GCRA)
	cfg.AllowCrossSlot = true
	c := newComposite(t, rdb, cfg)
	if d, err := c.Allow(bg, limiter.Request{Values: []string{"alice", "sku-1"}}); err != nil || !d.Allowed {
		t.Fatalf("AllowCrossSlot on one server = %+v, %v; want allowed", d, err)
	}
}

func TestCompositeRefusesBadInput(t *testing.T) {
	_, rdb := newMini(t)
	c := newComposite(t, rdb, userSKU(limiter.GCRA))
	for _, req := range []limiter.Request{
		{Values: []string{"u"}},
		{Values: []string{"", ""}},
		{Values: []string{"u{1}", "s"}, Tag: "t"},
		{Values: []string{"u", "s"}, Tag: "t}"},
	} {
		if _, err := c.Allow(bg, req); !errors.Is(err, limiter.ErrInvalid) {
			t.Errorf("Allow(%+v) error = %v, want ErrInvalid", req, err)
		}
	}
	if _, err := c.AllowN(bg, limiter.Request{Tag: "t", Values: []string{"u", "s"}}, 2); !errors.Is(err, limiter.ErrInvalid) {
		t.Errorf("AllowN(2) over a SKU limit of 1: error = %v, want ErrInvalid", err)
	}
	one := limiter.Limit{Rate: 1}
	for _, dims := range [][]limiter.Dimension{
		nil,
		{{Name: "a", Limit: one}, {Name: "a", Limit: one}},
		{{Name: "a:b", Limit: one}},
		{{Name: "", Limit: one}},
		{{Name: "a"}},
		make([]limiter.Dimension, limiter.MaxDimensions+1),
	} {
		if _, err := limiter.NewComposite(rdb, limiter.CompositeConfig{Dimensions: dims}); !errors.Is(err, limiter.ErrInvalid) {
			t.Errorf("NewComposite(%+v) error = %v, want ErrInvalid", dims, err)
		}
	}
}
