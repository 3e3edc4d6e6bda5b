package browser

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// treeRSS returns the memory of process pid and all its descendants
// (Chromium's renderers, GPU and utility processes), read from /proc: each
// process's proportional set size (a page shared by n processes counts 1/n
// in each), so that the shared code of a dozen processes is counted once;
// its resident size where the kernel gives no smaps_rollup. 0 where /proc
// is not there.
func treeRSS(pid int) int64 {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	children := map[int][]int{}
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		end := bytes.LastIndexByte(b, ')')
		if end < 0 {
			continue
		}
		f := bytes.Fields(b[end+1:])
		if len(f) < 2 {
			continue
		}
		id, _ := strconv.Atoi(string(bytes.Fields(b)[0]))
		ppid, _ := strconv.Atoi(string(f[1]))
		children[ppid] = append(children[ppid], id)
	}
	var total int64
	page := int64(os.Getpagesize())
	todo := []int{pid}
	for len(todo) > 0 {
		id := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		todo = append(todo, children[id]...)
		if pss, ok := procPSS(id); ok {
			total += pss
			continue
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(id) + "/statm")
		if err != nil {
			continue
		}
		if f := bytes.Fields(b); len(f) > 1 {
			n, _ := strconv.ParseInt(string(f[1]), 10, 64)
			total += n * page
		}
	}
	return total
}

// procPSS returns the proportional set size of process pid in bytes.
func procPSS(pid int) (int64, bool) {
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
