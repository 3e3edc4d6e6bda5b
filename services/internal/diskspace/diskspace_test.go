package diskspace

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestParseFloor(t *testing.T) {
	tests := []struct {
		in   string
		want Floor
		bad  bool
	}{
		{in: "64MiB", want: Floor{Bytes: 64 << 20}},
		{in: "0", want: Floor{}},
		{in: "1048576", want: Floor{Bytes: 1 << 20}},
		{in: "1.5 GiB", want: Floor{Bytes: 3 << 29}},
		{in: "2gb", want: Floor{Bytes: 2e9}},
		{in: "512k", want: Floor{Bytes: 512e3}},
		{in: "1%", want: Floor{Percent: 1}},
		{in: " 0.5 % ", want: Floor{Percent: 0.5}},
		{in: "100%", bad: true},
		{in: "-1MiB", bad: true},
		{in: "5 parsecs", bad: true},
		{in: "", bad: true},
		{in: "MiB", bad: true},
	}
	for _, tt := range tests {
		got, err := ParseFloor(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("ParseFloor(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.bad)
		}
	}
}

// sqliteErr has the Code method of modernc.org/sqlite's errors.
type sqliteErr int

func (e sqliteErr) Error() string { return fmt.Sprintf("sqlite error %d", int(e)) }
func (e sqliteErr) Code() int     { return int(e) }

func TestIsFull(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"ENOSPC wrapped", fmt.Errorf("append asset: %w", &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}), true},
		{"EDQUOT", fmt.Errorf("put: %w", syscall.EDQUOT), true},
		{"SQLITE_FULL", fmt.Errorf("commit: %w", sqliteErr(13)), true},
		{"SQLITE_IOERR_SHMSIZE", sqliteErr(4874), true},
		{"SQLITE_BUSY", sqliteErr(5), false},
		{"EIO", syscall.EIO, false},
		{"text only", errors.New("no space left on device"), false},
	}
	for _, tt := range tests {
		if got := IsFull(tt.err); got != tt.want {
			t.Errorf("%s: IsFull(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

// privateDisk mounts a tmpfs of 8 MiB, whose free space only the test
// changes, on a new directory; without the right to mount, the test fails
// when backends are required and skips otherwise.
func privateDisk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", dir).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("cannot mount a tmpfs (needs root): %v: %s", err, out)
		if os.Getenv("GRIDCRAWL_REQUIRE_BACKENDS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// TestWatch checks the floor and the failed writes on a file system of its
// own, and that a failed write's disk counts as available again once its
// free space has grown.
func TestWatch(t *testing.T) {
	dir := privateDisk(t)
	u, err := Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if u.Free <= 0 || u.Total < u.Free {
		t.Fatalf("Stat(%s) = %+v", dir, u)
	}
	above := Floor{Bytes: u.Free + 1<<40} // more than the disk has free
	tests := []struct {
		name    string
		floor   Floor
		note    error
		full    bool
		mention string
	}{
		{"no floor", Floor{}, nil, false, ""},
		{"floor below free space", Floor{Bytes: 1}, nil, false, ""},
		{"floor above free space", above, nil, true, "below the floor"},
		{"percentage above free space", Floor{Percent: 99.9999}, nil, u.Free < u.Total*999999/1000000, "below the floor"},
		{"a write failed for lack of space", Floor{}, fmt.Errorf("commit: %w", syscall.ENOSPC), true, "a write failed for lack of space"},
		{"another failure", Floor{}, syscall.EIO, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := New(dir, tt.floor)
			if got := w.Note(tt.note); got != IsFull(tt.note) {
				t.Errorf("Note(%v) = %v", tt.note, got)
			}
			err := w.Full()
			if (err != nil) != tt.full {
				t.Fatalf("Full() = %v, want full %v", err, tt.full)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("Full() = %q, want ErrFull naming %s and saying %q", err, dir, tt.mention)
			}
			if err := w.Check().Probe(t.Context()); err == nil {
				t.Errorf("the check passes on a full disk")
			}
		})
	}

	// A write fails with most of the disk taken; the disk is full until
	// that space is freed.
	fill := filepath.Join(dir, "fill")
	if err := os.WriteFile(fill, make([]byte, 7<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	w := New(dir, Floor{})
	w.Note(fmt.Errorf("append: %w", syscall.ENOSPC))
	if err := w.Full(); err == nil {
		t.Fatal("Full() = nil after a write failed for lack of space")
	}
	// A write that failed is cut back and gives its 2 MiB back; the next
	// write fails too: the disk is still full.
	if err := os.Truncate(fill, 5<<20); err != nil {
		t.Fatal(err)
	}
	w.Note(fmt.Errorf("commit: %w", syscall.ENOSPC))
	if err := w.Full(); err == nil {
		t.Fatal("Full() = nil after a second failure with the space of a cut-back write free")
	}
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	if err := w.Full(); err != nil {
		t.Errorf("Full() = %v once 7 MiB were freed", err)
	}
}

// TestWatchFailureNotedAfterFreeing: a write that failed on the full disk
// is noted a moment after space was freed (its failure raced the freeing).
// The disk must not stay full for the space that was freed: once that was
// the most free space a failed write "saw", and the disk waited for more
// than the file system has (TestEmbeddedDiskFull/floor stalled so, about
// one run in six).
func TestWatchFailureNotedAfterFreeing(t *testing.T) {
	dir := privateDisk(t)
	fill := filepath.Join(dir, "fill")
	if err := os.WriteFile(fill, make([]byte, 7<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	w := New(dir, Floor{})
	w.Note(fmt.Errorf("append: %w", syscall.ENOSPC))
	if err := w.Full(); err == nil {
		t.Fatal("Full() = nil after a write failed for lack of space")
	}
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	w.Note(fmt.Errorf("commit: %w", syscall.ENOSPC)) // failed before the space was freed
	if err := w.Full(); err != nil {
		t.Errorf("Full() = %v with 7 MiB freed since the disk was found full", err)
	}
}

// TestWatchFloorMargin checks that a disk whose free space fell below the
// floor stays full until it has the floor and a margin free (an eighth of
// this 8 MiB file system): a little space given back, as by an object
// replaced with its new copy, does not make it available.
func TestWatchFloorMargin(t *testing.T) {
	dir := privateDisk(t)
	w := New(dir, Floor{Bytes: 3 << 20})
	if err := w.Full(); err != nil {
		t.Fatalf("Full() = %v on an empty disk", err)
	}
	fill := filepath.Join(dir, "fill")
	for _, step := range []struct {
		size int64 // of the file that fills the disk
		full bool
	}{
		{6 << 20, true},          // about 2 MiB free: below the floor
		{5<<20 - 512<<10, true},  // about 3.5 MiB free: above the floor, within the margin
		{5 << 20, true},          // about 3 MiB free: still within it
		{3<<20 + 512<<10, false}, // about 4.5 MiB free: past the floor and the margin
		{4<<20 + 512<<10, false}, // about 3.5 MiB free: above the floor again
		{5<<20 + 512<<10, true},  // about 2.5 MiB free: below it once more
	} {
		if err := os.WriteFile(fill, make([]byte, step.size), 0o600); err != nil {
			t.Fatal(err)
		}
		u, err := Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		err = w.Full()
		if (err != nil) != step.full {
			t.Errorf("with %s free after %s written: Full() = %v, want full %v", FormatBytes(u.Free), FormatBytes(step.size), err, step.full)
		}
		if err != nil && (!errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "floor")) {
			t.Errorf("Full() = %q, want ErrFull naming the floor", err)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 64 << 20: "64.0 MiB", 3 << 29: "1.5 GiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
