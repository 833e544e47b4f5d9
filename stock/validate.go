package stock

import (
	"fmt"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"
)

// Bounds enforced on every input before any I/O. They keep every key layout
// intact and every count exact in int64 and in Lua's doubles (2^53).
const (
	// MaxIDLen is the longest order ID, user ID or SKU, in bytes.
	MaxIDLen = 128
	// MaxItems is the most lines one order may have.
	MaxItems = 64
	// MaxQty is the most units one order line may take.
	MaxQty = 1_000_000_000
	// MaxUnits is the most units a SKU may have available; Restock fails
	// with ErrInvalid past it.
	MaxUnits = 1 << 50
	// MaxHoldTTL is the longest hold time a Listing may set.
	MaxHoldTTL = 30 * 24 * time.Hour
)

// ValidateID checks an order ID, user ID or SKU: non-empty, at most MaxIDLen
// bytes of valid UTF-8, with no control or space characters and no '{' or
// '}' (which would break Redis Cluster hash tags). field names the input in
// the error.
func ValidateID(field, id string) error {
	if id == "" {
		return &InvalidError{Field: field, Reason: "empty"}
	}
	if len(id) > MaxIDLen {
		return &InvalidError{Field: field, Reason: "longer than " + strconv.Itoa(MaxIDLen) + " bytes"}
	}
	if !utf8.ValidString(id) {
		return &InvalidError{Field: field, Reason: "not valid UTF-8"}
	}
	for _, r := range id {
		switch {
		case r == '{' || r == '}':
			return &InvalidError{Field: field, Reason: "contains '{' or '}'"}
		case unicode.IsControl(r) || unicode.IsSpace(r):
			return &InvalidError{Field: field, Reason: fmt.Sprintf("contains %U", r)}
		}
	}
	return nil
}

// ValidateQty checks a unit count: 1 <= n <= max.
func ValidateQty(field string, n, max int64) error {
	if n < 1 || n > max {
		return &InvalidError{Field: field, Reason: fmt.Sprintf("%d is outside [1, %d]", n, max)}
	}
	return nil
}

// Validate checks the order: a valid ID, a valid UserID if one is given,
// 1 to MaxItems lines, each with a valid SKU and 1 <= Qty <= MaxQty, no
// SKU on two lines (duplicate lines are refused, not merged, so the order's
// identity is never ambiguous), and a HoldTTL of zero or 1ms..MaxHoldTTL.
func (o Order) Validate() error {
	if err := ValidateID("order.ID", o.ID); err != nil {
		return err
	}
	if o.UserID != "" {
		if err := ValidateID("order.UserID", o.UserID); err != nil {
			return err
		}
	}
	if err := validItems("order.Items", o.Items); err != nil {
		return err
	}
	return validHold("order.HoldTTL", o.HoldTTL)
}

// validItems checks an order's or a return's lines.
func validItems(field string, items []Item) error {
	if len(items) == 0 {
		return &InvalidError{Field: field, Reason: "no items"}
	}
	if len(items) > MaxItems {
		return &InvalidError{Field: field, Reason: "more than " + strconv.Itoa(MaxItems) + " items"}
	}
	// A valid order costs no allocation: field names are built for an
	// error only, and duplicates are found by comparing the lines.
	line := func(i int) string { return field + "[" + strconv.Itoa(i) + "]" }
	for i, it := range items {
		if ValidateID("", it.SKU) != nil {
			return ValidateID(line(i)+".SKU", it.SKU)
		}
		if it.Qty <= 0 || it.Qty > MaxQty {
			return ValidateQty(line(i)+".Qty", it.Qty, MaxQty)
		}
		for j := range i {
			if items[j].SKU == it.SKU {
				return &InvalidError{Field: line(i) + ".SKU", Reason: "SKU " + quote(it.SKU) + " appears on two lines"}
			}
		}
	}
	return nil
}

// validHold checks a hold time: zero (the default) or between a
// millisecond and MaxHoldTTL.
func validHold(field string, d time.Duration) error {
	if d < 0 || d > MaxHoldTTL || (d > 0 && d < time.Millisecond) {
		return &InvalidError{Field: field, Reason: d.String() + " is outside [1ms, " + MaxHoldTTL.String() + "]"}
	}
	return nil
}

// Validate checks the listing: a valid SKU, 0 <= Units <= MaxUnits,
// 0 <= PerUserLimit <= MaxUnits, HoldTTL and MaxHoldTTL each zero or
// 1ms..MaxHoldTTL, and a non-zero MaxHoldTTL no shorter than the
// effective hold time.
func (l Listing) Validate() error {
	if err := ValidateID("listing.SKU", l.SKU); err != nil {
		return err
	}
	if l.Units < 0 || l.Units > MaxUnits {
		return &InvalidError{Field: "listing.Units", Reason: fmt.Sprintf("%d is outside [0, %d]", l.Units, int64(MaxUnits))}
	}
	if l.PerUserLimit < 0 || l.PerUserLimit > MaxUnits {
		return &InvalidError{Field: "listing.PerUserLimit", Reason: fmt.Sprintf("%d is outside [0, %d]", l.PerUserLimit, int64(MaxUnits))}
	}
	if err := validHold("listing.HoldTTL", l.HoldTTL); err != nil {
		return err
	}
	if err := validHold("listing.MaxHoldTTL", l.MaxHoldTTL); err != nil {
		return err
	}
	if l.Buckets < 0 || l.Buckets > MaxBuckets {
		return &InvalidError{Field: "listing.Buckets", Reason: fmt.Sprintf("%d is outside [0, %d]", l.Buckets, MaxBuckets)}
	}
	if l.MaxHoldTTL != 0 && l.MaxHoldTTL < l.EffectiveHoldTTL() {
		return &InvalidError{Field: "listing.MaxHoldTTL", Reason: l.MaxHoldTTL.String() + " is shorter than the hold time " + l.EffectiveHoldTTL().String()}
	}
	return nil
}

// Validate checks the restock: a valid OpID and SKU and 1 <= Units <=
// MaxUnits.
func (r Restock) Validate() error {
	if err := ValidateID("restock.OpID", r.OpID); err != nil {
		return err
	}
	if err := ValidateID("restock.SKU", r.SKU); err != nil {
		return err
	}
	return ValidateQty("restock.Units", r.Units, MaxUnits)
}

// EffectiveHoldTTL returns l.HoldTTL, or DefaultHoldTTL when it is zero.
func (l Listing) EffectiveHoldTTL() time.Duration {
	if l.HoldTTL == 0 {
		return DefaultHoldTTL
	}
	return l.HoldTTL
}

// EffectiveMaxHoldTTL returns l.MaxHoldTTL, or the effective hold time
// when it is zero.
func (l Listing) EffectiveMaxHoldTTL() time.Duration {
	if l.MaxHoldTTL == 0 {
		return l.EffectiveHoldTTL()
	}
	return l.MaxHoldTTL
}

// Validate checks the return: a valid OpID and OrderID and 1 to MaxItems
// lines, each with a valid SKU and 1 <= Qty <= MaxQty, no SKU on two
// lines.
func (r Return) Validate() error {
	if err := ValidateID("return.OpID", r.OpID); err != nil {
		return err
	}
	if err := ValidateID("return.OrderID", r.OrderID); err != nil {
		return err
	}
	return validItems("return.Items", r.Items)
}

func quote(s string) string { return strconv.Quote(s) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
