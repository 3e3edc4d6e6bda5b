package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"
)

// profiles writes the CPU and heap profiles the environment asks for, for
// the whole run or once per interval.
type profiles struct {
	cpuPath, memPath string
	every            time.Duration

	mu   sync.Mutex
	n    int // windows written
	cpu  *os.File
	done chan struct{}
	wg   sync.WaitGroup
}

// startProfiles starts the profiles named (either path may be empty).
func startProfiles(cpuPath, memPath string, every time.Duration) (*profiles, error) {
	p := &profiles{cpuPath: cpuPath, memPath: memPath, every: every, done: make(chan struct{})}
	if err := p.startCPU(); err != nil {
		return nil, err
	}
	if every > 0 && (cpuPath != "" || memPath != "") {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-p.done:
					return
				case <-t.C:
					if err := p.window(); err != nil {
						fmt.Fprintln(os.Stderr, "grid:", err)
					}
				}
			}
		}()
	}
	return p, nil
}

// name is path, or path.N when profiles are written per window.
func (p *profiles) name(path string) string {
	if p.every <= 0 {
		return path
	}
	return path + "." + strconv.Itoa(p.n+1)
}

// startCPU starts the CPU profile of the current window. Callers hold p.mu
// or own p alone.
func (p *profiles) startCPU() error {
	if p.cpuPath == "" {
		return nil
	}
	f, err := os.Create(p.name(p.cpuPath))
	if err != nil {
		return fmt.Errorf("GRIDCRAWL_CPU_PROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("GRIDCRAWL_CPU_PROFILE: %w", err)
	}
	p.cpu = f
	return nil
}

// endWindow stops the CPU profile and writes the heap profile of the
// current window. Callers hold p.mu.
func (p *profiles) endWindow() error {
	var errs []error
	if p.cpu != nil {
		pprof.StopCPUProfile()
		errs = append(errs, p.cpu.Close())
		p.cpu = nil
	}
	if p.memPath != "" {
		f, err := os.Create(p.name(p.memPath))
		if err == nil {
			err = errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("GRIDCRAWL_MEM_PROFILE: %w", err))
		}
	}
	p.n++
	return errors.Join(errs...)
}

// window ends the current window and starts the next.
func (p *profiles) window() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return errors.Join(p.endWindow(), p.startCPU())
}

// stop ends the last window.
func (p *profiles) stop() error {
	close(p.done)
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.endWindow()
}
