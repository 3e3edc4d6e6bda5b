package browser

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// treeRSS returns the resident bytes of process pid and all its
// descendants (Chromium's renderers, GPU and utility processes), read from
// /proc; 0 where /proc is not there.
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
