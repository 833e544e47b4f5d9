package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"sync"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
)

// Classes of a call's answer, from the caller's side of the outcome rule.
const (
	ClassOK          = "ok"          // nil
	ClassBusiness    = "business"    // a business refusal: final, nothing held
	ClassUnknown     = "unknown"     // stock.ErrUnknownOutcome: may or may not be applied
	ClassMixed       = "mixed"       // ErrUnknownOutcome together with ErrContention or ErrUnavailable
	ClassContention  = "contention"  // stock.ErrContention: nothing applied
	ClassUnavailable = "unavailable" // stock.ErrUnavailable: nothing applied
	ClassBusy        = "busy"        // degrade.ErrBusy: nothing written
	ClassPlain       = "plain"       // any other error: a plain failure, nothing applied by the rule
	ClassInFlight    = "inflight"    // no answer: the process died during the call
)

// Classify names the class of a call's answer.
func Classify(err error) string {
	switch {
	case err == nil:
		return ClassOK
	case errors.Is(err, stock.ErrUnknownOutcome):
		if errors.Is(err, stock.ErrContention) || errors.Is(err, stock.ErrUnavailable) {
			return ClassMixed
		}
		return ClassUnknown
	case stock.IsBusiness(err):
		return ClassBusiness
	case errors.Is(err, stock.ErrContention):
		return ClassContention
	case errors.Is(err, stock.ErrUnavailable):
		return ClassUnavailable
	case errors.Is(err, degrade.ErrBusy):
		return ClassBusy
	}
	return ClassPlain
}

// Event is one line of a sale's history: a call begun (Class empty) or
// answered, or a refusal seen at the record (Op "record-refused").
type Event struct {
	Op      string       `json:"op"` // "deduct", "confirm", "revert", "record-refused"
	ID      string       `json:"id"`
	User    string       `json:"user,omitempty"`
	Items   []stock.Item `json:"items,omitempty"`
	Class   string       `json:"class,omitempty"`
	Err     string       `json:"err,omitempty"`
	Ms      float64      `json:"ms,omitempty"`    // how long the call took
	Bound   float64      `json:"bound,omitempty"` // how long it was allowed to take
	Attempt int          `json:"attempt,omitempty"`
}

// History collects a sale's events, in memory and, when it has a journal,
// in a file of JSON lines written one event per write: a process killed
// with -9 loses no event it wrote.
type History struct {
	mu     sync.Mutex
	events []Event
	file   *os.File
}

// NewHistory returns a History; journal, if not empty, is appended to.
func NewHistory(journal string) (*History, error) {
	h := &History{}
	if journal != "" {
		f, err := os.OpenFile(journal, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		h.file = f
	}
	return h, nil
}

// Add records e.
func (h *History) Add(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.file != nil {
		b, _ := json.Marshal(e)
		_, _ = h.file.Write(append(b, '\n'))
		return
	}
	h.events = append(h.events, e)
}

// Events returns the events recorded in memory.
func (h *History) Events() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Event(nil), h.events...)
}

// Close closes the journal.
func (h *History) Close() error {
	if h.file != nil {
		return h.file.Close()
	}
	return nil
}

// ReadJournal reads the events of a journal file; a last line cut short
// by a kill is ignored.
func ReadJournal(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e Event
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}
