package stock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

func TestValidateID(t *testing.T) {
	good := []string{"a", "sku-1", "用户42", "a:b", strings.Repeat("x", stock.MaxIDLen)}
	for _, id := range good {
		if err := stock.ValidateID("id", id); err != nil {
			t.Errorf("ValidateID(%q) = %v, want nil", id, err)
		}
	}
	bad := []string{"", "{a}", "a}", "a b", "a\tb", "a\x00", "\xff", strings.Repeat("x", stock.MaxIDLen+1), "a\u2028b"}
	for _, id := range bad {
		err := stock.ValidateID("id", id)
		var ie *stock.InvalidError
		if !errors.Is(err, stock.ErrInvalid) || !errors.As(err, &ie) || ie.Field != "id" {
			t.Errorf("ValidateID(%q) = %v, want an *InvalidError for field id", id, err)
		}
	}
}

func TestOrderValidate(t *testing.T) {
	it := func(sku string, q int64) stock.Item { return stock.Item{SKU: sku, Qty: q} }
	many := make([]stock.Item, stock.MaxItems+1)
	for i := range many {
		many[i] = it(strings.Repeat("s", i+1), 1)
	}
	cases := []struct {
		o     stock.Order
		field string // "" means valid
	}{
		{stock.Order{ID: "o", Items: []stock.Item{it("a", 1)}}, ""},
		{stock.Order{ID: "o", UserID: "u", Items: []stock.Item{it("a", stock.MaxQty), it("b", 1)}}, ""},
		{stock.Order{ID: "o", Items: many[:stock.MaxItems]}, ""},
		{stock.Order{Items: []stock.Item{it("a", 1)}}, "order.ID"},
		{stock.Order{ID: "o", UserID: "u{", Items: []stock.Item{it("a", 1)}}, "order.UserID"},
		{stock.Order{ID: "o"}, "order.Items"},
		{stock.Order{ID: "o", Items: many}, "order.Items"},
		{stock.Order{ID: "o", Items: []stock.Item{it("a", 1), it("", 1)}}, "order.Items[1].SKU"},
		{stock.Order{ID: "o", Items: []stock.Item{it("a", 0)}}, "order.Items[0].Qty"},
		{stock.Order{ID: "o", Items: []stock.Item{it("a", stock.MaxQty+1)}}, "order.Items[0].Qty"},
		{stock.Order{ID: "o", Items: []stock.Item{it("a", 1), it("b", 1), it("a", 2)}}, "order.Items[2].SKU"},
	}
	for _, c := range cases {
		err := c.o.Validate()
		if c.field == "" {
			if err != nil {
				t.Errorf("Validate(%+v) = %v, want nil", c.o, err)
			}
			continue
		}
		var ie *stock.InvalidError
		if !errors.As(err, &ie) || ie.Field != c.field || !errors.Is(err, stock.ErrInvalid) {
			t.Errorf("Validate(%+v) = %v, want an *InvalidError for %s", c.o, err, c.field)
		}
	}
}

func TestListingValidate(t *testing.T) {
	ok := []stock.Listing{
		{SKU: "a"},
		{SKU: "a", Units: stock.MaxUnits, PerUserLimit: 2, HoldTTL: time.Millisecond},
		{SKU: "a", HoldTTL: stock.MaxHoldTTL},
	}
	for _, l := range ok {
		if err := l.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", l, err)
		}
	}
	bad := []stock.Listing{
		{},
		{SKU: "a", Units: -1},
		{SKU: "a", Units: stock.MaxUnits + 1},
		{SKU: "a", PerUserLimit: -1},
		{SKU: "a", HoldTTL: time.Microsecond},
		{SKU: "a", HoldTTL: stock.MaxHoldTTL + 1},
	}
	for _, l := range bad {
		if err := l.Validate(); !errors.Is(err, stock.ErrInvalid) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalid", l, err)
		}
	}
	if got := (stock.Listing{SKU: "a"}).EffectiveHoldTTL(); got != stock.DefaultHoldTTL {
		t.Errorf("EffectiveHoldTTL of zero = %v", got)
	}
}

func TestBoundsStayExactInLua(t *testing.T) {
	// Every count a script adds stays below 2^53, where doubles are exact.
	if stock.MaxUnits+int64(stock.MaxItems)*stock.MaxQty >= 1<<53 {
		t.Fatal("MaxUnits + MaxItems*MaxQty reaches 2^53")
	}
}

func TestErrorClasses(t *testing.T) {
	business := []error{
		&stock.SKUError{SKU: "a", Err: stock.ErrSoldOut},
		stock.ErrLimitReached, stock.ErrUnknownSKU, stock.ErrUnknownOrder,
		stock.ErrConflict, stock.ErrHoldExpired, stock.ErrOrderClosed,
		&stock.InvalidError{Field: "x", Reason: "y"},
	}
	for _, err := range business {
		if !stock.IsBusiness(err) {
			t.Errorf("IsBusiness(%v) = false", err)
		}
	}
	infra := []error{stock.ErrUnknownOutcome, stock.ErrContention, errors.New("dial tcp: connection refused")}
	for _, err := range infra {
		if stock.IsBusiness(err) {
			t.Errorf("IsBusiness(%v) = true", err)
		}
	}
	se := &stock.SKUError{SKU: "a b", Err: stock.ErrSoldOut}
	if !strings.Contains(se.Error(), `"a b"`) || !strings.HasPrefix(se.Error(), "stock: sold out") {
		t.Errorf("SKUError text %q", se.Error())
	}
}

// An error of a call about an order names the order once, whatever it
// wraps, and still matches what it wraps.
func TestNameOrder(t *testing.T) {
	err := stock.NameOrder("o-42", stock.ErrUnknownOrder)
	if got := err.Error(); got != `order "o-42": stock: unknown order` {
		t.Errorf("text %q", got)
	}
	if !errors.Is(err, stock.ErrUnknownOrder) {
		t.Error("does not match ErrUnknownOrder")
	}
	sku := &stock.SKUError{SKU: "phone", Err: stock.ErrSoldOut}
	if got := stock.NameOrder("o-42", sku).Error(); got != `order "o-42": stock: sold out: SKU "phone"` {
		t.Errorf("text %q", got)
	}
	var se *stock.SKUError
	if !errors.As(stock.NameOrder("o-42", sku), &se) || se.SKU != "phone" {
		t.Error("does not unwrap to the *SKUError")
	}
	quoted := fmt.Errorf(`redisstock: deduct order "o-42": %w`, stock.ErrUnknownOutcome)
	if got := stock.NameOrder("o-42", quoted).Error(); got != quoted.Error() {
		t.Errorf("an error that quotes the order names it twice: %q", got)
	}
	if got := stock.NameOrder("o-42", err).Error(); got != err.Error() {
		t.Errorf("naming twice: %q", got)
	}
	if stock.NameOrder("o-42", nil) != nil {
		t.Error("nil named")
	}
	if got := stock.NameRestock("op-7", stock.ErrConflict).Error(); got != `restock "op-7": stock: ID reused with different content` {
		t.Errorf("restock text %q", got)
	}
	if !errors.Is(stock.NameOrder("o-1", context.Canceled), context.Canceled) {
		t.Error("a context error named does not match the context's")
	}
}
