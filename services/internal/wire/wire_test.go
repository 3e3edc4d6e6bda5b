package wire

import (
	"context"
	"log/slog"
	"testing"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
)

// TestEmbeddedMemoryQueues: with GRIDCRAWL_EMBEDDED_MEMORY_QUEUES the
// crawler and index queues are in memory (gone after a restart, which the
// coordinator's start-up rebuild makes up for), while the loader queue, its
// shards and the dead letters of every queue stay in the durable queue
// file. Turned off, every queue is durable.
func TestEmbeddedMemoryQueues(t *testing.T) {
	durable := []string{contracts.QueueLoader, contracts.QueueLoader + ".3", queue.DeadLetterQueue(contracts.QueueCrawler), queue.DeadLetterQueue(contracts.QueueIndex), "other"}
	memory := []string{contracts.QueueCrawler, contracts.QueueIndex}
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
			b := Backends{DataDir: t.TempDir(), QueueMaxAttempts: 5, EmbeddedMemoryQueues: on}
			ctx := context.Background()
			log := slog.New(slog.DiscardHandler)
			s, err := Open(ctx, b, log)
			if err != nil {
				t.Fatalf("Open() = %v", err)
			}
			if s.MemoryQueues != on {
				t.Errorf("Set.MemoryQueues = %v, want %v", s.MemoryQueues, on)
			}
			for _, name := range append(durable, memory...) {
				if err := s.Queue.Publish(ctx, name, queue.Message{Body: []byte(name)}); err != nil {
					t.Fatalf("Publish(%q) = %v", name, err)
				}
			}
			// A contract the crawler dead-letters survives too.
			ch, err := s.Queue.Consume(ctx, contracts.QueueCrawler, queue.ConsumeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := (<-ch).DeadLetter(ctx, "undecodable"); err != nil {
				t.Fatalf("DeadLetter() = %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("Close() = %v", err)
			}

			s, err = Open(ctx, b, log)
			if err != nil {
				t.Fatalf("Open() again = %v", err)
			}
			defer s.Close()
			for _, name := range durable {
				want := 1
				if name == queue.DeadLetterQueue(contracts.QueueCrawler) {
					want = 2
				}
				if n, err := s.Queue.Len(ctx, name); err != nil || n != want {
					t.Errorf("after a restart Len(%q) = %d, %v, want %d", name, n, err, want)
				}
			}
			for _, name := range memory {
				want := 1
				if on {
					want = 0
				}
				if name == contracts.QueueCrawler {
					want = 0 // dead-lettered
				}
				if n, err := s.Queue.Len(ctx, name); err != nil || n != want {
					t.Errorf("after a restart Len(%q) = %d, %v, want %d", name, n, err, want)
				}
			}
		})
	}
}

// TestMemoryQueuesReadiness: with the crawler and index queues in memory,
// the queue's readiness check still asks the queue file, which can fail
// where memory cannot.
func TestMemoryQueuesReadiness(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Backends{DataDir: t.TempDir(), QueueMaxAttempts: 5, EmbeddedMemoryQueues: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	defer s.Close()
	var probe func(context.Context) error
	for _, c := range s.Checks(false) {
		if c.Backend == "queue" {
			probe = c.Probe
		}
	}
	if probe == nil {
		t.Fatal("no queue check")
	}
	if err := probe(ctx); err != nil {
		t.Fatalf("queue check = %v, want nil", err)
	}
	if err := s.durableQueue.Close(); err != nil {
		t.Fatal(err)
	}
	if err := probe(ctx); err == nil {
		t.Error("queue check with the queue file closed = nil, want an error")
	}
}
