package rabbitmq

import (
	"strconv"
	"sync"
	"sync/atomic"

	amqp "github.com/rabbitmq/amqp091-go"
)

// PublishHeader names the header that tells one publish from another on
// a channel, so that a message the broker returns (basic.return: no queue
// took it) is matched with its Publish. Its value means nothing outside.
const PublishHeader = "x-stockguard-publish"

// returned is how many returns a publishing channel keeps until a
// publisher reads them: more than the publishes one channel has waiting
// for their confirms at once.
const returned = 4096

// returns collects the messages the broker returned on one publishing
// channel, by their PublishHeader. The broker sends a message's
// basic.return before its confirm, and the client hands the return to
// this buffered channel before it resolves the confirm: so a publisher
// whose confirm came reads its return, if any, by draining the buffer.
type returns struct {
	c    chan amqp.Return
	next atomic.Uint64

	mu  sync.Mutex
	got map[string]bool
}

// newReturns registers a returns listener on ch.
func newReturns(ch *amqp.Channel) *returns {
	r := &returns{c: make(chan amqp.Return, returned), got: map[string]bool{}}
	ch.NotifyReturn(r.c)
	return r
}

// id returns the PublishHeader value of the next publish.
func (r *returns) id() string { return strconv.FormatUint(r.next.Add(1), 10) }

// take reports whether the publish id was returned, and forgets it.
func (r *returns) take(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for drained := false; !drained; {
		select {
		case ret, ok := <-r.c:
			if !ok {
				drained = true
				break
			}
			if v, ok := ret.Headers[PublishHeader].(string); ok {
				r.got[v] = true
			}
		default:
			drained = true
		}
	}
	was := r.got[id]
	delete(r.got, id)
	return was
}
