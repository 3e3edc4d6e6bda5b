package proctree

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestTreeOfThisProcess(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	table := Table(true)
	self, ok := table[os.Getpid()]
	if !ok {
		t.Skip("no /proc")
	}
	var child *Proc
	for _, p := range Descendants(table, os.Getpid()) {
		if p.PID == cmd.Process.Pid {
			child = &p
		}
	}
	if child == nil || child.Cmd != "sleep 30" || child.RSS <= 0 {
		t.Fatalf("child %+v, want sleep 30 under this process", child)
	}
	// Proportional sizes are at most resident ones; this process grows
	// between the two reads, so the bound is loose.
	mem := TreeMemory(os.Getpid())
	if bound := 2 * (self.RSS + child.RSS); mem <= 0 || mem > bound {
		t.Errorf("tree memory %d, want positive and at most twice the resident sizes summed (%d)", mem, bound)
	}
}

func TestTreeCPU(t *testing.T) {
	before := TreeCPU(os.Getpid())
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
	}
	if got := TreeCPU(os.Getpid()) - before; got < 100*time.Millisecond {
		t.Errorf("300 ms of spinning counted as %v", got)
	}
}
