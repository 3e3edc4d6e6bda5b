// Package proctree reads a process tree's processes and memory from Linux's
// /proc: the headless browser's memory check (pkg/browser) and the
// benchmarks' accounting of the processes under the grid (scripts/bench).
// Elsewhere than Linux it finds no process.
package proctree

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Proc is one process as /proc shows it.
type Proc struct {
	PID, PPID int
	RSS       int64  // resident bytes
	Cmd       string // command line, arguments joined by spaces
	// CPU is the time, user and system, the process used, with that of
	// the children it reaped.
	CPU time.Duration
}

// Table reads every process of /proc; with cmd false it leaves Cmd empty
// (one file less to read per process).
func Table(cmd bool) map[int]Proc {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	out := make(map[int]Proc, len(stats))
	page := int64(os.Getpagesize())
	for _, name := range stats {
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		// After the parenthesis: ppid is the 2nd field; utime, stime,
		// cutime and cstime the 12th to 15th; rss (pages) the 22nd.
		end := bytes.LastIndexByte(b, ')')
		if end < 0 {
			continue
		}
		f := bytes.Fields(b[end+1:])
		if len(f) < 22 {
			continue
		}
		pid, _ := strconv.Atoi(string(bytes.Fields(b)[0]))
		ppid, _ := strconv.Atoi(string(f[1]))
		pages, _ := strconv.ParseInt(string(f[21]), 10, 64)
		var ticks int64
		for _, v := range f[11:15] {
			n, _ := strconv.ParseInt(string(v), 10, 64)
			ticks += n
		}
		p := Proc{PID: pid, PPID: ppid, RSS: pages * page, CPU: time.Duration(ticks) * time.Second / clockTicks}
		if cmd {
			c, _ := os.ReadFile(filepath.Join(filepath.Dir(name), "cmdline"))
			p.Cmd = strings.TrimSpace(string(bytes.ReplaceAll(c, []byte{0}, []byte{' '})))
		}
		out[pid] = p
	}
	return out
}

// Descendants returns the processes under root in table, root excluded.
func Descendants(table map[int]Proc, root int) []Proc {
	children := map[int][]int{}
	for _, p := range table {
		children[p.PPID] = append(children[p.PPID], p.PID)
	}
	var out []Proc
	todo := append([]int(nil), children[root]...)
	for len(todo) > 0 {
		id := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		out = append(out, table[id])
		todo = append(todo, children[id]...)
	}
	return out
}

// PSS returns the proportional set size of process pid in bytes: its
// resident pages, each shared one divided among the processes sharing it.
func PSS(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0, false
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("Pss:")); ok {
			f := bytes.Fields(rest) // "12345 kB"
			if len(f) == 0 {
				return 0, false
			}
			kb, err := strconv.ParseInt(string(f[0]), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// Memory returns the memory of procs: the sum of their proportional set
// sizes, so that the code and data they share is counted once, and a
// process's resident size where the kernel gives no smaps_rollup.
func Memory(procs []Proc) int64 {
	var total int64
	for _, p := range procs {
		if pss, ok := PSS(p.PID); ok {
			total += pss
		} else {
			total += p.RSS
		}
	}
	return total
}

// TreeMemory returns the memory (Memory) of pid and all its descendants.
func TreeMemory(pid int) int64 {
	t := Table(false)
	procs := Descendants(t, pid)
	if p, ok := t[pid]; ok {
		procs = append(procs, p)
	}
	return Memory(procs)
}

// clockTicks is Linux's USER_HZ, the unit of /proc's CPU times.
const clockTicks = 100

// TreeCPU returns the CPU time, user and system, that pid and its
// descendants have used, with that of the children they have reaped (a
// browser's renderers that exited): for the difference between two calls.
func TreeCPU(pid int) time.Duration {
	t := Table(false)
	total := t[pid].CPU
	for _, p := range Descendants(t, pid) {
		total += p.CPU
	}
	return total
}
