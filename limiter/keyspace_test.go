package limiter_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stockguard/stockguard/limiter"
)

// oncePerHour admits one event an hour: a limit's first call is allowed
// only if nothing else was counted in its key.
var oncePerHour = limiter.Limit{Rate: 1, Period: time.Hour}

// Under one prefix (the default one on a server of the test's own), a
// Redis limiter's key "sku:phone" and a Composite's untagged "sku"
// dimension with value "phone" are two limits: each admits its own first
// event, in either order. Their keys are the documented ones.
func TestRedisAndCompositeDoNotShareCounts(t *testing.T) {
	for _, b := range backends(t) {
		for _, alg := range algorithms {
			t.Run(b.name+"/"+alg.String(), func(t *testing.T) {
				rdb := b.client(t)
				p := "" // the default prefix: miniredis is this test's own
				if b.name != "miniredis" {
					p = prefix(t)
				}
				plain, err := limiter.NewRedis(rdb, limiter.RedisConfig{Prefix: p, Algorithm: alg, Limit: oncePerHour})
				if err != nil {
					t.Fatal(err)
				}
				comp, err := limiter.NewComposite(rdb, limiter.CompositeConfig{Prefix: p, Algorithm: alg,
					Dimensions: []limiter.Dimension{{Name: "sku", Limit: oncePerHour}}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { // the keys of a shared server go now, not in an hour
					for _, v := range []string{"phone", "lamp"} {
						_ = plain.Reset(bg, "sku:"+v)
						_ = comp.Reset(bg, limiter.Request{Values: []string{v}})
					}
				})
				allowPlain := func(key string) bool {
					t.Helper()
					d, err := plain.Allow(bg, key)
					if err != nil {
						t.Fatal(err)
					}
					return d.Allowed
				}
				allowComp := func(value string) bool {
					t.Helper()
					d, err := comp.Allow(bg, limiter.Request{Values: []string{value}})
					if err != nil {
						t.Fatal(err)
					}
					return d.Allowed
				}
				if !allowPlain("sku:phone") {
					t.Fatal(`Redis limiter "sku:phone": first event refused`)
				}
				if !allowComp("phone") {
					t.Fatal(`Composite sku="phone" after the Redis limiter's "sku:phone": first event refused (one count for two limits)`)
				}
				if !allowComp("lamp") {
					t.Fatal(`Composite sku="lamp": first event refused`)
				}
				if !allowPlain("sku:lamp") {
					t.Fatal(`Redis limiter "sku:lamp" after the Composite's sku="lamp": first event refused (one count for two limits)`)
				}
				if allowPlain("sku:phone") || allowComp("phone") {
					t.Fatal("a second event within the hour was allowed")
				}
				if p == "" {
					p = "limiter"
				}
				p += ":" + alg.String() + ":"
				for _, key := range []string{p + "{sku:phone}", p + "{sku:lamp}", p + "dim:{sku:phone}", p + "dim:{sku:lamp}"} {
					if n, err := rdb.Exists(bg, key).Result(); err != nil || n != 1 {
						t.Errorf("key %q: exists %d, %v; want 1", key, n, err)
					}
				}
			})
		}
	}
}

// trickyKeys are keys, values and tags that look like parts of another
// layout: colons anywhere, the markers of the key layouts, braces (refused),
// blank-looking and non-ASCII text.
var trickyKeys = []string{
	"phone", "sku:phone", "dim:sku:phone", "sale:sku:phone", "sku", "dim", "gcra",
	":", "::", "sku:", ":phone", "a:b:c", " ", "\u200b", "0",
	"é", "商品:手机", "🙂:🙂", "{phone}", "sku}:phone", "{", "}", "",
}

// Every limit of one prefix and algorithm counts in a key of its own: a
// Redis limiter's keys, a Composite's untagged (dimension, value) and its
// tagged (tag, dimension, value) are all distinct limits, so each one's
// first event is allowed and writes exactly one new key, whatever the
// text. Input with a brace or empty is refused and writes nothing.
func TestEveryLimitHasItsOwnKey(t *testing.T) {
	values := slices.Clone(trickyKeys)
	for _, v := range trickyKeys {
		values = append(values, "sku:"+v, "dim:sku:"+v, v+":sku:"+v)
	}
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			_, rdb := newMini(t)
			plain, err := limiter.NewRedis(rdb, limiter.RedisConfig{Algorithm: alg, Limit: oncePerHour})
			if err != nil {
				t.Fatal(err)
			}
			dims := []string{"sku", "dim", "é"}
			cfg := limiter.CompositeConfig{Algorithm: alg}
			for _, d := range dims {
				cfg.Dimensions = append(cfg.Dimensions, limiter.Dimension{Name: d, Limit: oncePerHour})
			}
			comp, err := limiter.NewComposite(rdb, cfg)
			if err != nil {
				t.Fatal(err)
			}
			keys := func() int64 {
				t.Helper()
				n, err := rdb.DBSize(bg).Result()
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			seen := map[string]bool{} // the limits counted so far, by identity
			check := func(limit string, valid bool, allow func() (limiter.Decision, error)) {
				t.Helper()
				if seen[limit] {
					return
				}
				seen[limit] = true
				before := keys()
				d, err := allow()
				if !valid {
					if n := keys() - before; !errors.Is(err, limiter.ErrInvalid) || n != 0 {
						t.Errorf("%s: %+v, %v, %d keys written; want ErrInvalid and none", limit, d, err, n)
					}
					return
				}
				if err != nil || !d.Allowed {
					t.Errorf("%s: first event %+v, %v; want allowed (nothing else counts in its key)", limit, d, err)
				}
				if n := keys() - before; n != 1 {
					t.Errorf("%s: wrote %d new keys, want 1", limit, n)
				}
			}
			valid := func(s string) bool { return limiter.ValidateKey("", s) == nil }
			for _, k := range values {
				check("redis "+k, valid(k), func() (limiter.Decision, error) { return plain.Allow(bg, k) })
			}
			for i, d := range dims {
				for _, v := range values {
					req := limiter.Request{Values: make([]string, len(dims))}
					req.Values[i] = v
					check("untagged "+d+"="+v, valid(v), func() (limiter.Decision, error) { return comp.Allow(bg, req) })
					if !slices.Contains(trickyKeys, v) {
						continue // tagged: the tricky values alone, under every tag
					}
					for _, tag := range trickyKeys {
						if tag == "" {
							continue // no tag: the untagged call above
						}
						req := limiter.Request{Tag: tag, Values: make([]string, len(dims))}
						req.Values[i] = v
						check("tag "+tag+" "+d+"="+v, valid(v) && valid(tag), func() (limiter.Decision, error) { return comp.Allow(bg, req) })
					}
				}
			}
		})
	}
}
