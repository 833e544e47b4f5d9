package redisstock

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Servers is what tells a reconciler that Redis lost its data: the run_id
// of every server holding the Store's keys (a Redis Cluster has one per
// master, each restarting or failing over on its own), and whether the
// Store's marker key is still there (a FLUSHALL or a restart without
// persistence removes it; run_id does not change on FLUSHALL).
type Servers struct {
	// RunIDs maps each server's address to its run_id; a server that does
	// not report one (INFO server unsupported) maps to "".
	RunIDs map[string]string
	// Marked reports whether the marker key set by Mark exists.
	Marked bool
}

// Changed reports whether s differs from an earlier reading: a server's
// run_id changed, a server appeared or went away, or the marker is gone.
func (s Servers) Changed(earlier Servers) bool {
	if !s.Marked || len(s.RunIDs) != len(earlier.RunIDs) {
		return true
	}
	for addr, id := range s.RunIDs {
		if prev, ok := earlier.RunIDs[addr]; !ok || prev != id {
			return true
		}
	}
	return false
}

func (s *Store) markerKey() string { return s.prefix + ":marker" }

// Mark sets the Store's marker key (no expiry). A reconciler sets it when a
// full pass starts, so that a later Servers reading without it means the
// data the pass rebuilt has been lost since.
// A context already done returns its error with nothing sent.
func (s *Store) Mark(ctx context.Context) (err error) {
	defer named(&err, "mark", "")
	if err := ctx.Err(); err != nil {
		return notSent(err)
	}
	return s.writeErr(ctx, s.c.Set(ctx, s.markerKey(), "1", 0).Err())
}

// Servers reads the servers' run_ids (INFO server on every master) and
// whether the marker key exists.
func (s *Store) Servers(ctx context.Context) (_ Servers, err error) {
	defer named(&err, "read servers", "")
	out := Servers{RunIDs: map[string]string{}}
	var mu sync.Mutex
	read := func(ctx context.Context, c *redis.Client) error {
		id, err := runIDOf(c.Info(ctx, "server"))
		if err != nil {
			return err
		}
		mu.Lock()
		out.RunIDs[c.Options().Addr] = id
		mu.Unlock()
		return nil
	}
	switch c := s.base().(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, read)
	case *redis.Client:
		err = read(ctx, c)
	default:
		var id string
		id, err = runIDOf(s.c.Info(ctx, "server"))
		out.RunIDs[""] = id
	}
	if err != nil {
		return Servers{}, s.readErr(ctx, err)
	}
	n, err := s.c.Exists(ctx, s.markerKey()).Result()
	if err != nil {
		return Servers{}, s.readErr(ctx, err)
	}
	out.Marked = n == 1
	return out, nil
}

// runIDOf parses run_id from an INFO reply. A server that refuses the
// section (a test double) has no run_id: "" and no error.
func runIDOf(cmd *redis.StringCmd) (string, error) {
	info, err := cmd.Result()
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(line, "run_id:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", nil
}
