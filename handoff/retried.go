package handoff

import "time"

// retried is what a Consumer knows of the messages it handed back for a
// Retry: each waits out its delay outside the queue's ready messages (in
// a broker's delayed set, or held by the Source), where a Fetch does not
// see it, and still counts in the hand-off's lag. A message is counted
// from its Retry until it is delivered again to the consumer, or until
// the consumer's first Fetch begun once its delay passed: by then it is
// back in the queue, for whichever consumer takes it to count. So a
// message retried here and settled elsewhere is counted no longer than
// its delay and one Fetch. The zero value is empty; a Consumer's mutex
// guards it.
type retried struct {
	due    map[retriedKey]retriedMsg
	oldest time.Time // the earliest Sent in due; zero when due is empty
}

// retriedKey tells the deliveries of one message apart from other
// messages: a broker delivers a message again with its order ID and Sent
// (a repeat of an order, published again, has its own Sent).
type retriedKey struct {
	id   string
	sent int64
}

type retriedMsg struct {
	sent time.Time
	due  time.Time // the system's time once its delay has passed
}

func keyOf(m Message) retriedKey { return retriedKey{m.Order.ID, m.Sent.UnixNano()} }

// add counts m, handed back for a Retry whose delay passes at due. A
// message without a Sent has no lag to count.
func (r *retried) add(m Message, due time.Time) {
	if m.Sent.IsZero() {
		return
	}
	if r.due == nil {
		r.due = map[retriedKey]retriedMsg{}
	}
	k := keyOf(m)
	if old, ok := r.due[k]; ok && old.due.After(due) {
		due = old.due
	}
	r.due[k] = retriedMsg{sent: m.Sent, due: due}
	if r.oldest.IsZero() || m.Sent.Before(r.oldest) {
		r.oldest = m.Sent
	}
}

// drop stops counting the messages ds delivers again and those whose
// delay had passed when the Fetch that returned ds began (asked).
func (r *retried) drop(ds []Delivery, asked time.Time) {
	if len(r.due) == 0 {
		return
	}
	for _, d := range ds {
		delete(r.due, keyOf(d.Message()))
	}
	r.oldest = time.Time{}
	for k, m := range r.due {
		if !m.due.After(asked) {
			delete(r.due, k)
			continue
		}
		if r.oldest.IsZero() || m.sent.Before(r.oldest) {
			r.oldest = m.sent
		}
	}
}

// clear stops counting every message: the consumer no longer fetches.
func (r *retried) clear() { *r = retried{} }
