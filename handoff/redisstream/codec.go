package redisstream

import (
	"encoding/json"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/stock"
)

// wire is a message's payload on the stream: JSON in the field "m".
type wire struct {
	ID    string     `json:"id"`
	User  string     `json:"user,omitempty"`
	Items []wireItem `json:"items"`
	// HoldNS is the order's own hold time (stock.Order.HoldTTL), in ns.
	HoldNS     int64 `json:"hold_ns,omitempty"`
	DeadlineMS int64 `json:"deadline_ms,omitempty"`
	SentMS     int64 `json:"sent_ms,omitempty"`
	// Attempts counts the deliveries of the message before this copy
	// (a Retry's copy counts the retried delivery); Of is the entry ID
	// of the message as first published (a copy of a copy names the
	// same), which dates a message without a Sent time.
	Attempts int    `json:"attempts,omitempty"`
	Of       string `json:"of,omitempty"`
}

type wireItem struct {
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
}

func encode(m handoff.Message, attempts int, of string) string {
	w := wire{ID: m.Order.ID, User: m.Order.UserID, HoldNS: int64(m.Order.HoldTTL), Attempts: attempts, Of: of,
		Items: make([]wireItem, len(m.Order.Items))}
	for i, it := range m.Order.Items {
		w.Items[i] = wireItem{SKU: it.SKU, Qty: it.Qty}
	}
	if !m.Deadline.IsZero() {
		w.DeadlineMS = m.Deadline.UnixMilli()
	}
	if !m.Sent.IsZero() {
		w.SentMS = m.Sent.UnixMilli()
	}
	b, _ := json.Marshal(w) // strings and numbers only: cannot fail
	return string(b)
}

// decode reads a payload: the message, the deliveries before this copy
// and the entry ID of the message as first published ("" if this is it).
// One that does not parse yields the zero Message, whose order is
// invalid: the consumer dead-letters it.
func decode(payload string) (handoff.Message, int, string, error) {
	var w wire
	if err := json.Unmarshal([]byte(payload), &w); err != nil {
		return handoff.Message{}, 0, "", err
	}
	m := handoff.Message{Order: stock.Order{ID: w.ID, UserID: w.User, HoldTTL: time.Duration(w.HoldNS)}}
	for _, it := range w.Items {
		m.Order.Items = append(m.Order.Items, stock.Item{SKU: it.SKU, Qty: it.Qty})
	}
	if w.DeadlineMS != 0 {
		m.Deadline = time.UnixMilli(w.DeadlineMS)
	}
	if w.SentMS != 0 {
		m.Sent = time.UnixMilli(w.SentMS)
	}
	return m, w.Attempts, w.Of, nil
}
